// The dashboard's legibility: axes in round steps and fitting units, memory stacked by what
// holds it, booleans as check boxes, undo and redo of edits, the measured figures beside the
// predicted ones, recent files, large clusters drawn in groups, labelled run controls.
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QGraphicsPathItem>
#include <QLabel>
#include <QStackedBarSeries>
#include <QValueAxis>

#include <catch2/catch.hpp>

#include "charts.h"
#include "mainwindow.h"
#include "models/summarymodel.h"
#include "scenario/load.hpp"
#include "planeditor.h"
#include "runpanel.h"
#include "sim/simulate.hpp"
#include "support.h"
#include "topology/units.hpp"
#include "topologyview.h"

using namespace parasim;
using test::scenarios;
using test::waitFor;

TEST_CASE("an axis counts in round steps, in the unit that suits its largest value", "[gui][charts]") {
  CHECK(gui::unitFor(gui::Quantity::seconds, 0.0815).name.toStdString() == "ms");
  CHECK(gui::unitFor(gui::Quantity::seconds, 0.0815).scale == 1e3);
  CHECK(gui::unitFor(gui::Quantity::seconds, 20.0).name.toStdString() == "s");
  CHECK(gui::unitFor(gui::Quantity::seconds, 2e-5).name.toStdString() == "us");
  // 20,000 MiB is 19.5 GiB: GiB, not "20000.0 MiB".
  const gui::AxisUnit gib = gui::unitFor(gui::Quantity::bytes, 20000.0 * 1024 * 1024);
  CHECK(gib.name.toStdString() == "GiB");
  CHECK(20000.0 * 1024 * 1024 * gib.scale == Approx(19.53125));
  CHECK(gui::unitFor(gui::Quantity::bytes, 512.0).name.toStdString() == "B");
  CHECK(gui::unitFor(gui::Quantity::count, 600000.0).name.toStdString() == "thousands");
  CHECK(gui::unitFor(gui::Quantity::count, 600.0).scale == 1.0);
  // 81.5 -> 0 to 100 in steps of 20 (not 0, 40.8, 81.5); 0.37 -> 0 to 0.4 by 0.1.
  QValueAxis axis;
  gui::setNiceRange(&axis, 81.5, QStringLiteral("time (ms)"));
  CHECK(axis.min() == 0.0);
  CHECK(axis.max() == 100.0);
  CHECK(axis.tickCount() == 6);
  CHECK(axis.labelFormat().toStdString() == "%.0f");
  CHECK(axis.titleText().toStdString() == "time (ms)");
  gui::setNiceRange(&axis, 0.37, QString());
  CHECK(axis.max() == Approx(0.4));
  CHECK(axis.tickCount() == 5);
  CHECK(axis.labelFormat().toStdString() == "%.1f");
  gui::setNiceRange(&axis, 1000.0, QString());  // exactly round: its own top
  CHECK(axis.max() == 1000.0);
}

TEST_CASE("booleans are check boxes, and edits undo and redo", "[gui][widgets]") {
  gui::PlanEditor editor;
  editor.setScenario(scenario::load(scenarios + "dp-one-node.yaml"));
  auto* sp = editor.findChild<QCheckBox*>(QStringLiteral("plan.sequence_parallel"));
  REQUIRE(sp != nullptr);
  CHECK_FALSE(sp->isChecked());
  REQUIRE(editor.findChild<QCheckBox*>(QStringLiteral("plan.overlap_dp")) != nullptr);
  CHECK(editor.findChild<QCheckBox*>(QStringLiteral("plan.overlap_dp"))->isChecked());  // the default, true
  int edits = 0;
  QObject::connect(&editor, &gui::PlanEditor::edited, [&] { ++edits; });
  CHECK_FALSE(editor.canUndo());
  sp->setChecked(true);  // as a click would
  CHECK(edits == 1);
  CHECK(editor.overrides().join(' ').toStdString() == "plan.sequence_parallel=true");
  REQUIRE(editor.setValue("plan.tp", "2"));
  CHECK(editor.overrides().join(' ').toStdString() == "plan.tp=2 plan.sequence_parallel=true");
  CHECK(editor.canUndo());
  CHECK_FALSE(editor.canRedo());
  REQUIRE(editor.undo());
  CHECK(editor.overrides().join(' ').toStdString() == "plan.sequence_parallel=true");
  CHECK(editor.value("plan.tp").toStdString() == "1");
  REQUIRE(editor.undo());
  CHECK(editor.overrides().isEmpty());
  CHECK_FALSE(sp->isChecked());
  CHECK_FALSE(editor.undo());  // nothing more
  REQUIRE(editor.redo());
  CHECK(editor.overrides().join(' ').toStdString() == "plan.sequence_parallel=true");
  CHECK(edits == 5);  // two edits, two undos, a redo: each simulated again
  // A new edit after an undo drops what could be redone.
  REQUIRE(editor.setValue("plan.dp", "4"));
  CHECK_FALSE(editor.canRedo());
  // Opening a scenario starts a new history.
  editor.setScenario(scenario::load(scenarios + "dp-one-node.yaml"));
  CHECK_FALSE(editor.canUndo());
}

TEST_CASE("after a run the summary shows the measured figures and the error beside the predicted", "[gui][models]") {
  const scenario::Scenario s = scenario::load(scenarios + "quickstart.yaml");
  const sim::Prediction p = sim::predict(s);
  const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
  gui::SummaryModel model;
  model.setFigures(s, f);
  CHECK(model.columnCount() == 2);
  // validate's rows: the step and dp communication measured slower, the bubble in points.
  const std::vector<report::ComparisonRow> rows{{"step time", "s", f.step_time, 0.060},
                                                {"dp communication", "s", f.comm_mean[2], 0.002},
                                                {"bubble fraction", "fraction", 0.0, 0.01}};
  model.setMeasured(rows);
  REQUIRE(model.columnCount() == 4);
  CHECK(model.headerData(gui::SummaryModel::Measured, Qt::Horizontal).toString().toStdString() == "Measured");
  auto row = [&](const char* metric) {
    for (int r = 0; r < model.rowCount(); ++r) {
      if (model.index(r, 0).data().toString() == QLatin1String(metric)) return r;
    }
    return -1;
  };
  CHECK(model.index(row("step time"), gui::SummaryModel::Measured).data().toString().toStdString() == "60 ms");
  CHECK(model.index(row("step time"), gui::SummaryModel::Error).data().toString().toStdString() ==
        report::format_error(rows[0]));
  CHECK(model.index(row("pipeline bubble"), gui::SummaryModel::Error).data().toString().toStdString() == "-1.0 pt");
  // Throughput over the same batch: the predicted scaled by the step times.
  const double tokens = f.tokens_per_s * f.step_time / 0.060;
  CHECK(model.index(row("tokens/s"), gui::SummaryModel::Measured).data().toString().toStdString() ==
        units::format_count(tokens));
  CHECK(model.index(row("MFU"), gui::SummaryModel::Measured).data().toString().isEmpty());  // not measured
  // A new prediction (another plan) hides the measurement.
  model.setFigures(s, f);
  CHECK(model.columnCount() == 2);
}

TEST_CASE("the memory chart stacks each stage by what holds the memory", "[gui][charts][widgets]") {
  gui::MainWindow w;
  REQUIRE(w.openScenario(QString::fromStdString(scenarios + "pipeline-microbatches.yaml")));
  REQUIRE(waitFor([&] { return w.idle() && w.outcome().ok(); }));
  QList<QStackedBarSeries*> stacks;  // the charts' series live in their views' scenes
  for (QChartView* view : w.findChildren<QChartView*>()) {
    for (QAbstractSeries* series : view->chart()->series()) {
      if (auto* stacked = qobject_cast<QStackedBarSeries*>(series);
          stacked && view->chart()->title().startsWith(QStringLiteral("Memory per rank by")))
        stacks << stacked;
    }
  }
  REQUIRE(stacks.size() == 1);
  const QList<QBarSet*> sets = stacks.front()->barSets();
  REQUIRE(sets.size() == 6);
  CHECK(sets[0]->label().toStdString() == "weights");
  CHECK(sets[3]->label().toStdString() == "optimizer state");
  const workload::MemoryReport& mem = w.outcome().memory;
  REQUIRE(sets[0]->count() == int(mem.stages.size()));
  for (int stage = 0; stage < sets[0]->count(); ++stage) {
    double stacked = 0.0;
    for (const QBarSet* set : sets) stacked += set->at(stage);
    const double total = mem.stages[std::size_t(stage)].total();
    const gui::AxisUnit unit = gui::unitFor(gui::Quantity::bytes, std::max(total, mem.capacity));
    CHECK(stacked == Approx(total * unit.scale));  // the parts add up to the stage's total
  }
  // The window names what the figures rest on.
  CHECK(w.summaryText().contains(QStringLiteral("datasheet figures, not calibrated")));
  CHECK(w.summaryText().contains(QStringLiteral("simulated ")));
  // And remembers the scenario among the recent ones.
  CHECK(gui::MainWindow::recentScenarios().front().endsWith(QStringLiteral("pipeline-microbatches.yaml")));
}

TEST_CASE("a cluster of more nodes than fit is drawn in groups, a line per group and switch", "[gui][topology]") {
  const scenario::Scenario s =
      scenario::load(scenarios + "hybrid-32-gpus.yaml",
                     std::vector<std::string>{"cluster.nodes=64", "plan.dp=32", "training.global_batch=512"});
  const auto cluster = std::make_shared<const topology::Cluster>(s.cluster);
  const sim::Prediction p = sim::predict(s);
  gui::TopologyView view;
  view.show(cluster, p.trace);  // 16 boxes at most: groups of 4 nodes
  REQUIRE(view.layout().groupSize == 4);
  CHECK(view.layout().boxes.size() == 16);
  // A line standing for several links says how many and the busiest.
  int bundled = 0;
  for (const auto& bundle : view.layout().bundles) {
    if (bundle.links.size() < 2) continue;
    auto* item = dynamic_cast<QGraphicsPathItem*>(view.linkItem(bundle.links.front()));
    REQUIRE(item != nullptr);
    CHECK(item->toolTip().contains(QStringLiteral("%1 links like").arg(bundle.links.size())));
    CHECK(view.linkItem(bundle.links.back()) == item);
    ++bundled;
  }
  CHECK(bundled > 0);
}

TEST_CASE("the run panel's controls are labelled", "[gui][run][widgets]") {
  gui::RunPanel panel;
  QStringList names;
  for (const QLabel* l : panel.findChildren<QLabel*>()) {
    if (l->buddy() != nullptr) names << l->text();
  }
  CHECK(names.contains(QStringLiteral("Backend:")));
  CHECK(names.contains(QStringLiteral("Measured steps:")));
  for (const QComboBox* c : panel.findChildren<QComboBox*>()) CHECK(c->itemText(0).toStdString() != "scenario's");
}
