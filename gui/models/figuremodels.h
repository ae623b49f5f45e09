// Item models behind the dashboard's charts and their tables. FigureTableModel is a plain
// table of cells, each with its text (formatted as the command line formats it) and raw
// number (RawRole, what the charts plot); the show* functions fill one from parasim's
// results, so each chart and the table beside it read the same model:
//   showRankBreakdown  per rank: compute, exposed tp / pp / dp communication, bubble,
//                      the rest of the step (hidden communication and idle time)
//   showRankMemory     per rank: predicted model tensors (the stage's memory without the
//                      runtime's workspace, as validate compares them) and measured peak
//   showComparison     prediction against measurement per metric, with the error
//   showScaling        the dp sweep: GPUs, step time, tokens/s, ideal, efficiency
#pragma once

#include <QAbstractTableModel>
#include <QColor>
#include <QVector>
#include <vector>

#include "workload/memory.hpp"
#include "scenario/scenario.hpp"
#include "report/compare.hpp"
#include "report/metrics.hpp"

namespace parasim::gui {

struct Scaling;

class FigureTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int RawRole = Qt::UserRole + 1;
  struct Cell {
    QString text;
    QVariant raw;
    QColor color;  // text colour when valid
  };

  explicit FigureTableModel(QObject* parent = nullptr);
  void setTable(QStringList headers, QVector<QVector<Cell>> rows);
  void clear() { setTable({}, {}); }
  [[nodiscard]] double raw(int row, int column) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  QStringList m_headers;
  QVector<QVector<Cell>> m_rows;
};

namespace breakdown {
enum Column { Rank, Compute, Tp, Pp, Dp, Cp, Ep, Bubble, Other, ColumnCount };
}
namespace rankmemory {
enum Column { Rank, Stage, Predicted, Measured, ColumnCount };
}
namespace comparison {
enum Column { Metric, Predicted, Measured, Error, ColumnCount };
}
namespace scaling {
// Goodput and TimeToTrain: the whole run at each size (empty text where the scenario gives
// no run length).
enum Column { Gpus, Dp, StepTime, Tokens, Ideal, Efficiency, Goodput, TimeToTrain, ColumnCount };
}

// At most `maxRanks` ranks (the first ones); raw values in seconds.
void showRankBreakdown(FigureTableModel& m, const report::StepFigures& f, int maxRanks);
// Raw values in bytes; `measured` may be empty (no run yet) or hold a peak per rank.
void showRankMemory(FigureTableModel& m, const scenario::Scenario& s, const workload::MemoryReport& r,
                    const std::vector<double>& measured, int maxRanks);
// Raw values in the row's unit (seconds, bytes, fraction); the error as a fraction.
void showComparison(FigureTableModel& m, const std::vector<report::ComparisonRow>& rows);
void showScaling(FigureTableModel& m, const Scaling& s);

}  // namespace parasim::gui
