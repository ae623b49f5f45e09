// SyncBN in the simulator: its collectives' time is the syncbn dimension, each forward
// gather stalls the host (PyTorch masks the gathered counts on the host), and the
// analytical tier follows both.
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "report/metrics.hpp"
#include "planner/estimate.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

using namespace parasim;

namespace {

scenario::Scenario cnn(const std::string& model, int dp, const char* batch_norm) {
  const std::vector<std::string> sets{"model=" + model, "plan.dp=" + std::to_string(dp),
                                      std::string("training.batch_norm=") + batch_norm};
  return scenario::load_text(
      "cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 256, micro_batch: 32, "
      "precision: fp32}\nplan: {dp: 1}\n",
      "bn.yaml", sets);
}

report::StepFigures figures(const scenario::Scenario& s, const sim::Prediction& p) {
  return report::step_figures(s, p.trace, topology::Cluster(s.cluster));
}

}  // namespace

TEST_CASE("SyncBN's collectives are the syncbn dimension and cost the step at least their exposed time", "[sim][bn]") {
  for (const char* model : {"lenet-bn", "resnet18"}) {
    const scenario::Scenario local = cnn(model, 4, "local");
    const scenario::Scenario sync = cnn(model, 4, "sync");
    CHECK_FALSE(report::dimension_shown(local, 6));
    CHECK(report::dimension_shown(sync, 6));
    const sim::Prediction pl = sim::predict(local);
    const sim::Prediction ps = sim::predict(sync);
    const report::StepFigures fl = figures(local, pl);
    const report::StepFigures fs = figures(sync, ps);
    INFO(model);
    CHECK(fl.comm_mean[6] == 0.0);
    // Each collective's span, summed on rank 0: the dimension's busy time.
    double spans = 0.0;
    int collectives = 0;
    for (const report::Span& sp : ps.trace.spans) {
      if (sp.rank == 0 && sp.category == program::Category::bn_comm) {
        spans += sp.seconds();
        ++collectives;
      }
    }
    int bn_layers = 0;
    for (const auto& l : sync.model.generic_layers) bn_layers += l.batch_norm.layers;
    CHECK(collectives == 2 * bn_layers * sync.micro_batches());
    CHECK(fs.ranks[0].comm[6] == Approx(spans).epsilon(1e-9));
    // Nothing hides them: every layer waits for its statistics.
    CHECK(fs.exposed_mean[6] == Approx(fs.comm_mean[6]).epsilon(1e-9));
    CHECK(fs.step_time > fl.step_time + fs.exposed_mean[6]);
    std::printf("%-8s dp 4: local %.3f ms, SyncBN %.3f ms (its collectives %.3f ms)\n", model, 1e3 * fl.step_time,
                1e3 * fs.step_time, 1e3 * fs.comm_mean[6]);
  }
}

TEST_CASE("a SyncBN forward piece starts after its gather and the host's issue of its kernels", "[sim][bn]") {
  const scenario::Scenario s = cnn("resnet18", 2, "sync");
  const sim::Prediction p = sim::predict(s, {false, sim::FoldMode::never, {}, {}});
  const double issue = s.cluster.device.host.forward;  // per kernel, forward
  REQUIRE(issue > 0.0);
  int checked = 0;
  for (std::size_t i = 0; i < p.trace.spans.size(); ++i) {
    const report::Span& gather = p.trace.spans[i];
    if (gather.category != program::Category::bn_comm || gather.rank != 0 ||
        p.program.ops[static_cast<std::size_t>(gather.op)].pass != program::Category::forward)
      continue;
    // The piece that follows it on rank 0: the same layer and micro-batch, the next step.
    for (const report::Span& sp : p.trace.spans) {
      const program::Op& o = p.program.ops[static_cast<std::size_t>(sp.op)];
      const program::Op& g = p.program.ops[static_cast<std::size_t>(gather.op)];
      if (sp.rank != 0 || sp.kind != program::OpKind::compute || o.layer != g.layer || o.micro_batch != g.micro_batch ||
          o.step != g.step + 1 || o.category != program::Category::forward) {
        continue;
      }
      CHECK(static_cast<double>(sp.start - gather.end) * 1e-12 >= issue * 0.999);
      ++checked;
    }
  }
  CHECK(checked == 20 * s.micro_batches());  // ResNet-18's 20 BatchNorm layers
}

TEST_CASE("folding SyncBN's replicas gives the unfolded step, bit for bit", "[sim][bn][fold]") {
  const scenario::Scenario s = cnn("resnet18", 4, "sync");
  const sim::Prediction folded = sim::predict(s, {false, sim::FoldMode::always, {}, {}});
  const sim::Prediction full = sim::predict(s, {false, sim::FoldMode::never, {}, {}});
  REQUIRE(folded.program.one_replica());
  CHECK(folded.trace.step_seconds() == full.trace.step_seconds());
}

TEST_CASE("the analytical tier follows SyncBN's collectives and host stalls", "[estimate][bn]") {
  for (const char* model : {"lenet-bn", "resnet18"}) {
    for (int dp : {2, 8}) {
      for (const char* bn : {"local", "sync"}) {
        const scenario::Scenario s = cnn(model, dp, bn);
        const double t = sim::predict(s).trace.step_seconds();
        const double e = planner::Estimator(s).estimate(s).step_time;
        std::printf("%-8s dp %d %-5s sim %.3f ms, estimate %.3f ms, %+.1f %%\n", model, dp, bn, 1e3 * t, 1e3 * e,
                    100 * (e / t - 1));
        INFO(model << " dp " << dp << " " << bn);
        CHECK(std::abs(e / t - 1) < 0.10);  // the bound stated in planner/estimate.hpp
      }
    }
  }
}
