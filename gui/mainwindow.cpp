#include "mainwindow.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QChart>
#include <QChartView>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QSplitter>
#include <QTableView>
#include <QTabWidget>
#include <QVBarModelMapper>
#include <QValueAxis>

#include "models/linkmodel.h"
#include "plan/describe.hpp"
#include "plan/load.hpp"
#include "topology/analysis.hpp"
#include "topology/units.hpp"

namespace parasim::gui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_summary(new QLabel(tr("Open a scenario (File > Open)"), this)),
      m_linkView(new QTableView(this)),
      m_chartView(new QChartView(this)),
      m_links(new LinkModel(this)),
      m_kinds(new LinkKindModel(this)) {
  setWindowTitle(tr("parasim"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary->setFont(QFont(QStringLiteral("monospace")));
  m_summary->setWordWrap(true);
  m_summary->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_summary->setMargin(8);
  m_linkView->setModel(m_links);
  m_linkView->horizontalHeader()->setStretchLastSection(true);
  m_linkView->verticalHeader()->hide();

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

  auto* tabs = new QTabWidget(this);
  tabs->addTab(m_linkView, tr("Links"));
  tabs->addTab(m_chartView, tr("Bandwidth chart"));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_summary);
  split->addWidget(tabs);
  split->setStretchFactor(1, 3);
  setCentralWidget(split);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open scenario..."), QKeySequence::Open, this, &MainWindow::chooseScenario);
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  resize(1000, 700);
}

bool MainWindow::openScenario(const QString& path) {
  try {
    const plan::Scenario s = plan::load(path.toStdString());
    auto cluster = std::make_shared<const topology::Cluster>(s.cluster);
    const topology::TopologySummary sum = topology::summarize(*cluster);
    m_links->setCluster(cluster);
    m_linkView->resizeColumnsToContents();
    m_kinds->setSummary(sum);
    m_summary->setText(QString::fromStdString(
        plan::describe(s) + "topology  injection " + units::format_bandwidth(sum.injection_intra) + " intra / " +
        (sum.injection_inter > 0 ? units::format_bandwidth(sum.injection_inter) : std::string("none")) + " inter per device, bisection " +
        units::format_bandwidth(sum.bisection)));
    setWindowTitle(tr("parasim - %1").arg(QString::fromStdString(s.name)));
    return true;
  } catch (const std::exception& e) {
    m_summary->setText(tr("Cannot load the scenario:\n%1").arg(QString::fromUtf8(e.what())));
    return false;
  }
}

QString MainWindow::summaryText() const { return m_summary->text(); }

void MainWindow::chooseScenario() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open scenario"), {}, tr("Scenarios (*.yaml *.yml)"));
  if (!path.isEmpty()) openScenario(path);
}

}  // namespace parasim::gui
