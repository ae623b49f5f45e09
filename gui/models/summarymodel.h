// The predicted step as item models for the dashboard's Summary view and its memory
// chart. SummaryModel has one row per figure of `parasim simulate`'s summary (step time,
// throughput, TFLOP/s per device, MFU, bubble, communication and its exposed part per
// dimension, bottleneck), formatted as the command line formats them, with the raw number
// under RawRole; after a run, the measured figure and the error beside each. MemoryModel has one row per pipeline stage: the memory one rank of the
// stage needs, the device's capacity and whether it fits (red text when it does not), and
// the breakdown (weights, gradients, master, optimizer, activations, logits, workspace).
#pragma once

#include <QAbstractTableModel>
#include <QVector>

#include "workload/memory.hpp"
#include "scenario/scenario.hpp"
#include "report/compare.hpp"
#include "report/metrics.hpp"
#include "report/run_model.hpp"

namespace parasim::gui {

class SummaryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Metric, Value, Measured, Error, ColumnCount };
  static constexpr int RawRole = Qt::UserRole + 1;

  explicit SummaryModel(QObject* parent = nullptr);
  // The prediction; forgets a measurement shown beside it. With `run` (the scenario gives
  // the run's length), the whole run's rows too: time to train, goodput, interruptions,
  // checkpoint interval, energy, device-hours and cost, as simulate's run block.
  void setFigures(const scenario::Scenario& s, const report::StepFigures& f, const report::RunEstimate* run = nullptr);
  // After Run for real on the same plan: the Measured and Error columns, from validate's
  // comparison (the throughputs from the measured step time). The error is validate's: its
  // prediction of the plan as the executor runs it (without dropout), which a tooltip
  // gives where it differs from the Predicted column. Empty rows hide them.
  void setMeasured(const std::vector<report::ComparisonRow>& rows);
  [[nodiscard]] bool hasMeasured() const { return m_measured; }
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  // The displayed value of a metric by name ("" when absent).
  [[nodiscard]] QString value(const QString& metric) const;

 private:
  struct Row {
    QString metric;
    QString text;
    double raw = 0.0;
    QString measured{};  // empty: not measured
    QString error{};
    QString basis{};     // what the error compares: validate's prediction of the plan as run
  };
  QVector<Row> m_rows;
  bool m_measured = false;
};

// Host: what the rank keeps in host memory when the plan offloads (Fits then also says
// whether that fits the rank's share of its node's host memory).
class MemoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Stage, Total, Capacity, Fits, Weights, Gradients, Master, Optimizer, Activations, Logits, Workspace, Host, ColumnCount
  };
  static constexpr int RawRole = Qt::UserRole + 1;  // bytes; the stage; whether it fits
  static constexpr int GiBRole = Qt::UserRole + 2;  // the column in GiB, for charts

  explicit MemoryModel(QObject* parent = nullptr);
  void setReport(const workload::MemoryReport& r);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  [[nodiscard]] double capacity() const { return m_report.capacity; }
  [[nodiscard]] const workload::MemoryReport& report() const { return m_report; }
  // The stage fits the device's memory and, offloading, its share of the host's.
  [[nodiscard]] bool fits(int row) const;

 private:
  [[nodiscard]] double bytes(int row, int column) const;
  workload::MemoryReport m_report;
};

}  // namespace parasim::gui
