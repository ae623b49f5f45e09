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

#include "models/figuremodels.h"

namespace parasim::gui {

QChartView* barChart(FigureTableModel* model, BarChartSpec spec, QWidget* parent) {
  auto* chart = new QChart();
  chart->setTitle(spec.title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  QAbstractBarSeries* series = spec.stacked ? static_cast<QAbstractBarSeries*>(new QStackedBarSeries(chart))
                                            : static_cast<QAbstractBarSeries*>(new QBarSeries(chart));
  chart->addSeries(series);
  auto* categories = new QBarCategoryAxis(chart);
  auto* values = new QValueAxis(chart);
  values->setTitleText(spec.axisTitle);
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
    std::vector<double> stack(rows.size(), 0.0);
    double top = 0.0;
    for (const int c : spec.columns) {
      if (c >= model->columnCount()) continue;
      auto* set = new QBarSet(model->headerData(c, Qt::Horizontal).toString());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const double v = model->raw(rows[i], c) * spec.scale;
        *set << v;
        stack[i] = spec.stacked ? stack[i] + v : v;
        top = std::max(top, stack[i]);
      }
      series->append(set);
    }
    categories->setCategories(names);
    values->setRange(0.0, top > 0 ? top * 1.1 : 1.0);
    values->applyNiceNumbers();
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
  tokens->setTitleText(QObject::tr("tokens/s"));
  tokens->setLabelFormat(QStringLiteral("%.0f"));
  chart->addAxis(gpus, Qt::AlignBottom);
  chart->addAxis(tokens, Qt::AlignLeft);
  for (QXYSeries* s : {static_cast<QXYSeries*>(ideal), static_cast<QXYSeries*>(measured), static_cast<QXYSeries*>(dots)}) {
    chart->addSeries(s);
    s->attachAxis(gpus);
    s->attachAxis(tokens);
  }
  auto redraw = [model, measured, dots, ideal, gpus, tokens] {
    QList<QPointF> m;
    QList<QPointF> i;
    double top = 0.0;
    double most = 1.0;
    for (int r = 0; r < model->rowCount(); ++r) {
      const double g = model->raw(r, scaling::Gpus);
      m << QPointF(g, model->raw(r, scaling::Tokens));
      i << QPointF(g, model->raw(r, scaling::Ideal));
      top = std::max({top, model->raw(r, scaling::Tokens), model->raw(r, scaling::Ideal)});
      most = std::max(most, g);
    }
    measured->replace(m);
    dots->replace(m);
    ideal->replace(i);
    const double least = m.isEmpty() ? 1.0 : m.front().x();
    gpus->setRange(least / 1.2, most * 1.2);
    tokens->setRange(0.0, top > 0 ? top * 1.1 : 1.0);
    tokens->applyNiceNumbers();
  };
  QObject::connect(model, &QAbstractItemModel::modelReset, chart, redraw);
  redraw();
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

}  // namespace parasim::gui
