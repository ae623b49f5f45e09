// The predicted step as item models for the dashboard's Summary view and its memory
// chart. SummaryModel has one row per figure of `parasim simulate`'s summary (step time,
// throughput, TFLOP/s per device, MFU, bubble, communication and its exposed part per
// dimension, bottleneck), formatted as the command line formats them, with the raw number
// under RawRole. MemoryModel has one row per pipeline stage: the memory one rank of the
// stage needs, the device's capacity and whether it fits (red text when it does not), and
// the breakdown (weights, gradients, master, optimizer, activations, logits, workspace).
#pragma once

#include <QAbstractTableModel>
#include <QVector>

#include "plan/memory.hpp"
#include "plan/scenario.hpp"
#include "report/metrics.hpp"

namespace parasim::gui {

class SummaryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Metric, Value, ColumnCount };
  static constexpr int RawRole = Qt::UserRole + 1;

  explicit SummaryModel(QObject* parent = nullptr);
  void setFigures(const plan::Scenario& s, const report::StepFigures& f);
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
  };
  QVector<Row> m_rows;
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
  void setReport(const plan::MemoryReport& r);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  [[nodiscard]] double capacity() const { return m_report.capacity; }

 private:
  [[nodiscard]] double bytes(int row, int column) const;
  plan::MemoryReport m_report;
};

}  // namespace parasim::gui
