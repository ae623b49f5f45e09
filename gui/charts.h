// The dashboard's charts (Qt Charts), each drawn from a FigureTableModel and redrawn when
// the model resets: the only place that knows Qt Charts' types besides the Summary tab.
#pragma once

#include <QString>
#include <functional>
#include <vector>

class QChartView;
class QWidget;

namespace parasim::gui {

class FigureTableModel;

struct BarChartSpec {
  QString title;
  QString axisTitle;
  std::vector<int> columns;  // one bar set per column, named by its header
  double scale = 1.0;        // raw value x scale is plotted
  bool stacked = false;
  std::function<bool(int row)> keepRow;  // all rows when empty
};

// Bars per row (categories from column 0's text).
QChartView* barChart(FigureTableModel* model, BarChartSpec spec, QWidget* parent);
// Tokens/s and the ideal line against GPUs (log 2 axis), from a scaling model.
QChartView* scalingChart(FigureTableModel* model, QWidget* parent);

}  // namespace parasim::gui
