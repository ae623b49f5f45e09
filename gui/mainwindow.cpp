#include "mainwindow.h"

#include <QApplication>
#include <QBuffer>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFuture>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QHBoxLayout>
#include <QSaveFile>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBarModelMapper>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrentRun>
#include <vector>

#include "charts.h"
#include "files.h"
#include "models/figuremodels.h"
#include "models/linkmodel.h"
#include "models/planmodel.h"
#include "models/summarymodel.h"
#include "scenario/describe.hpp"
#include "scenario/load.hpp"
#include "planeditor.h"
#include "timeline/timelineview.h"
#include "topology/analysis.hpp"
#include "topology/units.hpp"
#include "topologyview.h"

namespace parasim::gui {

namespace {

QTableView* tableFor(QAbstractItemModel* model, QWidget* parent) {
  auto* view = new QTableView(parent);
  view->setModel(model);
  view->horizontalHeader()->setStretchLastSection(true);
  view->verticalHeader()->hide();
  return view;
}

// Ranks drawn in the per-rank charts: beyond this a bar per rank is unreadable.
constexpr int chartRanks = 64;

QChartView* bandwidthChart(LinkKindModel* kinds, QWidget* parent) {
  // The chart reads the same kind model a table would.
  auto* chart = new QChart();
  auto* series = new QBarSeries(chart);
  auto* mapper = new QVBarModelMapper(chart);
  mapper->setFirstBarSetColumn(LinkKindModel::TotalGBps);
  mapper->setLastBarSetColumn(LinkKindModel::TotalGBps);
  mapper->setSeries(series);
  mapper->setModel(kinds);
  chart->addSeries(series);
  chart->setTitle(QObject::tr("Total bandwidth by link kind (GB/s, one direction)"));
  chart->legend()->hide();
  auto* categories = new QBarCategoryAxis(chart);
  auto* values = new QValueAxis(chart);
  chart->addAxis(categories, Qt::AlignBottom);
  chart->addAxis(values, Qt::AlignLeft);
  series->attachAxis(categories);
  series->attachAxis(values);
  QObject::connect(kinds, &QAbstractItemModel::modelReset, chart, [kinds, categories, values] {
    QStringList names;
    double top = 0.0;
    for (int r = 0; r < kinds->rowCount(); ++r) {
      names << kinds->index(r, LinkKindModel::Kind).data().toString();
      top = std::max(top, kinds->index(r, LinkKindModel::TotalGBps).data().toDouble());
    }
    categories->setCategories(names);
    setNiceRange(values, top * 1.05, QObject::tr("GB/s"));
  });
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_summary(new QLabel(tr("Open a scenario (File > Open)"), this)),
      m_tabs(new QTabWidget(this)),
      m_linkView(new QTableView(this)),
      m_links(new LinkModel(this)),
      m_kinds(new LinkKindModel(this)),
      m_summaryModel(new SummaryModel(this)),
      m_memory(new MemoryModel(this)),
      m_breakdown(new FigureTableModel(this)),
      m_rankMemory(new FigureTableModel(this)),
      m_scaling(new FigureTableModel(this)),
      m_editor(new PlanEditor(this)),
      m_simulator(new Simulator(this)),
      m_sweeper(new Sweeper(this)),
      m_timeline(new TimelinePanel(this)),
      m_topology(new TopologyView(this)),
      m_run(new RunPanel(this)),
      m_scalingNote(new QLabel(this)),
      m_plans(new PlanModel(this)),
      m_planner(new LatestRunner(this)),
      m_planNote(new QLabel(tr("Search every valid plan of this model and batch on this cluster."), this)),
      m_planView(new QTableView(this)) {
  setWindowTitle(tr("parasim"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary->setFont(QFont(QStringLiteral("monospace")));
  m_summary->setWordWrap(true);
  m_summary->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_summary->setMargin(8);
  m_linkView->setModel(m_links);
  m_linkView->horizontalHeader()->setStretchLastSection(true);
  m_linkView->verticalHeader()->hide();

  m_tabs->addTab(makeSummaryView(), tr("Summary"));
  m_tabs->addTab(m_timeline, tr("Timeline"));
  m_tabs->addTab(makeTopologyView(), tr("Topology"));
  m_tabs->addTab(makeChartsView(), tr("Charts"));
  m_tabs->addTab(makePlannerView(), tr("Planner"));
  m_tabs->addTab(m_run, tr("Run for real"));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_summary);
  split->addWidget(m_tabs);
  split->setStretchFactor(1, 4);
  split->setSizes({120, 640});
  setCentralWidget(split);

  auto* dock = new QDockWidget(tr("Plan"), this);
  dock->setObjectName(QStringLiteral("plan-editor"));
  auto* scroll = new QScrollArea(dock);
  scroll->setWidget(m_editor);
  scroll->setWidgetResizable(true);
  dock->setWidget(scroll);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  m_editor->setEnabled(false);
  connect(m_editor, &PlanEditor::edited, this, &MainWindow::resimulate);
  connect(m_simulator, &Simulator::started, this, [this] { statusBar()->showMessage(tr("simulating...")); });
  connect(m_simulator, &Simulator::finished, this, &MainWindow::showOutcome);
  connect(m_sweeper, &Sweeper::finished, this, [this](const Scaling& sc) {
    showScaling(*m_scaling, sc);
    m_scalingNote->setText(sc.skipped.isEmpty() ? tr("weak scaling: dp grows, the batch per replica and tp x pp stay")
                                                : tr("not swept: %1").arg(sc.skipped.join(QStringLiteral("; "))));
  });
  connect(m_run, &RunPanel::loaded, this, [this](const RunResults& r) {
    showMeasured(r.measured);
    m_measuredFromRun = true;
    m_measuredOverrides = r.overrides;
    m_runComparison = r.comparison;
    if (m_outcome.ok() && m_outcome.overrides == m_measuredOverrides) m_summaryModel->setMeasured(m_runComparison);
    m_timeline->setMeasuredStale(m_outcome.ok() && m_outcome.overrides != m_measuredOverrides);
    statusBar()->showMessage(tr("measured %1: %2").arg(r.scenario, r.dir));
  });
  connect(m_run, &RunPanel::failed, this, [this](const QString& e) {
    m_timeline->clearMeasured(tr("the run failed: %1").arg(e));
    statusBar()->showMessage(tr("run failed: %1").arg(e));
  });

  makeMenus();
  resize(1300, 820);
}

QWidget* MainWindow::makeSummaryView() {
  auto* page = new QSplitter(Qt::Horizontal, this);
  QTableView* figures = tableFor(m_summaryModel, page);
  figures->setWordWrap(true);
  // The metric's name as wide as it needs, the figures sharing the rest; a row as tall as
  // its text (the bottleneck sentence wraps, whole).
  figures->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  connect(m_summaryModel, &QAbstractItemModel::modelReset, figures, [figures] {
    figures->horizontalHeader()->setSectionResizeMode(SummaryModel::Metric, QHeaderView::ResizeToContents);
    figures->resizeRowsToContents();
  });
  page->addWidget(figures);
  auto* right = new QSplitter(Qt::Vertical, page);
  right->addWidget(tableFor(m_memory, right));

  // Memory per stage against the capacity: one bar per stage stacked by what holds the
  // memory (weights, gradients, master weights, optimizer state, activations, the rest), the
  // capacity a line; a stage out of memory is named so under its bar.
  auto* chart = new QChart();
  chart->setTitle(tr("Memory per rank by pipeline stage"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* series = new QStackedBarSeries(chart);
  auto* capacity = new QLineSeries(chart);
  capacity->setName(tr("capacity"));
  capacity->setPen(QPen(QColor(200, 40, 40), 2, Qt::DashLine));
  chart->addSeries(series);
  chart->addSeries(capacity);
  auto* stages = new QBarCategoryAxis(chart);
  auto* size = new QValueAxis(chart);
  auto* along = new QValueAxis(chart);  // the capacity line's x, hidden
  chart->addAxis(stages, Qt::AlignBottom);
  chart->addAxis(size, Qt::AlignLeft);
  chart->addAxis(along, Qt::AlignTop);
  along->setVisible(false);
  series->attachAxis(stages);
  series->attachAxis(size);
  capacity->attachAxis(along);
  capacity->attachAxis(size);
  connect(m_memory, &QAbstractItemModel::modelReset, this, [this, series, capacity, stages, size, along] {
    series->clear();
    const workload::MemoryReport& mem = m_memory->report();
    const double cap = mem.capacity;
    double top = cap;
    for (const workload::MemoryBreakdown& b : mem.stages) top = std::max(top, b.total());
    const AxisUnit unit = unitFor(Quantity::bytes, top);
    using Part = double (*)(const workload::MemoryBreakdown&);
    const std::vector<std::pair<QString, Part>> parts{
        {tr("weights"), [](const workload::MemoryBreakdown& b) { return b.weights; }},
        {tr("gradients"), [](const workload::MemoryBreakdown& b) { return b.gradients; }},
        {tr("master weights"), [](const workload::MemoryBreakdown& b) { return b.master; }},
        {tr("optimizer state"), [](const workload::MemoryBreakdown& b) { return b.optimizer; }},
        {tr("activations"), [](const workload::MemoryBreakdown& b) { return b.activations; }},
        {tr("logits, runtime"),
         [](const workload::MemoryBreakdown& b) { return b.logits + b.workspace + b.communicators; }}};
    for (const auto& [name, part] : parts) {
      auto* set = new QBarSet(name);
      for (const workload::MemoryBreakdown& b : mem.stages) *set << part(b) * unit.scale;
      series->append(set);
    }
    QStringList names;
    for (int r = 0; r < m_memory->rowCount(); ++r) {
      const QString fits = m_memory->data(m_memory->index(r, MemoryModel::Fits)).toString();
      names << (m_memory->fits(r) ? tr("stage %1").arg(r) : tr("stage %1: %2").arg(r).arg(fits.toUpper()));
    }
    stages->setCategories(names);
    setNiceRange(size, top * unit.scale * 1.05, tr("per rank (%1)").arg(unit.name));
    along->setRange(0.0, 1.0);
    capacity->replace({QPointF(0.0, cap * unit.scale), QPointF(1.0, cap * unit.scale)});
  });
  auto* view = new QChartView(chart, right);
  view->setRenderHint(QPainter::Antialiasing);
  right->addWidget(view);
  right->setSizes({120, 480});
  page->addWidget(right);
  page->setSizes({420, 580});
  return page;
}

QWidget* MainWindow::makeTopologyView() {
  auto* page = new QSplitter(Qt::Horizontal, this);
  page->addWidget(m_topology);
  auto* right = new QSplitter(Qt::Vertical, page);
  right->addWidget(m_linkView);
  right->addWidget(bandwidthChart(m_kinds, right));
  page->addWidget(right);
  page->setSizes({800, 400});
  return page;
}

QWidget* MainWindow::makeChartsView() {
  auto* page = new QWidget(this);
  auto* grid = new QGridLayout(page);
  grid->addWidget(barChart(m_breakdown,
                           {tr("Where the time goes, per rank (first %1 ranks)").arg(chartRanks), tr("time"),
                            Quantity::seconds,
                            {breakdown::Compute, breakdown::Tp, breakdown::Pp, breakdown::Dp, breakdown::Cp, breakdown::Ep, breakdown::Bubble,
                             breakdown::Other},
                            true, {}},
                           page),
                  0, 0);
  grid->addWidget(barChart(m_rankMemory,
                           {tr("Memory per rank: model tensors, predicted and measured"), tr("memory"),
                            Quantity::bytes, {rankmemory::Predicted, rankmemory::Measured}, false, {}},
                           page),
                  0, 1);
  FigureTableModel* cmp = m_run->comparison();
  grid->addWidget(barChart(cmp,
                           {tr("Predicted against measured, per kind (Run for real)"), tr("time"),
                            Quantity::seconds, {comparison::Predicted, comparison::Measured}, false,
                            [cmp](int row) {
                              return cmp->index(row, comparison::Metric).data(FigureTableModel::RawRole).toString() ==
                                         QLatin1String("s") &&
                                     !cmp->index(row, comparison::Metric).data().toString().contains(QLatin1String("exposed"));
                            }},
                           page),
                  1, 0);
  auto* scalingBox = new QWidget(page);
  auto* v = new QVBoxLayout(scalingBox);
  v->setContentsMargins(0, 0, 0, 0);
  v->addWidget(scalingChart(m_scaling, scalingBox), 1);
  m_scalingNote->setWordWrap(true);
  v->addWidget(m_scalingNote);
  grid->addWidget(scalingBox, 1, 1);
  grid->addWidget(goodputChart(m_scaling, page), 2, 0, 1, 2);
  // Each row of charts tall enough for its axes' labels; the page scrolls where the window
  // is shorter.
  for (int row = 0; row < 3; ++row) grid->setRowMinimumHeight(row, 330);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(page);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

bool MainWindow::openScenario(const QString& path) {
  try {
    const scenario::Scenario s = scenario::load(path.toStdString());
    m_path = path;
    m_editor->setScenario(s);
    m_editor->setEnabled(true);
    setWindowTitle(tr("parasim - %1").arg(path));
    m_summary->setText(QString::fromStdString(scenario::describe(s)));
    rememberScenario(path);
    m_measured.reset();
    m_measuredFromRun = false;
    m_runComparison.clear();
    m_timeline->clearMeasured(tr("no measurement yet: Run for real, or File > Open trace"));
    m_run->setScenario(m_path, {});
    m_simulator->request(m_path, {});
    return true;
  } catch (const std::exception& e) {
    m_summary->setText(QString::fromStdString(e.what()));
    return false;
  }
}

void MainWindow::resimulate() {
  if (m_path.isEmpty()) return;
  m_simulator->request(m_path, m_editor->overrides());
}

void MainWindow::showOutcome(const Outcome& o) {
  m_outcome = o;
  if (!o.ok()) {
    // At the key's field, what was expected; where it came from (an edit's --set, a file's
    // line) is the command line's business.
    m_editor->showError(o.errorKey, o.errorMessage);
    m_run->setScenario(QString(), {});
    statusBar()->showMessage(tr("invalid plan: %1").arg(o.errorKey.isEmpty() ? o.errorMessage : o.errorKey + QStringLiteral(": ") + o.errorMessage));
    return;
  }
  m_editor->clearErrors();
  m_editor->refresh(*o.scenario);
  const scenario::Scenario& s = *o.scenario;
  const topology::TopologySummary sum = topology::summarize(*o.cluster);
  m_links->setCluster(o.cluster);
  m_linkView->resizeColumnsToContents();
  m_kinds->setSummary(sum);
  m_summaryModel->setFigures(s, o.figures, o.run ? &*o.run : nullptr);
  // The measurement beside the prediction while the plan is the one that ran.
  if (m_measuredFromRun && o.overrides == m_measuredOverrides) m_summaryModel->setMeasured(m_runComparison);
  m_memory->setReport(o.memory);
  m_timeline->setPredicted(o.timeline);
  if (m_measured && m_measuredFromRun) m_timeline->setMeasuredStale(o.overrides != m_measuredOverrides);
  m_topology->show(o.cluster, o.prediction->trace);
  showRankBreakdown(*m_breakdown, o.figures, chartRanks);
  showRankMemory();
  m_run->setScenario(o.path, o.overrides);
  m_sweeper->request(o.path, o.overrides);
  // What the figures rest on: a device profile measured or the datasheet's, and whether the
  // data-parallel replicas were folded into one (exactly, or approximately).
  const sim::Prediction& p = *o.prediction;
  const std::string profile = s.hardware.profile.empty()
                                  ? s.cluster.device.name + " datasheet figures, not calibrated (parasim calibrate measures a host)"
                                  : s.hardware.profile + " (measured)";
  std::string simulated = "every rank";
  if (p.program.one_replica()) {
    simulated = std::to_string(p.simulated_ranks()) + (p.simulated_ranks() == 1 ? " rank" : " ranks") +
                " standing for " + std::to_string(p.stats.replicas) +
                " data-parallel replicas, " +
                (p.stats.exact ? "exact (no link carries two replicas' traffic)"
                               : "approximate (replicas share links, their contention estimated)");
  }
  m_summary->setText(QString::fromStdString(
      scenario::describe(s) + "topology  injection " + units::format_bandwidth(sum.injection_intra) + " intra / " +
      (sum.injection_inter > 0 ? units::format_bandwidth(sum.injection_inter) : std::string("none")) +
      " inter per device, bisection " + units::format_bandwidth(sum.bisection) + "\nprofile   " + profile +
      "\nsimulated " + simulated));
  statusBar()->showMessage(tr("simulated in %1 ms%2")
                               .arg(qRound(o.seconds * 1000.0))
                               .arg(o.overrides.isEmpty() ? QString() : tr(" with ") + o.overrides.join(QLatin1Char(' '))));
}

void MainWindow::showMeasured(std::shared_ptr<const TimelineTrace> measured) {
  m_measured = std::move(measured);
  m_measuredFromRun = false;  // a file's plan is not known
  m_timeline->setMeasured(m_measured);
  showRankMemory();
}

void MainWindow::showRankMemory() {
  if (!m_outcome.ok() || !m_outcome.scenario) return;
  std::vector<double> measured;
  if (m_measured && int(m_measured->memoryPeak.size()) == m_outcome.scenario->plan.world()) measured = m_measured->memoryPeak;
  gui::showRankMemory(*m_rankMemory, *m_outcome.scenario, m_outcome.memory, measured, chartRanks);
}

QString MainWindow::saveScenario(const QString& path) {
  if (m_path.isEmpty()) return tr("no scenario is open");
  std::vector<std::string> sets;
  for (const QString& o : m_editor->overrides()) sets.push_back(o.toStdString());
  try {
    const std::string dir = QFileInfo(path).absolutePath().toStdString();
    const std::string text = "# saved by parasim-gui from " + m_path.toStdString() + "\n" +
                             scenario::scenario_yaml(m_path.toStdString(), sets, dir);
    QSaveFile out(path);  // all or nothing
    if (!out.open(QIODevice::WriteOnly) || out.write(text.data(), qint64(text.size())) != qint64(text.size()) || !out.commit()) {
      return tr("cannot write %1: %2").arg(path, out.errorString());
    }
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

void MainWindow::openTrace(const QString& path) {
  struct Read {
    std::shared_ptr<const TimelineTrace> trace;
    QString error;
  };
  ++m_loadingTraces;
  statusBar()->showMessage(tr("reading %1...").arg(path));
  QtConcurrent::run([path] {
    Read r;
    try {
      r.trace = std::make_shared<const TimelineTrace>(readTimelineFile(path));
    } catch (const std::exception& e) {
      r.error = QString::fromStdString(e.what());
    }
    return r;
  }).then(this, [this, path](const Read& r) {
    --m_loadingTraces;
    if (!r.error.isEmpty()) {
      statusBar()->showMessage(r.error);
      if (m_batch) {
        qCritical("%s", qPrintable(r.error));
      } else {
        QMessageBox::warning(this, tr("Cannot open the trace"), r.error);
      }
      emit traceFailed(r.error);
      return;
    }
    if (r.trace->kind == QLatin1String("predicted")) {
      m_timeline->setPredicted(r.trace);
    } else {
      showMeasured(r.trace);
    }
    m_tabs->setCurrentWidget(m_timeline);
    statusBar()->showMessage(tr("opened %1 (%2)").arg(path, r.trace->kind));
    emit traceLoaded(path);
  });
}

QString MainWindow::openRunFolder(const QString& dir) {
  try {
    const RunResults r = readRunFolder(dir);
    m_run->showResults(r);
    m_timeline->setPredicted(r.predicted);
    showMeasured(r.measured);
    // A folder's plan is not known: its figures are shown, with the prediction it made.
    m_runComparison = r.comparison;
    m_summaryModel->setMeasured(m_runComparison);
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
}

QStringList MainWindow::exportViews(const QString& dir, QString* error) {
  QStringList written;
  auto fail = [&](const QString& why) {
    if (error != nullptr && error->isEmpty()) *error = why;
  };
  if (QFileInfo(dir).exists() && !QFileInfo(dir).isDir()) {
    fail(tr("%1: exists and is not a folder").arg(dir));
    return written;
  }
  if (!QDir().mkpath(dir)) {
    fail(tr("%1: cannot make the folder").arg(dir));
    return written;
  }
  const int current = m_tabs->currentIndex();
  for (int i = 0; i < m_tabs->count(); ++i) {
    m_tabs->setCurrentIndex(i);
    QApplication::processEvents();
    const QString name = m_tabs->tabText(i).toLower().replace(QLatin1Char(' '), QLatin1Char('-')).remove(QLatin1Char('&'));
    const QString file = QDir(dir).filePath(QStringLiteral("%1-%2.png").arg(i + 1, 2, 10, QLatin1Char('0')).arg(name));
    const QString why = savePng(grab(), file);
    if (why.isEmpty()) {
      written << file;
    } else {
      fail(why);
    }
    // A page taller than the window (Charts): the whole page too.
    if (auto* area = qobject_cast<QScrollArea*>(m_tabs->widget(i)); area != nullptr && area->widget() != nullptr) {
      const QString whole = QDir(dir).filePath(QStringLiteral("%1-%2-whole.png").arg(i + 1, 2, 10, QLatin1Char('0')).arg(name));
      const QString wrong = savePng(area->widget()->grab(), whole);
      if (wrong.isEmpty()) {
        written << whole;
      } else {
        fail(wrong);
      }
    }
  }
  m_tabs->setCurrentIndex(current);
  return written;
}

QString savePng(const QPixmap& image, const QString& path) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  if (!buffer.open(QIODevice::WriteOnly) || !image.save(&buffer, "PNG")) return QObject::tr("%1: cannot encode the PNG").arg(path);
  return writeFileReplacing(path, bytes);
}

bool MainWindow::idle() const {
  return !m_simulator->busy() && !m_sweeper->busy() && !m_planner->busy() && m_loadingTraces == 0 && !m_run->running();
}

QString MainWindow::summaryText() const { return m_summary->text(); }

void MainWindow::chooseScenario() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open scenario"), QString(), tr("Scenarios (*.yaml *.yml)"));
  if (!path.isEmpty()) openScenario(path);
}

void MainWindow::chooseSave() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save scenario"), QString(), tr("Scenarios (*.yaml *.yml)"));
  if (path.isEmpty()) return;
  const QString error = saveScenario(path);
  if (!error.isEmpty()) {
    QMessageBox::warning(this, tr("Cannot save the scenario"), error);
  } else {
    statusBar()->showMessage(tr("saved %1").arg(path));
  }
}

void MainWindow::chooseTrace() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), tr("Chrome traces (*.json *.json.gz)"));
  if (!path.isEmpty()) openTrace(path);
}

void MainWindow::chooseRunFolder() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open the folder of a parasim validate run"));
  if (dir.isEmpty()) return;
  const QString error = openRunFolder(dir);
  if (!error.isEmpty()) QMessageBox::warning(this, tr("Cannot open the run"), error);
}

void MainWindow::chooseExport() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the views as PNG into"));
  if (dir.isEmpty()) return;
  QString error;
  const qsizetype written = exportViews(dir, &error).size();
  if (!error.isEmpty()) QMessageBox::warning(this, tr("Cannot export every view"), error);
  statusBar()->showMessage(tr("wrote %1 images to %2").arg(written).arg(dir));
}

}  // namespace parasim::gui
