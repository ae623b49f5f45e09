#include <QAbstractItemModelTester>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <catch2/catch.hpp>
#include <functional>

#include "mainwindow.h"
#include "models/linkmodel.h"
#include "models/summarymodel.h"
#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"
#include "planeditor.h"
#include "report/metrics.hpp"
#include "report/run_model.hpp"
#include "sim/simulate.hpp"
#include "support.h"
#include "topology/units.hpp"

using namespace parasim;

namespace {

std::shared_ptr<const topology::Cluster> cluster() {
  const std::vector<std::string> sets{"cluster=hgx-h100", "plan.dp=2", "cluster.nodes=2", "training.global_batch=8",
                                      "training.micro_batch=1"};
  return std::make_shared<const topology::Cluster>(
      scenario::load(PARASIM_SOURCE_DIR "/scenarios/quickstart.yaml", sets).cluster);
}

using test::scenarios;
using test::waitFor;

}  // namespace

TEST_CASE("the link model passes Qt's model checks and lists every physical link", "[gui][models]") {
  gui::LinkModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  CHECK(model.rowCount() == 0);
  auto c = cluster();
  model.setCluster(c);
  // 2 HGX nodes, fat-tree with one leaf: 16 GPU-NVSwitch + 16 GPU-NIC + 16 NIC-leaf links,
  // and to host memory 16 GPU-PCIe switch + 8 switch-host links.
  CHECK(model.rowCount() == 72);
  CHECK(model.columnCount() == gui::LinkModel::ColumnCount);
  CHECK(model.index(0, gui::LinkModel::From).data().toString().toStdString() == "n0.gpu0");
  CHECK(model.index(0, gui::LinkModel::To).data().toString().toStdString() == "n0.nvswitch");
  // The usable rate: NVLink 4's 450 GB/s each way at NCCL's 20.6 of 25 GB/s per link.
  CHECK(model.index(0, gui::LinkModel::Bandwidth).data().toString().toStdString() == "371 GB/s");
  CHECK(model.index(0, gui::LinkModel::Bandwidth).data(gui::LinkModel::RawRole).toDouble() == Approx(450e9 * 0.824));
}

TEST_CASE("the link-kind model dumps to the expected text", "[gui][models]") {
  gui::LinkKindModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setSummary(topology::summarize(*cluster()));
  CHECK(gui::dumpModel(model).toStdString() ==
        "Kind\tLinks\tTotal GB/s\n"
        "host\t24\t1272\n"
        "network\t16\t752\n"
        "nvlink\t16\t5932.8\n"
        "pcie\t16\t1024\n");
}

TEST_CASE("the window loads a scenario and shows errors instead of crashing", "[gui][widgets]") {
  gui::MainWindow w;
  REQUIRE(w.openScenario(PARASIM_SOURCE_DIR "/scenarios/quickstart.yaml"));
  CHECK(w.summaryText().contains("dp 2 x tp 1 x pp 1 = 2 devices"));
  REQUIRE(waitFor([&] { return !w.simulator()->busy() && w.outcome().scenario != nullptr; }));
  CHECK(w.linkModel()->rowCount() == 2);
  QTemporaryDir dir;
  const QString bad = dir.filePath("bad.yaml");
  QFile f(bad);
  REQUIRE(f.open(QIODevice::WriteOnly));
  f.write("cluster: cpu-host\nmodel: tiny-gpt\ntraining: {global_batch: 16}\nplan: {tp: two}\n");
  f.close();
  CHECK_FALSE(w.openScenario(bad));
  CHECK(w.summaryText().contains("bad.yaml:4:12: plan.tp: expected a positive integer"));
  CHECK(w.linkModel()->rowCount() == 2);  // the previous scenario stays
  // It renders: a grab of the whole window is not empty.
  w.resize(800, 600);
  CHECK_FALSE(w.grab().isNull());
}

TEST_CASE("the summary model holds the simulator's figures, formatted as the command line does", "[gui][models]") {
  // Independent of the window: the same scenario through sim::predict and step_figures.
  const scenario::Scenario s = scenario::load(scenarios + "dp-one-node.yaml");
  const sim::Prediction p = sim::predict(s);
  const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
  gui::SummaryModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setFigures(s, f);
  CHECK(model.columnCount() == 2);
  CHECK(model.value("step time").toStdString() == units::format_duration(f.step_time));
  CHECK(model.value("MFU").toStdString() == QString::number(100 * f.mfu, 'f', 1).toStdString() + " %");
  CHECK(model.value("bottleneck").toStdString() == f.bottleneck);
  CHECK(model.index(0, gui::SummaryModel::Value).data(gui::SummaryModel::RawRole).toDouble() == f.step_time);
  // Rows in order: step time, samples/s, tokens/s, per device, MFU, bubble, then
  // communication and exposed per dimension, then the bottleneck.
  const QStringList lines = gui::dumpModel(model).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  REQUIRE(lines.size() == 1 + 13);
  CHECK(lines[0].toStdString() == "Metric\tPredicted");
  CHECK(lines[1].startsWith(QStringLiteral("step time\t")));
  CHECK(lines[7].startsWith(QStringLiteral("tp communication\t0 s")));  // dp only
  CHECK(lines[13].startsWith(QStringLiteral("bottleneck\t")));
  // The whole run's rows after the step's, where the scenario gives the run's length.
  const std::vector<std::string> tokens{"training.tokens=1B"};
  const scenario::Scenario rs = scenario::load(scenarios + "dp-one-node.yaml", tokens);
  const report::RunEstimate run = report::estimate_run(rs, f.step_time, report::step_energy(rs, p.trace));
  model.setFigures(rs, f, &run);
  CHECK(model.value("goodput").toStdString() == QString::number(100 * run.goodput, 'f', 1).toStdString() + " %");
  CHECK(model.value("time to train").startsWith(QString::fromStdString(units::format_span(run.expected))));
  CHECK(model.value("energy").endsWith(QStringLiteral("MWh")));
  model.setFigures(s, f);
  CHECK(model.value("goodput").isEmpty());
  // SyncBN's exchange gets its rows where the plan has it.
  const scenario::Scenario bn = scenario::load(scenarios + "syncbn-resnet18.yaml");
  const report::StepFigures fb = report::step_figures(bn, sim::predict(bn).trace, topology::Cluster(bn.cluster));
  model.setFigures(bn, fb);
  CHECK(model.value("syncbn exposed").toStdString() == units::format_duration(fb.exposed_mean[6]));
  CHECK(fb.exposed_mean[6] > 0.0);
}

TEST_CASE("the memory model marks a stage out of memory in red, and dumps to the expected text", "[gui][models]") {
  gui::MemoryModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  // A 30B GPT on one 80 GB GPU does not fit (scenario 3); tp 8 x pp 2 does.
  const workload::MemoryReport one = workload::memory_per_rank(scenario::load(scenarios + "memory-30b-one-gpu.yaml"));
  model.setReport(one);
  REQUIRE(model.rowCount() == 1);
  CHECK(model.index(0, gui::MemoryModel::Fits).data().toString().toStdString() == "out of memory");
  CHECK(model.index(0, gui::MemoryModel::Total).data(Qt::ForegroundRole).value<QBrush>().color() == QColor(200, 0, 0));
  CHECK(model.index(0, gui::MemoryModel::Total).data(gui::MemoryModel::RawRole).toDouble() == one.stages[0].total());
  CHECK(model.index(0, gui::MemoryModel::Total).data().toString().toStdString() == units::format_bytes(one.stages[0].total()));
  const workload::MemoryReport split = workload::memory_per_rank(scenario::load(scenarios + "memory-30b-tp8.yaml"));
  model.setReport(split);
  REQUIRE(model.rowCount() == 2);
  for (int r = 0; r < 2; ++r) {
    CHECK(model.index(r, gui::MemoryModel::Fits).data().toString().toStdString() == "fits");
    CHECK_FALSE(model.index(r, gui::MemoryModel::Total).data(Qt::ForegroundRole).isValid());
    CHECK(model.index(r, gui::MemoryModel::Total).data(gui::MemoryModel::GiBRole).toDouble() ==
          Approx(split.stages[std::size_t(r)].total() / double(1ULL << 30)));
  }
  CHECK(gui::dumpModel(model).section(QLatin1Char('\n'), 0, 0).toStdString() ==
        "Stage\tPer rank\tCapacity\tFits\tWeights\tGradients\tMaster\tOptimizer\tActivations\tLogits\tRuntime\tHost");
  // Within the device but not its 5 % headroom (scenario 17 keeping its parameters: 78.7 of
  // 80 GiB): named so, in red.
  const workload::MemoryReport tight = workload::memory_per_rank(scenario::load(
      scenarios + "offload-30b-one-gpu.yaml", std::vector<std::string>{"plan.offload_params=false"}));
  model.setReport(tight);
  CHECK(model.index(0, gui::MemoryModel::Fits).data().toString().toStdString() == "past the headroom");
  CHECK(model.index(0, gui::MemoryModel::Total).data(Qt::ForegroundRole).value<QBrush>().color() == QColor(200, 0, 0));
}

TEST_CASE("the memory model shows what an offloading plan keeps in host memory, and whether it fits there",
          "[gui][models]") {
  gui::MemoryModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  const std::string file = scenarios + "offload-30b-one-gpu.yaml";
  const workload::MemoryReport off = workload::memory_per_rank(scenario::load(file));
  model.setReport(off);
  REQUIRE(model.rowCount() == 1);
  CHECK(model.index(0, gui::MemoryModel::Fits).data().toString().toStdString() == "fits");
  CHECK(model.index(0, gui::MemoryModel::Host).data(gui::MemoryModel::RawRole).toDouble() == Approx(off.peak().host));
  CHECK(model.index(0, gui::MemoryModel::Host).data().toString().toStdString() == "503 GiB");
  // A host with 256 GB: the device fits, the host does not.
  model.setReport(
      workload::memory_per_rank(scenario::load(file, std::vector<std::string>{"cluster.host.memory=256GB"})));
  CHECK(model.index(0, gui::MemoryModel::Fits).data().toString().toStdString() == "out of host memory");
  CHECK_FALSE(model.index(0, gui::MemoryModel::Fits).data(gui::MemoryModel::RawRole).toBool());
}

TEST_CASE("the plan editor shows a scenario's values and turns edits into --set overrides", "[gui][widgets]") {
  gui::PlanEditor editor;
  editor.setScenario(scenario::load(scenarios + "dp-one-node.yaml"));
  CHECK(editor.value("plan.dp").toStdString() == "8");
  CHECK(editor.value("training.precision").toStdString() == "bf16");
  CHECK(editor.value("plan.schedule").toStdString() == "1f1b");
  CHECK(editor.value("plan.collective").toStdString() == "auto");
  CHECK(editor.value("plan.bucket_size").toStdString() == "25MiB");
  CHECK(editor.value("plan.overlap_param_gather").toStdString() == "false");
  CHECK(editor.value("plan.offload_optimizer").toStdString() == "false");
  CHECK(editor.value("training.batch_norm").toStdString() == "local");
  CHECK(editor.overrides().isEmpty());
  int edits = 0;
  QObject::connect(&editor, &gui::PlanEditor::edited, [&] { ++edits; });
  REQUIRE(editor.setValue("plan.tp", "2"));
  REQUIRE(editor.setValue("plan.dp", "4"));
  CHECK(edits == 2);
  CHECK(editor.overrides().join(' ').toStdString() == "plan.dp=4 plan.tp=2");
  CHECK_FALSE(editor.setValue("plan.nonsense", "1"));
  // Every field's value is one the loader accepts: the scenario with all of them set
  // explicitly loads to the same plan. Preset fields show the scenario's own in brackets
  // (no override) until a preset is chosen.
  CHECK(editor.value("cluster.preset").toStdString() ==
        "(" + scenario::load(scenarios + "dp-one-node.yaml").cluster.name + ")");
  QStringList all;
  for (const QString& k : editor.keys()) {
    if (!editor.value(k).startsWith('(')) all << k + "=" + editor.value(k);
  }
  std::vector<std::string> sets;
  for (const QString& a : all) sets.push_back(a.toStdString());
  const scenario::Scenario s = scenario::load(scenarios + "dp-one-node.yaml", sets);
  CHECK(s.plan.tp == 2);
  CHECK(s.plan.dp == 4);
}

TEST_CASE("editing tp in the window re-simulates and changes the summary, an invalid value is marked at its field",
          "[gui][widgets]") {
  gui::MainWindow w;
  REQUIRE(w.openScenario(QString::fromStdString(scenarios + "dp-one-node.yaml")));
  auto settled = [&](const QStringList& overrides) {
    return waitFor([&] { return !w.simulator()->busy() && w.outcome().overrides == overrides && !w.outcome().path.isEmpty(); });
  };
  REQUIRE(settled({}));
  REQUIRE(w.outcome().ok());
  const QString dp8 = w.summaryModel()->value("step time");
  CHECK(w.summaryModel()->value("tp communication").toStdString() == "0 s");

  // dp 4 x tp 2 on the same 8 GPUs: tensor-parallel traffic appears, the step time moves.
  w.editor()->setValue("plan.dp", "4");
  w.editor()->setValue("plan.tp", "2");
  REQUIRE(settled({"plan.dp=4", "plan.tp=2"}));
  REQUIRE(w.outcome().ok());
  CHECK(w.summaryModel()->value("step time") != dp8);
  CHECK(w.summaryModel()->value("tp communication").toStdString() != "0 s");
  CHECK(w.outcome().scenario->plan.tp == 2);

  // dp 4 x tp 3 needs 12 devices of 8: the loader's message, the command line's, at the
  // field of the key it names; the views keep the last valid plan.
  const QString before = w.summaryModel()->value("step time");
  w.editor()->setValue("plan.tp", "3");
  REQUIRE(settled({"plan.dp=4", "plan.tp=3"}));
  CHECK_FALSE(w.outcome().ok());
  std::string cli, key, message;
  try {
    const std::vector<std::string> sets{"plan.dp=4", "plan.tp=3"};
    scenario::load(scenarios + "dp-one-node.yaml", sets);
  } catch (const scenario::ScenarioError& e) {
    cli = e.what();
    key = e.key();
    message = e.message();
  }
  REQUIRE_FALSE(cli.empty());
  CHECK_THAT(cli, Catch::Contains("12 devices, but the cluster has 8"));
  CHECK(w.outcome().errorKey.toStdString() == key);
  CHECK(w.editor()->keys().contains(QString::fromStdString(key)));
  // The field shows the key's message, not where the command line found it (--set ...:1:9).
  CHECK(w.editor()->errorAt(QString::fromStdString(key)).toStdString() == message);
  CHECK_FALSE(w.editor()->errorAt(QString::fromStdString(key)).contains(QStringLiteral("--set")));
  CHECK(w.summaryModel()->value("step time") == before);
  // Back to a valid value: the error goes.
  w.editor()->setValue("plan.tp", "2");
  REQUIRE(settled({"plan.dp=4", "plan.tp=2"}));
  CHECK(w.editor()->errorAt(QString::fromStdString(key)).isEmpty());
}
