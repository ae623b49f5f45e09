// The run model (report/run_model.hpp): its closed forms against hand-computed cases and
// the published formulas they come from, against a Monte-Carlo of the failure process, the
// energy of a hand-made trace, and the job: keys.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "report/run_model.hpp"
#include "scenario/load.hpp"

using namespace parasim;

namespace {

// 4 H100s in one node, a GPT-3 13B; the rest from `extra`.
scenario::Scenario h100(const std::string& extra) {
  return scenario::load_text("cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\nmodel: gpt3-13b\n"
                             "training: {global_batch: 8, steps: 1000}\nplan: {tp: 4}\n" + extra,
                             "run.yaml");
}

}  // namespace

TEST_CASE("Young's and Daly's intervals and Daly's expected time", "[report][run]") {
  // delta 60 s, M 1 h: Young sqrt(2 x 60 x 3600) = 657.27 s; Daly x = 60 / 7200:
  // 657.27 x (1 + sqrt(x)/3 + x/9) - 60 = 657.27 x 1.031355 - 60 = 617.9 s.
  CHECK(report::young_interval(60, 3600) == Approx(657.267).epsilon(1e-5));
  CHECK(report::daly_interval(60, 3600) == Approx(617.88).epsilon(1e-4));
  // A checkpoint costing twice the MTBF or more: Daly's interval is the MTBF.
  CHECK(report::daly_interval(9000, 3600) == 3600);
  // Synchronous spans: Daly's complete model M e^{R/M} (e^{(tau + delta)/M} - 1). With M 1 h,
  // R 5 min, tau + delta 10 min: 3600 x e^{1/12} x (e^{1/6} - 1) = 709.6 s.
  const double lambda = 1.0 / 3600;
  CHECK(report::expected_span(lambda, 600, 600, 300) == Approx(3600 * std::exp(1.0 / 12) * std::expm1(1.0 / 6)));
  CHECK(report::expected_span(lambda, 600, 600, 300) == Approx(709.6).epsilon(1e-3));
  // Rare failures: a span takes its length.
  CHECK(report::expected_span(1e-12, 600, 900, 300) == Approx(600).epsilon(1e-6));
  // A longer retry (an asynchronous checkpoint not yet durable) costs more.
  CHECK(report::expected_span(lambda, 600, 900, 300) > report::expected_span(lambda, 600, 600, 300));
}

TEST_CASE("a run's checkpoints, interruptions and expected time, by hand", "[report][run]") {
  // 4 devices failing every 4,000 s each, the node every 8,000 s: 1/1000 + 1/8000 a second.
  const scenario::Scenario s =
      h100("job:\n  failures: {device_mtbf: 4000s, node_mtbf: 8000s, restart: 30s}\n"
           "  checkpoint: {steps: 100, bandwidth: 100GB/s}\n");
  CHECK(report::failure_rate(s) == Approx(4.0 / 4000 + 1.0 / 8000));
  // bf16 weights (2 bytes), fp32 master weights (4) and AdamW's two moments (8), written
  // by all 4 ranks at 100 GB/s and read back at a restart the same.
  const report::CheckpointCost c = report::checkpoint_cost(s);
  const double bytes = s.model.parameter_count() * 14.0;
  CHECK(c.bytes == Approx(bytes));
  CHECK(c.writers == 4);
  CHECK(c.bytes_per_rank == Approx(bytes / 4));
  CHECK(c.write == Approx(bytes / 100e9));
  CHECK(c.stall == c.write);
  CHECK(c.load == c.write);

  // 1,000 steps of 1 s, a checkpoint every 100: 10 spans of 100 s + the write, each
  // Daly's expected time with R = 30 s + the load.
  const report::RunEstimate r = report::estimate_run(s, 1.0, report::StepEnergy{});
  const double lambda = 4.0 / 4000 + 1.0 / 8000;
  const double R = 30 + c.load;
  const double span = 100 + c.write;
  const double expected = 10 * std::exp(lambda * R) * std::expm1(lambda * span) / lambda;
  CHECK(r.interval_steps == 100);
  CHECK(r.checkpoints == 10);
  CHECK(r.work == Approx(1000));
  CHECK(r.ideal == Approx(1000 + 10 * c.write));
  CHECK(r.expected == Approx(expected));
  CHECK(r.interruptions == Approx(lambda * expected));
  CHECK(r.goodput == Approx(1000 / expected));
  // Restarts: each span's first try fails with probability 1 - e^{-λ span}, then 1 / e^{-λ span}
  // cycles, each restart (e^{λR} - 1) / λ long; about interruptions x R while λR is small.
  CHECK(r.restarting == Approx(10 * std::expm1(lambda * span) * std::expm1(lambda * R) / lambda));
  CHECK(r.restarting == Approx(r.interruptions * R).epsilon(0.05));
  CHECK(r.ideal + r.restarting + r.lost == Approx(r.expected));
  CHECK(r.device_hours == Approx(4 * expected / 3600));
  CHECK(r.cost == 0.0);  // not priced

  // auto: Daly's interval, rounded to whole steps.
  const scenario::Scenario a = h100("job: {failures: {device_mtbf: 4000s, node_mtbf: 8000s}, checkpoint: {bandwidth: 100GB/s}}\n");
  const report::RunEstimate ra = report::estimate_run(a, 1.0, report::StepEnergy{});
  CHECK(ra.auto_interval);
  CHECK(ra.interval_steps == std::lround(report::daly_interval(c.write, 1 / lambda)));
  // Daly's interval is about the exact optimum: one step either way costs no less.
  for (int k : {ra.interval_steps / 2, ra.interval_steps * 2}) {
    const scenario::Scenario other = h100(
        "job: {failures: {device_mtbf: 4000s, node_mtbf: 8000s}, checkpoint: {bandwidth: 100GB/s, steps: " +
        std::to_string(k) + "}}\n");
    CHECK(report::estimate_run(other, 1.0, report::StepEnergy{}).expected > ra.expected);
  }
}

TEST_CASE("the closed form lies inside the Monte-Carlo's confidence interval", "[report][run]") {
  // Failures every ~900 s against 1,000 s of work: a few interruptions a run.
  for (const char* mode : {"sync", "async"}) {
    DYNAMIC_SECTION(mode) {
      const scenario::Scenario s = h100(std::string("job:\n  failures: {device_mtbf: 4000s, node_mtbf: 8000s, restart: 20s}\n"
                                                    "  checkpoint: {steps: 50, bandwidth: 50GB/s, mode: ") +
                                        mode + "}\n");
      const report::RunEstimate r = report::estimate_run(s, 1.0, report::StepEnergy{});
      const report::RunSamples mc = report::sample_runs(r, 20000, 7);
      INFO("closed form " << r.expected << " s, Monte Carlo " << mc.mean << " +- " << mc.ci95);
      CHECK(mc.interruptions > 0.5);
      // 99 % interval: 2.58 standard errors.
      CHECK(std::abs(mc.mean - r.expected) <= 2.58 * mc.stddev / std::sqrt(double(mc.runs)));
      CHECK(std::abs(mc.interruptions - r.interruptions) <= 0.05 * r.interruptions);
      CHECK(mc.min >= r.ideal - 1e-9);
      // The same seed, the same runs.
      CHECK(report::sample_runs(r, 200, 7).mean == report::sample_runs(r, 200, 7).mean);
    }
  }
  // Asynchronous: training stops only for the copy, and the write is not on the step.
  const scenario::Scenario sync = h100("job: {checkpoint: {steps: 50, bandwidth: 5GB/s}}\n");
  const scenario::Scenario async = h100("job: {checkpoint: {steps: 50, bandwidth: 5GB/s, mode: async}}\n");
  const report::RunEstimate rs = report::estimate_run(sync, 1.0, {});
  const report::RunEstimate ra = report::estimate_run(async, 1.0, {});
  CHECK(ra.checkpoint.stall < rs.checkpoint.stall);
  CHECK(ra.checkpoint.stall ==
        Approx(ra.checkpoint.bytes_per_rank * sync.cluster.host.devices_per_link / sync.cluster.host.link_bandwidth));
  CHECK(ra.checkpointing < rs.checkpointing);
}

TEST_CASE("a job interrupted faster than it restarts never finishes, and is not played out", "[report][run]") {
  // 4 devices failing every minute each: the job every 15 s, a restart of a week: e^{λR}
  // past any double.
  const scenario::Scenario s = h100("job: {failures: {device_mtbf: 1min, restart: 7d}}\n");
  const report::RunEstimate r = report::estimate_run(s, 1.0, report::StepEnergy{});
  CHECK_FALSE(std::isfinite(r.expected));
  CHECK_THROWS_AS(report::sample_runs(r, 10, 1), std::domain_error);
  CHECK(report::describe_run(r, s, nullptr).find("time to train    never") != std::string::npos);
  // A restart of 10 min: finite but past any run worth playing out.
  const scenario::Scenario slow = h100("job: {failures: {device_mtbf: 1min, restart: 10min}}\n");
  const report::RunEstimate rs = report::estimate_run(slow, 1.0, report::StepEnergy{});
  CHECK(rs.expected > 1e15);
  CHECK_THROWS_AS(report::sample_runs(rs, 10, 1), std::domain_error);
}

TEST_CASE("a step's energy from a hand-made trace", "[report][run]") {
  // Two devices in one node at 700 W busy, 280 W communicating, 70 W idle; the node's other
  // parts 1 kW; PUE 1.2. Rank 0: compute [0, 4) s, an all-reduce [3, 6) (2 s not under
  // compute), a receive's wait [6, 8): idle 4 s. Rank 1 computes the whole 10 s.
  const scenario::Scenario s = scenario::load_text(
      "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}\nmodel: gpt3-13b\ntraining: {global_batch: 8}\n"
      "plan: {tp: 2}\njob: {power: {busy: 700W, communication: 280W, idle: 70W, node: 1kW, pue: 1.2}}\n",
      "e.yaml");
  report::Trace t;
  t.world = 2;
  const std::int64_t sec = 1'000'000'000'000;
  t.spans.push_back({0, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 0, 0, 4 * sec});
  t.spans.push_back({0, program::Stream::tp, program::Category::tp_comm, program::OpKind::collective, 0, 1, 3 * sec, 6 * sec});
  t.spans.push_back({0, program::Stream::pp, program::Category::pp_comm, program::OpKind::recv, 0, 2, 6 * sec, 8 * sec});
  t.spans.push_back({1, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 3, 0, 10 * sec});
  t.step_end = 10 * sec;
  const report::StepEnergy e = report::step_energy(s, t);
  CHECK(e.compute == Approx((4 + 10) / 2.0));
  CHECK(e.communication == Approx(2 / 2.0));
  CHECK(e.idle == Approx(4 / 2.0));
  const double devices = (4 * 700 + 2 * 280 + 4 * 70) + 10 * 700;
  CHECK(e.devices == Approx(devices));
  CHECK(e.nodes == Approx(1000 * 10));
  CHECK(e.facility == Approx(0.2 * (devices + 10000)));
  CHECK(e.total() == Approx(1.2 * (devices + 10000)));
}

TEST_CASE("job: keys, their defaults and their errors", "[report][run][scenario]") {
  // Defaults: Llama 3's counts (419 interruptions in 54 days, 58.7 % of them the GPUs', on
  // 16,384 GPUs in 2,048 nodes); the power from the board's TDP.
  const scenario::Scenario d = h100("");
  CHECK(d.job.device_mtbf / 3600 == Approx(16384.0 * 54 * 24 / (0.587 * 419)));
  CHECK(d.job.node_mtbf / 3600 == Approx(2048.0 * 54 * 24 / (0.413 * 419)));
  CHECK(d.job.power_busy == 700);
  CHECK(d.job.power_communication == Approx(280));
  CHECK(d.job.power_idle == Approx(140));
  CHECK(d.job.node_power == Approx(0.5 * 4 * 700));
  CHECK(d.training.total_steps == 1000);
  // On 16,384 such devices in 2,048 nodes the defaults give Llama 3's 419 in 54 days.
  const double per_hour = 16384 / (d.job.device_mtbf / 3600) + 2048 / (d.job.node_mtbf / 3600);
  CHECK(per_hour * 54 * 24 == Approx(419));
  // Shares and watts; tokens become whole steps.
  const scenario::Scenario p = scenario::load_text(
      "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\nmodel: gpt3-13b\n"
      "training: {global_batch: 8, tokens: 1B}\nplan: {tp: 4}\n"
      "job: {power: {idle: 5%, communication: 300W}, failures: {device_mtbf: 1825d}}\n",
      "p.yaml");
  CHECK(p.job.power_idle == Approx(35));
  CHECK(p.job.power_communication == Approx(300));
  CHECK(p.training.total_steps == static_cast<int>(std::ceil(1e9 / (8.0 * 2048))));
  auto fails = [](const std::string& yaml, const std::string& what) {
    INFO(yaml);
    try {
      scenario::load_text(yaml, "bad.yaml");
      FAIL("loaded");
    } catch (const scenario::ScenarioError& e) {
      CHECK_THAT(e.what(), Catch::Contains(what));
    }
  };
  const std::string base = "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 4}\nmodel: gpt3-13b\nplan: {tp: 4}\n";
  fails(base + "training: {global_batch: 8, tokens: 1B, steps: 10}\n", "not both");
  fails(base + "training: {global_batch: 8}\njob: {checkpoint: {mode: lazy}}\n", "expected one of sync, async");
  fails(base + "training: {global_batch: 8}\njob: {checkpoint: {interval: 30min, steps: 10}}\n", "once");
  fails(base + "training: {global_batch: 8}\njob: {power: {idle: 900W}}\n", "at most the power while communicating");
  fails(base + "training: {global_batch: 8}\njob: {failures: {restart: 30}}\n", "needs a unit");
  fails(base + "training: {global_batch: 8}\njob: {fail: {}}\n", "unknown key 'fail'");
  fails("cluster: cpu-host\nmodel: lenet\ntraining: {global_batch: 8, tokens: 1M}\n", "training.steps");
}
