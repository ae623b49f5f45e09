#include <QAbstractItemModelTester>
#include <QTemporaryDir>
#include <catch2/catch.hpp>

#include "mainwindow.h"
#include "models/linkmodel.h"
#include "plan/load.hpp"

using namespace parasim;

namespace {

std::shared_ptr<const topology::Cluster> cluster() {
  const std::vector<std::string> sets{"cluster=hgx-h100", "plan.dp=2", "cluster.nodes=2", "training.global_batch=8",
                                      "training.micro_batch=1"};
  return std::make_shared<const topology::Cluster>(
      plan::load(PARASIM_SOURCE_DIR "/scenarios/quickstart.yaml", sets).cluster);
}

}  // namespace

TEST_CASE("the link model passes Qt's model checks and lists every physical link", "[gui][models]") {
  gui::LinkModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  CHECK(model.rowCount() == 0);
  auto c = cluster();
  model.setCluster(c);
  // 2 HGX nodes, fat-tree with one leaf: 16 GPU-NVSwitch + 16 GPU-NIC + 16 NIC-leaf links.
  CHECK(model.rowCount() == 48);
  CHECK(model.columnCount() == gui::LinkModel::ColumnCount);
  CHECK(model.index(0, gui::LinkModel::From).data().toString().toStdString() == "n0.gpu0");
  CHECK(model.index(0, gui::LinkModel::To).data().toString().toStdString() == "n0.nvswitch");
  CHECK(model.index(0, gui::LinkModel::Bandwidth).data().toString().toStdString() == "450 GB/s");
  CHECK(model.index(0, gui::LinkModel::Bandwidth).data(gui::LinkModel::RawRole).toDouble() == 450e9);
}

TEST_CASE("the link-kind model dumps to the expected text", "[gui][models]") {
  gui::LinkKindModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setSummary(topology::summarize(*cluster()));
  CHECK(gui::dumpModel(model).toStdString() ==
        "Kind\tLinks\tTotal GB/s\n"
        "network\t16\t800\n"
        "nvlink\t16\t7200\n"
        "pcie\t16\t1024\n");
}

TEST_CASE("the window loads a scenario and shows errors instead of crashing", "[gui][widgets]") {
  gui::MainWindow w;
  REQUIRE(w.openScenario(PARASIM_SOURCE_DIR "/scenarios/quickstart.yaml"));
  CHECK(w.summaryText().contains("dp 2 x tp 1 x pp 1 = 2 devices"));
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
