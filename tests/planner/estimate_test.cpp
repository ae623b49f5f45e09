// The analytical tier against the event simulator: the same plan, the same cost models,
// closed forms instead of events. The bound stated in planner/estimate.hpp is checked here on
// every seed scenario.
#include "planner/estimate.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "workload/memory.hpp"
#include "planner/search.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"

using namespace parasim;

namespace {

// The simulator's step time for the scenario, as reports give it.
double simulated_step(const scenario::Scenario& s) {
  return report::step_figures(s, sim::predict(s).trace, topology::Cluster(s.cluster)).step_time;
}

// The analytical tier's.
double estimated_step(const scenario::Scenario& s) {
  return planner::Estimator(s).estimate(s).step_time;
}

}  // namespace

TEST_CASE("the analytical step time agrees with the simulator on every seed scenario", "[estimate]") {
  double worst = 0.0;
  for (const auto& entry : std::filesystem::directory_iterator(PARASIM_SOURCE_DIR "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    const scenario::Scenario s = scenario::load(entry.path().string());
    const sim::Prediction p = sim::predict(s);
    const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
    planner::Estimator est(s);
    const planner::StepEstimate e = est.estimate(s);
    const double err = (e.step_time - f.step_time) / f.step_time;
    std::printf("%-28s sim %10.4f s  estimate %10.4f s  %+6.1f %%  (%s)\n", entry.path().stem().c_str(), f.step_time,
                e.step_time, 100 * err, e.bottleneck.c_str());
    worst = std::max(worst, std::abs(err));
  }
  std::printf("worst %.1f %%\n", 100 * worst);
  CHECK(worst < 0.05);  // the bound stated in planner/estimate.hpp
}

TEST_CASE("across a scenario's search space, the analytical tier stays near the simulator", "[estimate][planner]") {
  for (const char* name : {"hybrid-32-gpus.yaml", "pipeline-microbatches.yaml", "dp-two-nodes.yaml"}) {
    const scenario::Scenario base = scenario::load(std::string(PARASIM_SOURCE_DIR "/scenarios/") + name);
    const std::vector<planner::Candidate> all = planner::enumerate_plans(base);
    planner::Estimator est(base);
    std::map<std::string, std::vector<double>> errors;
    for (std::size_t i = 0; i < all.size(); i += std::max<std::size_t>(1, all.size() / 60)) {
      const scenario::Scenario s = planner::with_candidate(base, all[i]);
      if (!workload::memory_per_rank(s).fits()) continue;
      const double e = est.estimate(s).step_time;
      const double t = simulated_step(s);
      const double err = (e - t) / t;
      errors[std::string(to_string(s.plan.schedule))].push_back(err);
      if (std::abs(err) > 0.1) std::printf("  %s %s: %+.1f %%\n", name, planner::describe(all[i]).c_str(), 100 * err);
    }
    for (auto& [schedule, v] : errors) {
      std::sort(v.begin(), v.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
      std::printf("%s %s: %zu plans, median |error| %.1f %%, worst %.1f %%\n", name, schedule.c_str(), v.size(),
                  100 * std::abs(v[v.size() / 2]), 100 * std::abs(v.back()));
      // The bounds stated in planner/estimate.hpp for plans across the search space.
      CHECK(std::abs(v[v.size() / 2]) < 0.20);
      CHECK(std::abs(v.back()) < 0.7);
    }
  }
}

TEST_CASE("the analytical tier follows ZeRO-1's parameter gathers under the next forward", "[estimate][dp]") {
  // dp-two-nodes: 16-way data parallel across two nodes, where the gathers are a large
  // part of the step. Moved under the forward they mostly vanish from the step, in the
  // estimate as in the simulator, and the two stay as close as on the seed scenarios.
  const std::string path = PARASIM_SOURCE_DIR "/scenarios/dp-two-nodes.yaml";
  double step[2] = {0.0, 0.0};
  for (int overlap = 0; overlap < 2; ++overlap) {
    const std::vector<std::string> sets{"plan.zero=1", overlap == 1 ? "plan.overlap_param_gather=true" : "plan.zero=1"};
    const scenario::Scenario s = scenario::load(path, sets);
    const double t = simulated_step(s);
    const double e = estimated_step(s);
    std::printf("zero 1, overlap_param_gather %d: sim %.4f s, estimate %.4f s, %+.1f %%\n", overlap, t, e,
                100 * (e - t) / t);
    CHECK(std::abs(e - t) / t < 0.05);
    step[overlap] = e;
  }
  CHECK(step[1] < 0.95 * step[0]);
}

TEST_CASE("the analytical tier's 1F1B cycle waits for one transfer per neighbouring stage", "[estimate][pp]") {
  // Over the emulated cluster's 200 Mb/s link a 64 KiB transfer takes about 2.7 ms, half a
  // stage's work per micro-batch. With two stages each waits at one exchange a micro-batch
  // (the cycle is the work plus one transfer); with four the middle stages wait at two,
  // one with each neighbour, and set the pace. Counting two transfers a cycle for both
  // overstates the two-stage step by 19 % and the four-stage one by 5 %.
  const std::string file = PARASIM_SOURCE_DIR "/scenarios/emulated-pp.yaml";
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{},
        {"cluster.nodes=4", "plan.pp=4", "model.layers=8", "training.micro_batch=1"},
        {"cluster.nodes=4", "plan.pp=4", "model.layers=8", "training.micro_batch=4", "training.global_batch=32"}}) {
    const scenario::Scenario s = scenario::load(file, sets);
    const double t = simulated_step(s), e = estimated_step(s);
    std::printf("pp %d micro-batch %d: sim %.2f ms, estimate %.2f ms, %+.1f %%\n", s.plan.pp, s.training.micro_batch,
                1e3 * t, 1e3 * e, 100 * (e - t) / t);
    CHECK(e == Approx(t).epsilon(0.02));
  }
}

TEST_CASE("interleaved the analytical tier sends a chunk's gradients once its own last backward is done",
          "[estimate][dp]") {
  // The cooldown runs the last micro-batches' backwards chunk by chunk from the last, so
  // a stage's later chunks have their gradients final pp chunk backwards apart, long
  // before the end; their buckets cross the slow network under the rest of the backward
  // (the host issues them then). Taken as ready only during the last backward, as 1F1B's
  // are, these two plans were estimated 29.7 and 14.4 % slower than simulated; now 22.7
  // and 11.7 %. The rest: the estimate has every stage's reductions share the NICs at
  // once, where the simulator spreads them over the cooldown.
  const std::string file = PARASIM_SOURCE_DIR "/scenarios/dp-two-nodes.yaml";
  const std::vector<std::pair<std::vector<std::string>, double>> plans{
      {{"plan.dp=4", "plan.tp=1", "plan.pp=4", "plan.virtual_stages=2", "plan.placement=pp,tp,dp"}, 0.25},
      {{"plan.dp=2", "plan.tp=2", "plan.pp=4", "plan.virtual_stages=3", "training.micro_batch=2",
        "training.recompute=selective", "plan.placement=pp,tp,dp"},
       0.13}};
  for (const auto& [sets, bound] : plans) {
    const scenario::Scenario s = scenario::load(file, sets);
    const double t = simulated_step(s), e = estimated_step(s);
    std::printf("dp %d pp %d x%d: sim %.1f ms, estimate %.1f ms, %+.1f %%\n", s.plan.dp, s.plan.pp,
                s.plan.virtual_stages, 1e3 * t, 1e3 * e, 100 * (e - t) / t);
    CHECK(e > t);
    CHECK(e < (1.0 + bound) * t);
  }
}

TEST_CASE("GPipe's forward and backward phases each go at the pace of the work or the link", "[estimate][pp]") {
  // Two stages over the emulated 200 Mb/s link, a micro-batch at a time: an activation
  // takes 1.4 ms to cross, longer than a stage's forward (1.0 ms) and shorter than its
  // backward (1.8 ms). The forward phase goes at the link's pace and the backward at the
  // work's: 3.2 ms a micro-batch. Pairing the forward and backward work (2.8 ms) against
  // two transfers (2.7 ms) let the short forward borrow from the long backward, 16 %
  // fast. Still fast by what the estimate leaves out (MPI's rendezvous and the network's
  // CPU time), within 10 %.
  const scenario::Scenario s =
      scenario::load(PARASIM_SOURCE_DIR "/scenarios/emulated-pp.yaml",
                     std::vector<std::string>{"plan.schedule=gpipe", "training.micro_batch=1"});
  const double t = simulated_step(s), e = estimated_step(s);
  std::printf("GPipe: sim %.2f ms, estimate %.2f ms, %+.1f %%\n", 1e3 * t, 1e3 * e, 100 * (e - t) / t);
  CHECK(e < t);
  CHECK(e > 0.9 * t);
}
