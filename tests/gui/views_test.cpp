// The dashboard's other views: the topology drawing, the chart models, the dp sweep, the
// run panel (a real `parasim validate`), saving a scenario, opening traces and run folders,
// and exporting the views as images.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QCheckBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsPathItem>
#include <QImage>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "mainwindow.h"
#include "models/figuremodels.h"
#include "models/linkmodel.h"
#include "models/planmodel.h"
#include "scenario/describe.hpp"
#include "planner/planner.hpp"
#include <QSortFilterProxyModel>
#include "scenario/load.hpp"
#include "planeditor.h"
#include "report/chrome_trace.hpp"
#include "report/metrics.hpp"
#include "report/run_model.hpp"
#include "topology/units.hpp"
#include "runpanel.h"
#include "sim/simulate.hpp"
#include "support.h"
#include "timeline/timelineview.h"
#include "topologyview.h"

using namespace parasim;
using test::scenarios;
using test::waitFor;

namespace {

scenario::Scenario loadWith(const std::string& name, std::vector<std::string> sets = {}) {
  return scenario::load(scenarios + name, sets);
}

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

TEST_CASE("the topology layout puts each node's devices in its box and draws every physical link", "[gui][topology]") {
  const topology::Cluster two(loadWith("quickstart.yaml", {"cluster=dgx-h100", "cluster.nodes=2", "plan.dp=16", "training.micro_batch=1"}).cluster);
  const gui::TopologyLayout l = gui::layoutCluster(two, 16);
  REQUIRE(l.boxes.size() == 2);
  CHECK(l.nodesShown == 2);
  for (int r = 0; r < two.gpu_count(); ++r) {
    REQUIRE(l.positions[two.gpu(r)]);
    CHECK(l.boxes[std::size_t(two.node_of(r))].rect.contains(*l.positions[two.gpu(r)]));
  }
  CHECK(l.links.size() == std::size_t(two.link_count() / 2));
  CHECK(l.groupSize == 1);
  CHECK(l.bundles.size() == l.links.size());  // one by one: a line per link
  // Four nodes where one box fits: one group of four. Its devices are inside it, undrawn;
  // every link from a node to the network is drawn, as one line per switch; none inside.
  const topology::Cluster four(loadWith("quickstart.yaml", {"cluster=dgx-h100", "cluster.nodes=4", "plan.dp=32", "training.global_batch=32", "training.micro_batch=1"}).cluster);
  const gui::TopologyLayout one = gui::layoutCluster(four, 1);
  REQUIRE(one.boxes.size() == 1);
  CHECK(one.groupSize == 4);
  CHECK(one.boxes[0].node == 0);
  CHECK(one.boxes[0].lastNode == 3);
  CHECK_FALSE(one.positions[four.gpu(0)]);
  std::size_t uplinks = 0;
  std::set<std::size_t> switches;
  for (int link = 0; link < four.link_count(); link += 2) {
    const bool a = four.vertex(four.source(link)).node >= 0, b = four.vertex(four.target(link)).node >= 0;
    if (a != b) {
      ++uplinks;
      switches.insert(a ? four.target(link) : four.source(link));
    }
  }
  REQUIRE(uplinks > 0);
  std::size_t bundled = 0;
  for (const auto& bundle : one.bundles) bundled += bundle.links.size();
  CHECK(bundled == one.links.size());
  for (const int link : one.links) {  // no link inside the group
    CHECK_FALSE((four.vertex(four.source(link)).node >= 0 && four.vertex(four.target(link)).node >= 0));
  }
  std::size_t drawn_uplinks = 0;
  for (const int link : one.links) drawn_uplinks += four.vertex(four.source(link)).node >= 0 || four.vertex(four.target(link)).node >= 0;
  CHECK(drawn_uplinks == uplinks);
  // Two groups of two: each group's uplinks to a switch make one line.
  const gui::TopologyLayout two_groups = gui::layoutCluster(four, 2);
  CHECK(two_groups.boxes.size() == 2);
  std::size_t group_lines = 0;
  for (const auto& bundle : two_groups.bundles) {
    const int link = bundle.links.front();
    group_lines += four.vertex(four.source(link)).node >= 0 || four.vertex(four.target(link)).node >= 0;
  }
  CHECK(group_lines == 2 * switches.size());
}

TEST_CASE("links are coloured by utilisation: grey when idle, green to red as they fill", "[gui][topology]") {
  CHECK(gui::utilisationColor(0.0) == QColor(190, 190, 190));
  CHECK(gui::utilisationColor(2.0) == gui::utilisationColor(1.0));
  CHECK(gui::utilisationColor(1.0).red() > gui::utilisationColor(1.0).green());
  CHECK(gui::utilisationColor(0.01).green() > gui::utilisationColor(0.01).red());
  // Redder as the utilisation rises.
  double last = -1.0;
  for (double u = 0.05; u <= 1.0; u += 0.05) {
    const QColor c = gui::utilisationColor(u);
    const double redness = c.redF() - c.greenF();
    CHECK(redness >= last);
    last = redness;
  }
  // In the view, the busiest link of a simulated step has the colour of its utilisation,
  // which is its bytes over bandwidth x step, and an idle link is grey.
  const scenario::Scenario s = loadWith("tp-across-nodes.yaml");
  const auto cluster = std::make_shared<const topology::Cluster>(s.cluster);
  const sim::Prediction p = sim::predict(s);
  gui::TopologyView view;
  view.show(cluster, p.trace);
  int busiest = -1;
  double top = 0.0;
  for (const report::LinkUse& l : p.trace.links) {
    const double u = l.bytes / (cluster->link(l.link).bandwidth * p.trace.step_seconds());
    if (u > top) {
      top = u;
      busiest = l.link;
    }
  }
  REQUIRE(busiest >= 0);
  auto* item = dynamic_cast<QGraphicsPathItem*>(view.linkItem(busiest - busiest % 2));
  REQUIRE(item != nullptr);
  CHECK(item->pen().color() == gui::utilisationColor(top));
  CHECK(item->toolTip().contains(q(cluster->link_name(busiest - busiest % 2))));
  int idle = -1;
  for (int l = 0; l < cluster->link_count() && idle < 0; l += 2) {
    if (std::none_of(p.trace.links.begin(), p.trace.links.end(), [&](const auto& u) { return u.link / 2 == l / 2; })) idle = l;
  }
  if (idle >= 0) {
    auto* grey = dynamic_cast<QGraphicsPathItem*>(view.linkItem(idle));
    REQUIRE(grey != nullptr);
    CHECK(grey->pen().color() == QColor(190, 190, 190));
  }
}

TEST_CASE("the time breakdown per rank adds up to the step, memory per rank follows the stage", "[gui][charts]") {
  const scenario::Scenario s = loadWith("pipeline-microbatches.yaml");
  const sim::Prediction p = sim::predict(s);
  const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
  gui::FigureTableModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  gui::showRankBreakdown(m, f, 64);
  REQUIRE(m.rowCount() == s.plan.world());
  for (int r = 0; r < m.rowCount(); ++r) {
    double sum = 0.0;
    for (int c = gui::breakdown::Compute; c <= gui::breakdown::Other; ++c) sum += m.raw(r, c);
    CHECK(sum == Approx(f.step_time).epsilon(1e-9));
    CHECK(m.raw(r, gui::breakdown::Compute) == f.ranks[std::size_t(r)].compute);
    // The bubble is a fraction of the step holding the exposed pp transfers: shown in seconds
    // without them.
    const auto& rf = f.ranks[std::size_t(r)];
    CHECK(m.raw(r, gui::breakdown::Bubble) == Approx(std::max(0.0, rf.bubble * f.step_time - rf.exposed[1])));
    CHECK(m.raw(r, gui::breakdown::Bubble) > 0.1 * f.step_time);  // 8 stages: a real wait, not a fraction
  }
  gui::showRankBreakdown(m, f, 2);
  CHECK(m.rowCount() == 2);

  const workload::MemoryReport mem = workload::memory_per_rank(s);
  gui::showRankMemory(m, s, mem, {}, 64);
  REQUIRE(m.rowCount() == s.plan.world());
  for (int r = 0; r < m.rowCount(); ++r) {
    const int stage = scenario::coord_of(s.plan, r).pp;
    const workload::MemoryBreakdown& b = mem.stages[std::size_t(stage)];
    CHECK(m.raw(r, gui::rankmemory::Stage) == stage);
    CHECK(m.raw(r, gui::rankmemory::Predicted) ==
          b.weights + b.gradients + b.master + b.optimizer + b.activations + b.logits);
    CHECK(m.index(r, gui::rankmemory::Measured).data().toString().toStdString() == "-");
  }
  std::vector<double> measured(std::size_t(s.plan.world()), 3.0 * (1 << 20));
  gui::showRankMemory(m, s, mem, measured, 64);
  CHECK(m.index(0, gui::rankmemory::Measured).data().toString().toStdString() == "3 MiB");
}

TEST_CASE("the comparison model formats as validate prints and marks large errors red", "[gui][charts]") {
  gui::FigureTableModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  gui::showComparison(m, {{"step time", "s", 0.035, 0.037}, {"forward", "s", 0.010, 0.020}, {"bubble fraction", "fraction", 0.10, 0.12},
                          {"tensors rank 0 (peak)", "bytes", 1024.0 * 1024, 0.0}});
  CHECK(gui::dumpModel(m).toStdString() ==
        "Metric\tPredicted\tMeasured\tError\n"
        "step time\t35 ms\t37 ms\t-5.4 %\n"
        "forward\t10 ms\t20 ms\t-50.0 %\n"
        "bubble fraction\t10.0 %\t12.0 %\t-2.0 pt\n"
        "tensors rank 0 (peak)\t1 MiB\t0 B\t-\n");
  CHECK_FALSE(m.index(0, gui::comparison::Error).data(Qt::ForegroundRole).isValid());
  CHECK(m.index(1, gui::comparison::Error).data(Qt::ForegroundRole).isValid());
  CHECK(m.raw(1, gui::comparison::Error) == Approx(-0.5));
}

TEST_CASE("the dp sweep predicts each point as the loader and simulator would, with the ideal line", "[gui][charts]") {
  const QString path = q(scenarios + "quickstart.yaml");
  const gui::Scaling sc = gui::scalingSweep(path, {});
  INFO(sc.skipped.join(QLatin1Char('\n')).toStdString());
  REQUIRE(sc.points.size() == 4);  // dp 1, 2, 4, 8
  CHECK(sc.skipped.isEmpty());
  for (std::size_t i = 0; i < sc.points.size(); ++i) {
    const gui::ScalingPoint& pt = sc.points[i];
    CHECK(pt.dp == 1 << i);
    CHECK(pt.gpus == pt.dp);
    // Independently: the same overrides through the loader and the simulator.
    const scenario::Scenario s = loadWith(
        "quickstart.yaml", {"plan.dp=" + std::to_string(pt.dp), "cluster.nodes=" + std::to_string((pt.dp + 1) / 2),
                            "training.global_batch=" + std::to_string(8 * pt.dp)});
    const report::StepFigures f = report::step_figures(s, sim::predict(s).trace, topology::Cluster(s.cluster));
    CHECK(pt.tokensPerSecond == f.tokens_per_s);
    CHECK(pt.ideal == Approx(sc.points[0].tokensPerSecond * pt.gpus));
    CHECK(pt.efficiency == Approx(pt.tokensPerSecond / pt.ideal));
    CHECK(pt.efficiency <= 1.0 + 1e-9);  // more replicas only add communication
  }
  gui::FigureTableModel m;
  gui::showScaling(m, sc);
  CHECK(m.rowCount() == 4);
  CHECK(m.raw(3, gui::scaling::Gpus) == 8);
  CHECK(m.raw(3, gui::scaling::TimeToTrain) == 0.0);  // no run length: no run
  // With the run's length: each size's goodput and time to train, as the run model gives
  // them from the point's step (more devices fail more often).
  const gui::Scaling run = gui::scalingSweep(path, {QStringLiteral("training.steps=100000"),
                                                     QStringLiteral("job.failures.device_mtbf=10h")});
  REQUIRE(run.points.size() == 4);
  for (std::size_t i = 0; i + 1 < run.points.size(); ++i) CHECK(run.points[i + 1].goodput < run.points[i].goodput);
  const gui::ScalingPoint& last = run.points.back();
  const scenario::Scenario rs =
      loadWith("quickstart.yaml", {"plan.dp=8", "cluster.nodes=4", "training.global_batch=64", "training.steps=100000",
                                   "job.failures.device_mtbf=10h"});
  CHECK(last.timeToTrain == Approx(report::estimate_run(rs, last.stepTime, report::step_energy(rs, sim::predict(rs).trace))
                                       .expected));
  gui::showScaling(m, run);
  CHECK(m.raw(3, gui::scaling::Goodput) == Approx(last.goodput));
  CHECK(m.index(3, gui::scaling::TimeToTrain).data().toString().toStdString() == units::format_span(last.timeToTrain));
  // A plan that cannot grow says why for each point it skipped.
  const gui::Scaling bad = gui::scalingSweep(path, {QStringLiteral("plan.schedule=zigzag")});
  CHECK(bad.points.empty());
  CHECK(bad.skipped.join(QString()).contains(QStringLiteral("plan.schedule")));
}

TEST_CASE("Run for real runs parasim validate, shows progress and loads the measurement and comparison",
          "[gui][run][widgets]") {
  gui::RunPanel panel;
  panel.setExecutable(QStringLiteral(PARASIM_CLI_PATH));
  QSignalSpy loaded(&panel, &gui::RunPanel::loaded);
  QSignalSpy failed(&panel, &gui::RunPanel::failed);
  panel.setScenario(q(scenarios + "quickstart.yaml"), {QStringLiteral("training.global_batch=8")});
  const QStringList args = panel.start();
  CHECK(args.contains(QStringLiteral("training.global_batch=8")));
  REQUIRE(waitFor([&] { return !panel.running(); }, 300000));
  INFO(panel.log().toStdString());
  REQUIRE(loaded.count() == 1);
  CHECK(failed.count() == 0);
  const auto r = loaded.at(0).at(0).value<gui::RunResults>();
  CHECK(r.ranks == 2);
  CHECK(r.scenario.toStdString() == "quickstart");
  REQUIRE(r.measured);
  CHECK(r.measured->kind.toStdString() == "measured");
  CHECK(r.measured->memoryPeak.size() == 2);
  // The panel's table is the comparison validate printed, row for row.
  REQUIRE(panel.comparison()->rowCount() == int(r.comparison.size()));
  CHECK(panel.comparison()->index(0, gui::comparison::Metric).data().toString().toStdString() == "step time");
  for (const auto& row : r.comparison) {
    CHECK(panel.log().contains(q(row.name)));
    CHECK(panel.log().contains(q(report::format_error(row))));
  }
  CHECK(panel.progress() == 1);
  CHECK(panel.log().contains(QStringLiteral("step ")));
}

TEST_CASE("Run for real on the emulated cluster passes --emulated, and says when none is up", "[gui][run][widgets]") {
  qputenv("PARASIM_CLUSTER_DIR", "/nonexistent/parasim-cluster");  // none up, whatever this machine has
  gui::RunPanel panel;
  panel.setExecutable(QStringLiteral(PARASIM_CLI_PATH));
  QSignalSpy failed(&panel, &gui::RunPanel::failed);
  auto* emulated = panel.findChild<QCheckBox*>(QStringLiteral("emulated"));
  REQUIRE(emulated != nullptr);
  emulated->setChecked(true);
  panel.setScenario(q(scenarios + "emulated-dp.yaml"), {});
  const QStringList args = panel.start();
  CHECK(args.contains(QStringLiteral("--emulated")));
  REQUIRE(waitFor([&] { return !panel.running() && failed.count() == 1; }, 120000));
  CHECK(panel.error().contains(QStringLiteral("no emulated cluster is up")));
  qunsetenv("PARASIM_CLUSTER_DIR");
}

TEST_CASE("a run that fails shows the command line's error, and a missing program says so", "[gui][run][widgets]") {
  gui::RunPanel panel;
  panel.setExecutable(QStringLiteral(PARASIM_CLI_PATH));
  QSignalSpy failed(&panel, &gui::RunPanel::failed);
  panel.setScenario(q(scenarios + "quickstart.yaml"), {QStringLiteral("plan.schedule=zigzag")});
  panel.start();
  REQUIRE(waitFor([&] { return !panel.running() && failed.count() == 1; }, 120000));
  CHECK(panel.error().contains(QStringLiteral("exit code 2")));
  CHECK(panel.error().contains(QStringLiteral("plan.schedule")));
  CHECK(panel.comparison()->rowCount() == 0);

  gui::RunPanel missing;
  missing.setExecutable(QStringLiteral("/nonexistent/parasim"));
  QSignalSpy gone(&missing, &gui::RunPanel::failed);
  missing.setScenario(q(scenarios + "quickstart.yaml"), {});
  missing.start();
  REQUIRE(waitFor([&] { return gone.count() >= 1; }, 30000));
  CHECK(missing.error().contains(QStringLiteral("cannot start /nonexistent/parasim")));
}

TEST_CASE("the window saves the edited scenario, opens traces and run folders, and exports its views",
          "[gui][widgets]") {
  gui::MainWindow w;
  w.resize(1200, 800);
  w.show();
  REQUIRE(w.openScenario(q(scenarios + "quickstart-calibrated.yaml")));
  REQUIRE(waitFor([&] { return w.idle() && !w.outcome().path.isEmpty(); }));
  w.editor()->setValue(QStringLiteral("training.global_batch"), QStringLiteral("32"));
  REQUIRE(waitFor([&] { return w.idle() && w.outcome().overrides.size() == 1; }));
  REQUIRE(w.outcome().ok());

  // Saved elsewhere, it loads to the edited scenario, its device profile still found.
  QTemporaryDir dir;
  const QString saved = dir.filePath(QStringLiteral("sub/edited.yaml"));
  QDir().mkpath(dir.filePath(QStringLiteral("sub")));
  REQUIRE(w.saveScenario(saved).toStdString().empty());
  const scenario::Scenario back = scenario::load(saved.toStdString());
  CHECK(back.training.global_batch == 32);
  REQUIRE_FALSE(w.outcome().scenario->hardware.profile.empty());
  CHECK(std::filesystem::equivalent(back.hardware.profile, w.outcome().scenario->hardware.profile));
  CHECK(sim::predict(back).trace.step_end == w.outcome().prediction->trace.step_end);
  CHECK_FALSE(w.saveScenario(QStringLiteral("/nonexistent/dir/x.yaml")).isEmpty());

  // A trace file opens in the timeline by its kind; a broken one reports its error.
  const scenario::Scenario s = *w.outcome().scenario;
  const sim::Prediction p = sim::predict(s, {true, sim::FoldMode::never});
  const QString traceFile = dir.filePath(QStringLiteral("p.json"));
  {
    QFile f(traceFile);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray::fromStdString(report::chrome_trace_json(p.trace, p.program, topology::Cluster(s.cluster))));
  }
  QSignalSpy loaded(&w, &gui::MainWindow::traceLoaded);
  w.openTrace(traceFile);
  REQUIRE(waitFor([&] { return loaded.count() == 1; }));
  CHECK(w.timeline()->predictedView()->timeline()->trace()->title == traceFile);
  QFile broken(dir.filePath(QStringLiteral("broken.json")));
  REQUIRE(broken.open(QIODevice::WriteOnly));
  broken.write("[");
  broken.close();
  // In batch use (--screenshot, --export) a broken trace reports on the signal and
  // standard error; a modal dialog there would wait forever for a click.
  w.setBatch(true);
  QSignalSpy failed(&w, &gui::MainWindow::traceFailed);
  w.openTrace(broken.fileName());
  REQUIRE(waitFor([&] { return failed.count() == 1; }));
  CHECK(QApplication::activeModalWidget() == nullptr);
  w.setBatch(false);
  CHECK(w.openRunFolder(dir.path()).contains(QStringLiteral("comparison.json")));

  // Every tab becomes a non-blank PNG, and a page taller than the window (Charts) a second
  // one of the whole page.
  const QStringList files = w.exportViews(dir.filePath(QStringLiteral("png")));
  REQUIRE(files.size() == w.tabs()->count() + 1);
  CHECK(files.filter(QStringLiteral("-charts-whole.png")).size() == 1);
  for (const QString& f : files) {
    const QImage img(f);
    REQUIRE_FALSE(img.isNull());
    CHECK(img.width() >= 1000);
    std::set<QRgb> colours;
    for (int y = 0; y < img.height(); y += 7) {
      for (int x = 0; x < img.width(); x += 7) colours.insert(img.pixel(x, y));
    }
    CHECK(colours.size() > 20);
  }

  // An image written over a symlink replaces the link and leaves its target alone, as the
  // command line's outputs do; a folder where a file belongs, or a file where the export
  // folder belongs, is an error instead of nothing written.
  const QString target = dir.filePath(QStringLiteral("precious.txt"));
  {
    QFile t(target);
    REQUIRE(t.open(QIODevice::WriteOnly));
    t.write("keep");
  }
  const QString link = dir.filePath(QStringLiteral("shot.png"));
  REQUIRE(QFile::link(target, link));
  CHECK(gui::savePng(w.grab(), link).isEmpty());
  CHECK_FALSE(QFileInfo(link).isSymLink());
  CHECK_FALSE(QImage(link).isNull());
  QFile kept(target);
  REQUIRE(kept.open(QIODevice::ReadOnly));
  CHECK(kept.readAll() == "keep");
  CHECK_THAT(gui::savePng(w.grab(), dir.path()).toStdString(), Catch::Contains("is a folder"));
  CHECK_THAT(gui::savePng(w.grab(), dir.filePath(QStringLiteral("no/such.png"))).toStdString(), Catch::Contains("does not exist"));
  QString error;
  CHECK(w.exportViews(target, &error).isEmpty());
  CHECK_THAT(error.toStdString(), Catch::Contains("exists and is not a folder"));
  // Nothing but the files written is left in the folder (no temporaries).
  for (const QString& name : QDir(dir.path()).entryList(QDir::Files | QDir::Hidden)) CHECK_FALSE(name.startsWith(QLatin1Char('.')));
}

TEST_CASE("the planner tab ranks the plans as parasim plan does, sorts them, and loads a row into the editor",
          "[gui][planner][widgets]") {
  gui::MainWindow w;
  REQUIRE(w.openScenario(q(scenarios + "quickstart.yaml")));
  REQUIRE(waitFor([&] { return w.idle() && !w.outcome().path.isEmpty(); }));
  QSignalSpy planned(&w, &gui::MainWindow::planned);
  w.searchPlans();
  REQUIRE(waitFor([&] { return planned.count() == 1; }));
  const gui::PlanModel& m = *w.planModel();
  QAbstractItemModelTester tester(const_cast<gui::PlanModel*>(&m), QAbstractItemModelTester::FailureReportingMode::Fatal);
  // The same ranking as the planner itself (tests/golden/plan/quickstart.txt).
  const planner::PlanReport direct = planner::plan_search(scenario::load(scenarios + "quickstart.yaml"));
  REQUIRE(m.rowCount() == int(direct.ranked.size()));
  for (int r = 0; r < m.rowCount(); ++r) {
    CHECK(m.index(r, gui::PlanModel::StepTime).data(gui::PlanModel::RawRole).toDouble() == direct.ranked[std::size_t(r)].step_time);
  }
  CHECK(m.index(0, gui::PlanModel::Tier).data().toString().toStdString() == "simulated");
  // Sorted by a column's raw value through a proxy, as the view sorts.
  QSortFilterProxyModel proxy;
  proxy.setSourceModel(const_cast<gui::PlanModel*>(&m));
  proxy.setSortRole(gui::PlanModel::RawRole);
  proxy.sort(gui::PlanModel::Memory, Qt::AscendingOrder);
  for (int r = 1; r < proxy.rowCount(); ++r) {
    CHECK(proxy.index(r - 1, gui::PlanModel::Memory).data(gui::PlanModel::RawRole).toDouble() <=
          proxy.index(r, gui::PlanModel::Memory).data(gui::PlanModel::RawRole).toDouble());
  }
  // A row loads into the editor, and the window simulates exactly that plan.
  const int row = 5;
  const planner::Candidate& c = direct.ranked[row].candidate;
  w.loadPlan(row);
  REQUIRE(waitFor([&] { return w.idle() && !w.outcome().overrides.isEmpty(); }));
  REQUIRE(w.outcome().ok());
  const scenario::Scenario& s = *w.outcome().scenario;
  CHECK(s.plan.dp == c.plan.dp);
  CHECK(s.plan.tp == c.plan.tp);
  CHECK(s.plan.pp == c.plan.pp);
  CHECK(s.plan.schedule == c.plan.schedule);
  CHECK(s.plan.zero == c.plan.zero);
  CHECK(s.plan.placement == c.plan.placement);
  CHECK(s.training.micro_batch == c.micro_batch);
  CHECK(s.training.recompute == c.recompute);
  CHECK(w.editor()->value(QStringLiteral("plan.placement")).toStdString() == scenario::placement_string(c.plan));
}

TEST_CASE("a measurement is marked as another plan's once the editor's plan moves away from it", "[gui][run][widgets]") {
  gui::MainWindow w;
  w.runPanel()->setExecutable(QStringLiteral(PARASIM_CLI_PATH));
  REQUIRE(w.openScenario(q(scenarios + "quickstart.yaml")));
  REQUIRE(waitFor([&] { return w.idle() && !w.outcome().path.isEmpty(); }));
  QSignalSpy loaded(w.runPanel(), &gui::RunPanel::loaded);
  w.runPanel()->start();
  REQUIRE(waitFor([&] { return w.idle() && loaded.count() == 1; }, 300000));
  CHECK_FALSE(w.timeline()->measuredTitle().contains(QStringLiteral("another plan")));
  w.editor()->setValue(QStringLiteral("training.global_batch"), QStringLiteral("32"));
  REQUIRE(waitFor([&] { return w.idle() && w.outcome().overrides.size() == 1; }));
  CHECK(w.timeline()->measuredTitle().contains(QStringLiteral("another plan")));
  w.editor()->setValue(QStringLiteral("training.global_batch"), QStringLiteral("16"));
  REQUIRE(waitFor([&] { return w.idle() && w.outcome().overrides.isEmpty(); }));
  CHECK_FALSE(w.timeline()->measuredTitle().contains(QStringLiteral("another plan")));
}

TEST_CASE("a long plan search shows its progress and can be cancelled", "[gui][planner][widgets]") {
  // GPT-3 175B on 1,024 GPUs: 130,113 plans, seconds of scoring on two cores.
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("big.yaml"));
  {
    QFile f(path);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("cluster: {preset: dgx-h100, nodes: 128}\nmodel: gpt3-175b\n"
            "training: {global_batch: 1536, micro_batch: 1}\nplan: {tp: 8, pp: 8, dp: 16}\n");
  }
  gui::MainWindow w;
  REQUIRE(w.openScenario(path));
  REQUIRE(waitFor([&] { return w.idle() && !w.outcome().path.isEmpty(); }, 60000));
  QSignalSpy planned(&w, &gui::MainWindow::planned);
  w.searchPlans();
  CHECK_FALSE(w.planProgress()->isHidden());
  REQUIRE(waitFor([&] { return w.planProgress()->value() > 0; }, 60000));  // some plans scored
  w.cancelPlans();
  REQUIRE(waitFor([&] { return planned.count() == 1; }, 60000));
  CHECK(w.planNote().toStdString() == "search cancelled");
  CHECK(w.planProgress()->isHidden());
  CHECK(w.idle());
}
