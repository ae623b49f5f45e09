#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "scenario/load.hpp"
#include "report/chrome_trace.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"
#include "tests/report/pipeline_scenario.hpp"

using namespace parasim;
using report::uncovered_length;
using report::union_length;

TEST_CASE("interval unions and uncovered parts", "[report][metrics]") {
  // [0,10) u [5,15) u [20,30) = 25; of it, [0,30) minus [8,22) leaves 8 + 8 = 16.
  CHECK(union_length({{0, 10}, {5, 15}, {20, 30}}) == 25);
  CHECK(union_length({}) == 0);
  CHECK(uncovered_length({{0, 10}, {5, 15}, {20, 30}}, {{8, 22}}) == 8 + 8);
  CHECK(uncovered_length({{0, 10}}, {}) == 10);
  CHECK(uncovered_length({{0, 10}}, {{0, 3}, {5, 7}, {9, 20}}) == 2 + 2);
}

TEST_CASE("step figures from a hand-made trace", "[report][metrics]") {
  // One rank: compute [0, 6) and [8, 10) ms, a dp all-reduce [5, 9) ms. Step 10 ms;
  // dp busy 4 ms, exposed [6, 8) = 2 ms; never idle, so no bubble.
  const scenario::Scenario s = scenario::load_text(
      "cluster: {preset: dgx-h100, gpus_per_node: 1}\nmodel: gpt3-13b\n"
      "training: {global_batch: 8}\n",
      "m.yaml");
  report::Trace t;
  t.world = 1;
  const std::int64_t ms = 1'000'000'000;
  t.spans.push_back(
      {0, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 0, 0, 6 * ms});
  t.spans.push_back(
      {0, program::Stream::compute, program::Category::backward, program::OpKind::compute, 0, 1, 8 * ms, 10 * ms});
  t.spans.push_back(
      {0, program::Stream::dp, program::Category::dp_comm, program::OpKind::collective, -1, 2, 5 * ms, 9 * ms});
  t.step_end = 10 * ms;
  const report::StepFigures f = report::step_figures(s, t, topology::Cluster(s.cluster));
  CHECK(f.step_time == Approx(10e-3));
  CHECK(f.samples_per_s == Approx(800.0));
  CHECK(f.tokens_per_s == Approx(800.0 * 2048));
  CHECK(f.ranks[0].compute == Approx(8e-3));
  CHECK(f.comm_mean[2] == Approx(4e-3));
  CHECK(f.exposed_mean[2] == Approx(2e-3));
  CHECK(f.bubble_fraction == Approx(0.0).margin(1e-12));
  // MFU: model FLOPs of the step over 10 ms and the bf16 peak.
  CHECK(f.mfu == Approx(workload::step_flops(s.model, 8, scenario::Recompute::none) / 10e-3 / 989.4e12));
}

TEST_CASE("busy devices far from their peak are latency-bound, near it compute-bound", "[report][metrics]") {
  // GPT-3 13B, 8 samples of 2,048 tokens: about 1.3 PFLOP a step. Computing all of a
  // 100 s step is 1.3 % MFU (small kernels' launches and latency); all of a 1 s step, well
  // past the peak of one GPU, is the compute.
  const scenario::Scenario s = scenario::load_text(
      "cluster: {preset: dgx-h100, gpus_per_node: 1}\nmodel: gpt3-13b\n"
      "training: {global_batch: 8}\n",
      "m.yaml");
  auto busy = [&](double seconds) {
    report::Trace t;
    t.world = 1;
    t.step_end = static_cast<std::int64_t>(seconds * 1e12);
    t.spans.push_back(
        {0, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 0, 0, t.step_end});
    return report::step_figures(s, t, topology::Cluster(s.cluster));
  };
  const report::StepFigures slow = busy(100.0);
  CHECK(slow.mfu < 0.1);
  CHECK(slow.limit.kind == "latency");
  CHECK(slow.limit.fraction == Approx(1.0));
  CHECK_THAT(slow.bottleneck, Catch::Matchers::StartsWith("launch / latency-bound: the devices compute 100 % of the step at 1."));
  const report::StepFigures fast = busy(1.0);
  CHECK(fast.limit.kind == "compute");
  CHECK_THAT(fast.bottleneck, Catch::Matchers::StartsWith("compute-bound"));
}

TEST_CASE("the Chrome trace has a process per rank, a thread per stream and an event per span", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  const topology::Cluster cluster(s.cluster);
  const report::Trace trace = sim::simulate(s, prog);
  const auto doc = nlohmann::json::parse(report::chrome_trace_json(trace, prog, cluster));
  int complete = 0;
  int process_names = 0;
  int thread_names = 0;
  bool names_ok = true;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      names_ok = names_ok && e["dur"].get<double>() >= 0 && !e["name"].get<std::string>().empty();
    }
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
  }
  CHECK(complete == static_cast<int>(trace.spans.size()));
  CHECK(process_names == 8 + 1);  // ranks and the links track
  CHECK(thread_names == 8 * program::stream_count);
  CHECK(names_ok);
}
