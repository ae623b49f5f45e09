#include "charts.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QValueAxis>
#include <cmath>

#include "models/figuremodels.h"

namespace parasim::gui {

AxisUnit unitFor(Quantity q, double largest) {
  if (!(largest > 0.0)) largest = 1.0;  // nothing to show yet: the base unit
  switch (q) {
    case Quantity::seconds:
      if (largest >= 1.0) return {QStringLiteral("s"), 1.0};
      if (largest >= 1e-3) return {QStringLiteral("ms"), 1e3};
      if (largest >= 1e-6) return {QStringLiteral("us"), 1e6};
      return {QStringLiteral("ns"), 1e9};
    case Quantity::bytes: {
      const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
      int i = 0;
      double scale = 1.0;
      while (i < 5 && largest * scale >= 1024.0) {
        scale /= 1024.0;
        ++i;
      }
      return {QString::fromLatin1(names[i]), scale};
    }
    case Quantity::count:
      if (largest >= 1e9) return {QStringLiteral("billions"), 1e-9};
      if (largest >= 1e6) return {QStringLiteral("millions"), 1e-6};
      if (largest >= 1e4) return {QStringLiteral("thousands"), 1e-3};
      return {QString(), 1.0};
  }
  return {QString(), 1.0};
}

void setNiceRange(QValueAxis* axis, double top, const QString& title) {
  if (!(top > 0.0)) top = 1.0;
  // The step: 1, 2 or 5 x 10^k, the smallest giving at most 5 steps to the top.
  const double decade = std::pow(10.0, std::floor(std::log10(top / 5.0)));
  double step = decade;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    step = f * decade;
    if (top / step <= 5.0 + 1e-9) break;
  }
  const int steps = std::max(1, int(std::ceil(top / step - 1e-9)));
  axis->setRange(0.0, steps * step);
  axis->setTickCount(steps + 1);
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  axis->setLabelFormat(QStringLiteral("%.%1f").arg(decimals));
  axis->setTitleText(title);
}

QChartView* barChart(FigureTableModel* model, BarChartSpec spec, QWidget* parent) {
  auto* chart = new QChart();
  chart->setTitle(spec.title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QFont small = chart->legend()->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  chart->legend()->setFont(small);
  QAbstractBarSeries* series = spec.stacked ? static_cast<QAbstractBarSeries*>(new QStackedBarSeries(chart))
                                            : static_cast<QAbstractBarSeries*>(new QBarSeries(chart));
  chart->addSeries(series);
  auto* categories = new QBarCategoryAxis(chart);
  auto* values = new QValueAxis(chart);
  chart->addAxis(categories, Qt::AlignBottom);
  chart->addAxis(values, Qt::AlignLeft);
  series->attachAxis(categories);
  series->attachAxis(values);
  auto redraw = [model, spec, series, categories, values] {
    series->clear();
    std::vector<int> rows;
    for (int r = 0; r < model->rowCount(); ++r) {
      if (!spec.keepRow || spec.keepRow(r)) rows.push_back(r);
    }
    QStringList names;
    for (const int r : rows) names << model->index(r, 0).data().toString();
    // The largest bar (or stack) in raw units picks the unit.
    std::vector<double> stack(rows.size(), 0.0);
    double top = 0.0;
    for (const int c : spec.columns) {
      if (c >= model->columnCount()) continue;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const double v = model->raw(rows[i], c);
        stack[i] = spec.stacked ? stack[i] + v : std::max(stack[i], v);
        top = std::max(top, stack[i]);
      }
    }
    const AxisUnit unit = unitFor(spec.quantity, top);
    for (const int c : spec.columns) {
      if (c >= model->columnCount()) continue;
      auto* set = new QBarSet(model->headerData(c, Qt::Horizontal).toString());
      for (const int r : rows) *set << model->raw(r, c) * unit.scale;
      series->append(set);
    }
    categories->setCategories(names);
    setNiceRange(values, top * unit.scale * 1.05,
                 unit.name.isEmpty() ? spec.axisTitle : QStringLiteral("%1 (%2)").arg(spec.axisTitle, unit.name));
  };
  QObject::connect(model, &QAbstractItemModel::modelReset, series, redraw);
  redraw();
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

QChartView* scalingChart(FigureTableModel* model, QWidget* parent) {
  auto* chart = new QChart();
  chart->setTitle(QObject::tr("Scaling by data parallelism: throughput against GPUs"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* measured = new QLineSeries(chart);
  measured->setName(QObject::tr("predicted tokens/s"));
  auto* dots = new QScatterSeries(chart);
  dots->setMarkerSize(8);
  dots->setName(QObject::tr("sweep points"));
  auto* ideal = new QLineSeries(chart);
  ideal->setName(QObject::tr("ideal (linear from the smallest)"));
  ideal->setPen(QPen(Qt::gray, 1.5, Qt::DashLine));
  auto* gpus = new QLogValueAxis(chart);
  gpus->setBase(2.0);
  gpus->setLabelFormat(QStringLiteral("%g"));
  gpus->setTitleText(QObject::tr("GPUs"));
  auto* tokens = new QValueAxis(chart);
  chart->addAxis(gpus, Qt::AlignBottom);
  chart->addAxis(tokens, Qt::AlignLeft);
  for (QXYSeries* s : {static_cast<QXYSeries*>(ideal), static_cast<QXYSeries*>(measured), static_cast<QXYSeries*>(dots)}) {
    chart->addSeries(s);
    s->attachAxis(gpus);
    s->attachAxis(tokens);
  }
  auto redraw = [model, measured, dots, ideal, gpus, tokens] {
    double top = 0.0;
    for (int r = 0; r < model->rowCount(); ++r) top = std::max({top, model->raw(r, scaling::Tokens), model->raw(r, scaling::Ideal)});
    const AxisUnit unit = unitFor(Quantity::count, top);
    QList<QPointF> m;
    QList<QPointF> i;
    double most = 1.0;
    for (int r = 0; r < model->rowCount(); ++r) {
      const double g = model->raw(r, scaling::Gpus);
      m << QPointF(g, model->raw(r, scaling::Tokens) * unit.scale);
      i << QPointF(g, model->raw(r, scaling::Ideal) * unit.scale);
      most = std::max(most, g);
    }
    measured->replace(m);
    dots->replace(m);
    ideal->replace(i);
    const double least = m.isEmpty() ? 1.0 : m.front().x();
    gpus->setRange(least / 1.2, most * 1.2);
    // One tick per power of two from the smallest to the largest count.
    gpus->setMinorTickCount(0);
    setNiceRange(tokens, top * unit.scale * 1.05,
                 unit.name.isEmpty() ? QObject::tr("tokens/s") : QObject::tr("tokens/s (%1)").arg(unit.name));
  };
  QObject::connect(model, &QAbstractItemModel::modelReset, chart, redraw);
  redraw();
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

QChartView* goodputChart(FigureTableModel* model, QWidget* parent) {
  auto* chart = new QChart();
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* goodput = new QLineSeries(chart);
  goodput->setName(QObject::tr("goodput"));
  auto* days = new QLineSeries(chart);
  days->setName(QObject::tr("expected time to train"));
  days->setPen(QPen(QColor(200, 110, 20), 2));
  auto* gpus = new QLogValueAxis(chart);
  gpus->setBase(2.0);
  gpus->setLabelFormat(QStringLiteral("%g"));
  gpus->setTitleText(QObject::tr("GPUs"));
  auto* share = new QValueAxis(chart);
  share->setTitleText(QObject::tr("goodput (%)"));
  auto* time = new QLogValueAxis(chart);  // a small cluster's run is many times a large one's
  time->setBase(10.0);
  time->setLabelFormat(QStringLiteral("%g"));
  time->setTitleText(QObject::tr("time to train (days)"));
  chart->addAxis(gpus, Qt::AlignBottom);
  chart->addAxis(share, Qt::AlignLeft);
  chart->addAxis(time, Qt::AlignRight);
  chart->addSeries(goodput);
  chart->addSeries(days);
  goodput->attachAxis(gpus);
  goodput->attachAxis(share);
  days->attachAxis(gpus);
  days->attachAxis(time);
  auto redraw = [model, chart, goodput, days, gpus, share, time] {
    QList<QPointF> g;
    QList<QPointF> d;
    double least = 0.0, most = 1.0, longest = 0.0, shortest = 0.0;
    for (int r = 0; r < model->rowCount(); ++r) {
      const double n = model->raw(r, scaling::Gpus);
      const double t = model->raw(r, scaling::TimeToTrain);
      if (t <= 0.0) continue;
      g << QPointF(n, 100.0 * model->raw(r, scaling::Goodput));
      d << QPointF(n, t / 86400.0);
      least = least == 0.0 ? n : std::min(least, n);
      most = std::max(most, n);
      longest = std::max(longest, t / 86400.0);
      shortest = shortest == 0.0 ? t / 86400.0 : std::min(shortest, t / 86400.0);
    }
    goodput->replace(g);
    days->replace(d);
    chart->setTitle(g.isEmpty() ? QObject::tr("The whole run against GPUs: set training.tokens or training.steps")
                                : QObject::tr("The whole run against GPUs: goodput and time to train, failures counted"));
    gpus->setRange(least > 0.0 ? least / 1.2 : 1.0, most * 1.2);
    gpus->setMinorTickCount(0);
    share->setRange(0.0, 100.0);
    // Whole decades around the runs' times.
    const double low = shortest > 0.0 ? std::pow(10.0, std::floor(std::log10(shortest))) : 0.1;
    const double high = longest > 0.0 ? std::pow(10.0, std::ceil(std::log10(longest * 1.0001))) : 1.0;
    time->setRange(low, std::max(high, low * 10.0));
  };
  QObject::connect(model, &QAbstractItemModel::modelReset, chart, redraw);
  redraw();
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

}  // namespace parasim::gui
