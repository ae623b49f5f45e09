#include "mainwindow.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDockWidget>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QMenuBar>
#include <QScrollArea>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QTabWidget>
#include <QVBarModelMapper>
#include <QValueAxis>

#include "models/linkmodel.h"
#include "models/summarymodel.h"
#include "plan/describe.hpp"
#include "plan/load.hpp"
#include "planeditor.h"
#include "topology/analysis.hpp"
#include "topology/units.hpp"

namespace parasim::gui {

namespace {

QTableView* tableFor(QAbstractItemModel* model, QWidget* parent) {
  auto* view = new QTableView(parent);
  view->setModel(model);
  view->horizontalHeader()->setStretchLastSection(true);
  view->verticalHeader()->hide();
  return view;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_summary(new QLabel(tr("Open a scenario (File > Open)"), this)),
      m_linkView(new QTableView(this)),
      m_chartView(new QChartView(this)),
      m_links(new LinkModel(this)),
      m_kinds(new LinkKindModel(this)),
      m_summaryModel(new SummaryModel(this)),
      m_memory(new MemoryModel(this)),
      m_editor(new PlanEditor(this)),
      m_simulator(new Simulator(this)) {
  setWindowTitle(tr("parasim"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary->setFont(QFont(QStringLiteral("monospace")));
  m_summary->setWordWrap(true);
  m_summary->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_summary->setMargin(8);
  m_linkView->setModel(m_links);
  m_linkView->horizontalHeader()->setStretchLastSection(true);
  m_linkView->verticalHeader()->hide();

  auto* tabs = new QTabWidget(this);
  tabs->addTab(makeSummaryView(), tr("Summary"));
  tabs->addTab(m_linkView, tr("Links"));
  tabs->addTab(makeBandwidthChart(), tr("Bandwidth chart"));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_summary);
  split->addWidget(tabs);
  split->setStretchFactor(1, 4);
  split->setSizes({140, 600});
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

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open scenario..."), QKeySequence::Open, this, &MainWindow::chooseScenario);
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  resize(1200, 780);
}

QWidget* MainWindow::makeSummaryView() {
  auto* page = new QSplitter(Qt::Horizontal, this);
  page->addWidget(tableFor(m_summaryModel, page));
  auto* right = new QSplitter(Qt::Vertical, page);
  right->addWidget(tableFor(m_memory, right));

  // Memory per stage against the capacity: bars read from the memory model, the capacity
  // a line; a stage out of memory turns its bar red.
  auto* chart = new QChart();
  chart->setTitle(tr("Memory per rank by pipeline stage (GiB)"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* series = new QBarSeries(chart);
  auto* capacity = new QLineSeries(chart);
  capacity->setName(tr("capacity"));
  chart->addSeries(series);
  chart->addSeries(capacity);
  auto* stages = new QBarCategoryAxis(chart);
  auto* gib = new QValueAxis(chart);
  auto* along = new QValueAxis(chart);  // the capacity line's x, hidden
  chart->addAxis(stages, Qt::AlignBottom);
  chart->addAxis(gib, Qt::AlignLeft);
  chart->addAxis(along, Qt::AlignTop);
  along->setVisible(false);
  series->attachAxis(stages);
  series->attachAxis(gib);
  capacity->attachAxis(along);
  capacity->attachAxis(gib);
  connect(m_memory, &QAbstractItemModel::modelReset, this, [this, series, capacity, stages, gib, along] {
    series->clear();
    auto* set = new QBarSet(tr("needed per rank"));
    QStringList names;
    double top = m_memory->capacity() / double(1ULL << 30);
    bool oom = false;
    for (int r = 0; r < m_memory->rowCount(); ++r) {
      const double v = m_memory->index(r, MemoryModel::Total).data(MemoryModel::GiBRole).toDouble();
      *set << v;
      top = std::max(top, v);
      oom = oom || !m_memory->index(r, MemoryModel::Fits).data(MemoryModel::RawRole).toBool();
      names << tr("stage %1").arg(r);
    }
    set->setColor(oom ? QColor(200, 40, 40) : QColor(60, 120, 200));
    series->append(set);
    stages->setCategories(names);
    gib->setRange(0.0, top * 1.1 + 1e-9);
    along->setRange(0.0, 1.0);
    const double cap = m_memory->capacity() / double(1ULL << 30);
    capacity->replace({QPointF(0.0, cap), QPointF(1.0, cap)});
  });
  auto* view = new QChartView(chart, right);
  view->setRenderHint(QPainter::Antialiasing);
  right->addWidget(view);
  right->setSizes({120, 480});
  page->addWidget(right);
  page->setSizes({260, 740});
  return page;
}

QWidget* MainWindow::makeBandwidthChart() {
  // The chart reads the same kind model a table would.
  auto* chart = new QChart();
  auto* series = new QBarSeries(chart);
  auto* mapper = new QVBarModelMapper(this);
  mapper->setFirstBarSetColumn(LinkKindModel::TotalGBps);
  mapper->setLastBarSetColumn(LinkKindModel::TotalGBps);
  mapper->setSeries(series);
  mapper->setModel(m_kinds);
  chart->addSeries(series);
  chart->setTitle(tr("Total bandwidth by link kind (GB/s, one direction)"));
  chart->legend()->hide();
  auto* categories = new QBarCategoryAxis(chart);
  auto* values = new QValueAxis(chart);
  chart->addAxis(categories, Qt::AlignBottom);
  chart->addAxis(values, Qt::AlignLeft);
  series->attachAxis(categories);
  series->attachAxis(values);
  connect(m_kinds, &QAbstractItemModel::modelReset, this, [this, categories, values] {
    QStringList names;
    double top = 0.0;
    for (int r = 0; r < m_kinds->rowCount(); ++r) {
      names << m_kinds->index(r, LinkKindModel::Kind).data().toString();
      top = std::max(top, m_kinds->index(r, LinkKindModel::TotalGBps).data().toDouble());
    }
    categories->setCategories(names);
    values->setRange(0.0, top * 1.1 + 1e-9);
  });
  m_chartView->setChart(chart);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  return m_chartView;
}

bool MainWindow::openScenario(const QString& path) {
  try {
    const plan::Scenario s = plan::load(path.toStdString());
    m_path = path;
    m_editor->setScenario(s);
    m_editor->setEnabled(true);
    setWindowTitle(tr("parasim - %1").arg(path));
    m_summary->setText(QString::fromStdString(plan::describe(s)));
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
    m_editor->showError(o.errorKey, o.error);
    statusBar()->showMessage(tr("invalid plan: %1").arg(o.error));
    return;
  }
  m_editor->clearErrors();
  const plan::Scenario& s = *o.scenario;
  const topology::TopologySummary sum = topology::summarize(*o.cluster);
  m_links->setCluster(o.cluster);
  m_linkView->resizeColumnsToContents();
  m_kinds->setSummary(sum);
  m_summaryModel->setFigures(s, o.figures);
  m_memory->setReport(o.memory);
  m_summary->setText(QString::fromStdString(
      plan::describe(s) + "topology  injection " + units::format_bandwidth(sum.injection_intra) + " intra / " +
      (sum.injection_inter > 0 ? units::format_bandwidth(sum.injection_inter) : std::string("none")) +
      " inter per device, bisection " + units::format_bandwidth(sum.bisection)));
  statusBar()->showMessage(tr("simulated in %1 ms%2")
                               .arg(qRound(o.seconds * 1000.0))
                               .arg(o.overrides.isEmpty() ? QString() : tr(" with ") + o.overrides.join(QLatin1Char(' '))));
}

QString MainWindow::summaryText() const { return m_summary->text(); }

void MainWindow::chooseScenario() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open scenario"), QString(), tr("Scenarios (*.yaml *.yml)"));
  if (!path.isEmpty()) openScenario(path);
}

}  // namespace parasim::gui
