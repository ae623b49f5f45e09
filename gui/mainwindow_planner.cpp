// The main window's planner tab: parasim plan on the open scenario on a worker thread,
// with a progress bar and a Cancel button, its ranking in a sortable table whose rows load
// into the plan editor.
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "mainwindow.h"
#include "models/planmodel.h"
#include "scenario/load.hpp"
#include "planeditor.h"
#include "planner/planner.hpp"

namespace parasim::gui {

QWidget* MainWindow::makePlannerView() {
  auto* page = new QWidget(this);
  auto* v = new QVBoxLayout(page);
  auto* bar = new QHBoxLayout;
  auto* search = new QPushButton(tr("Search plans"), page);
  auto* load = new QPushButton(tr("Load selected plan into the editor"), page);
  m_planProgress = new QProgressBar(page);
  m_planProgress->setRange(0, 1000);
  m_planProgress->setMinimumWidth(220);
  m_planProgress->hide();
  m_planCancel = new QPushButton(tr("Cancel"), page);
  m_planCancel->setObjectName(QStringLiteral("cancelPlans"));
  m_planCancel->hide();
  m_planTimer = new QTimer(this);
  m_planTimer->setInterval(100);
  connect(m_planTimer, &QTimer::timeout, this, [this] {
    if (!m_planWatch) return;
    const std::size_t total = m_planWatch->total.load();
    const std::size_t done = std::min(m_planWatch->done.load(), total);
    m_planProgress->setValue(total > 0 ? static_cast<int>(1000 * done / total) : 0);
    m_planProgress->setFormat(
        (m_planWatch->phase.load() == 0 ? tr("scoring plans: %1 of %2") : tr("simulating the best: %1 of %2"))
            .arg(done)
            .arg(total));
  });
  connect(m_planCancel, &QPushButton::clicked, this, &MainWindow::cancelPlans);
  bar->addWidget(search);
  bar->addWidget(load);
  bar->addWidget(m_planProgress);
  bar->addWidget(m_planCancel);
  bar->addWidget(m_planNote, 1);
  m_planNote->setWordWrap(true);
  v->addLayout(bar);
  auto* proxy = new QSortFilterProxyModel(page);
  proxy->setSourceModel(m_plans);
  proxy->setSortRole(PlanModel::RawRole);
  m_planView->setModel(proxy);
  m_planView->setSortingEnabled(true);
  m_planView->sortByColumn(PlanModel::Rank, Qt::AscendingOrder);
  m_planView->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_planView->setSelectionMode(QAbstractItemView::SingleSelection);
  m_planView->verticalHeader()->hide();
  m_planView->verticalHeader()->setDefaultSectionSize(m_planView->fontMetrics().height() + 6);
  m_planView->setWordWrap(false);
  m_planView->horizontalHeader()->setStretchLastSection(true);
  v->addWidget(m_planView, 1);
  auto sourceRow = [this, proxy](const QModelIndex& i) { return proxy->mapToSource(i).row(); };
  connect(search, &QPushButton::clicked, this, &MainWindow::searchPlans);
  connect(m_planView, &QTableView::doubleClicked, this,
          [this, sourceRow](const QModelIndex& i) { loadPlan(sourceRow(i)); });
  connect(load, &QPushButton::clicked, this, [this, sourceRow] {
    const QModelIndexList rows = m_planView->selectionModel()->selectedRows();
    if (!rows.isEmpty()) loadPlan(sourceRow(rows.first()));
  });
  connect(m_planner, &LatestRunner::finished, this, [this](const QVariant& result) {
    const auto r = result.value<PlanSearch>();
    m_planTimer->stop();
    m_planProgress->hide();
    m_planCancel->hide();
    if (r.cancelled) {
      m_planNote->setText(tr("search cancelled"));
      emit planned();
      return;
    }
    if (!r.error.isEmpty()) {
      m_planNote->setText(tr("cannot search: %1").arg(r.error));
      emit planned();
      return;
    }
    m_plans->setReport(r.report);
    m_planView->resizeColumnsToContents();
    QStringList reasons;
    std::size_t rejected = 0;
    for (const auto& [reason, n] : r.report.rejected) {
      reasons << QStringLiteral("%1 %2").arg(n).arg(QString::fromStdString(reason));
      rejected += n;
    }
    m_planNote->setText(
        tr("%1 valid plans on %2 devices: %3 fit, %4 rejected%5; scored in %6 s, the best %7 simulated. "
           "Double-click a row to load its plan.")
            .arg(r.report.candidates)
            .arg(r.report.devices)
            .arg(r.report.ranked.size())
            .arg(rejected)
            .arg(reasons.isEmpty() ? QString()
                                   : QStringLiteral(" (") + reasons.join(QStringLiteral(", ")) + QLatin1Char(')'))
            .arg(r.report.score_seconds, 0, 'f', 2)
            .arg(r.report.simulated));
    emit planned();
  });
  return page;
}

void MainWindow::searchPlans() {
  if (!m_outcome.ok() || m_outcome.path.isEmpty()) {
    m_planNote->setText(tr("open a valid scenario first"));
    emit planned();
    return;
  }
  m_planNote->setText(tr("searching..."));
  const QString path = m_outcome.path;
  const QStringList overrides = m_outcome.overrides;
  if (m_planWatch) m_planWatch->cancel = true;  // a search still running gives way
  auto watch = std::make_shared<PlanWatch>();
  m_planWatch = watch;
  m_planProgress->setValue(0);
  m_planProgress->show();
  m_planCancel->show();
  m_planTimer->start();
  m_planner->request([path, overrides, watch] {
    PlanSearch r;
    try {
      std::vector<std::string> sets;
      for (const QString& o : overrides) sets.push_back(o.toStdString());
      planner::PlanOptions options;
      options.cancel = &watch->cancel;
      options.progress = [watch](std::string_view phase, std::size_t done, std::size_t total) {
        watch->phase = phase.starts_with("scoring") ? 0 : 1;
        watch->total = total;
        watch->done = done;
      };
      r.report = planner::plan_search(scenario::load(path.toStdString(), sets), options);
    } catch (const planner::Cancelled&) {
      r.cancelled = true;
    } catch (const std::exception& e) {
      r.error = QString::fromStdString(e.what());
    }
    return QVariant::fromValue(r);
  });
}

QString MainWindow::planNote() const {
  return m_planNote->text();
}

void MainWindow::cancelPlans() {
  if (m_planWatch) m_planWatch->cancel = true;
}

void MainWindow::loadPlan(int row) {
  const QStringList sets = m_plans->planOverrides(row);
  if (sets.isEmpty()) return;
  m_editor->setValues(sets);
  statusBar()->showMessage(tr("loaded plan %1 into the editor").arg(row + 1));
}

}  // namespace parasim::gui
