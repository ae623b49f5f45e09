// The dashboard's charts (Qt Charts), each drawn from a FigureTableModel and redrawn when
// the model resets: the only place that knows Qt Charts' types besides the Summary tab.
#pragma once

#include <QString>
#include <functional>
#include <vector>

class QChartView;
class QValueAxis;
class QWidget;

namespace parasim::gui {

class FigureTableModel;

// What an axis plots: raw values in seconds, bytes or plain numbers, shown in the unit that
// suits the largest (ms rather than 0.001 s, GiB rather than 20000 MiB).
enum class Quantity { seconds, bytes, count };

struct AxisUnit {
  QString name;        // "ms", "GiB", "K" (thousands), "" for plain numbers
  double scale = 1.0;  // raw value x scale is plotted
};
AxisUnit unitFor(Quantity q, double largest);
// The axis from 0 to a round top in 4 to 6 round steps (1, 2 or 5 x 10^k), labels with no
// more decimals than the step needs, titled `title`.
void setNiceRange(QValueAxis* axis, double top, const QString& title);

struct BarChartSpec {
  QString title;
  QString axisTitle;  // the quantity's name; the unit is added: "time (ms)"
  Quantity quantity = Quantity::seconds;
  std::vector<int> columns;  // one bar set per column, named by its header
  bool stacked = false;
  std::function<bool(int row)> keepRow;  // all rows when empty
};

// Bars per row (categories from column 0's text).
QChartView* barChart(FigureTableModel* model, BarChartSpec spec, QWidget* parent);
// Tokens/s and the ideal line against GPUs (log 2 axis, its ticks the GPU counts), from a
// scaling model.
QChartView* scalingChart(FigureTableModel* model, QWidget* parent);
// The whole run against cluster size (the scaling sweep's points, scaling:: columns):
// goodput (left axis) and the expected time to train in days (right axis) against GPUs on
// a log axis; a note in the title where the scenario gives no run length.
QChartView* goodputChart(FigureTableModel* model, QWidget* parent);

}  // namespace parasim::gui
