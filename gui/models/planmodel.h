// The planner's ranking as an item model: one row per plan that fits, best first, the
// columns `parasim plan` prints (formatted the same way) with the raw number under RawRole
// so a QSortFilterProxyModel sorts by value. planOverrides() gives a row's --set overrides,
// which the window loads into the plan editor.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>

#include "planner/planner.hpp"

namespace parasim::gui {

// A search's outcome as the window's worker returns it: the report, or why there is none.
struct PlanSearch {
  planner::PlanReport report;
  QString error;
  bool cancelled = false;
};

class PlanModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Rank, Dp, Tp, Pp, Cp, Ep, Virtual, Schedule, MicroBatch, Recompute, Zero, Sp, Placement, StepTime, Tokens, Mfu, Memory, Tier,
    Bottleneck, ColumnCount
  };
  static constexpr int RawRole = Qt::UserRole + 1;

  explicit PlanModel(QObject* parent = nullptr);
  // Shows at most `rows` plans of the report.
  void setReport(const planner::PlanReport& report, int rows = 500);
  [[nodiscard]] QStringList planOverrides(int row) const;
  [[nodiscard]] const planner::PlanReport& report() const { return m_report; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  planner::PlanReport m_report;
  int m_rows = 0;
};

}  // namespace parasim::gui

Q_DECLARE_METATYPE(parasim::gui::PlanSearch)
