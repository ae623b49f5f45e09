// The prediction against public measurements of real training runs: a fixed subset of the
// vTrain file (every 6th of its 1,440 rows: Megatron-DeepSpeed GPT training on 2 to 8 A100s
// of one DGX node) predicted with the built-in A100 profile, Megatron-LM's weak-scaling runs
// on up to 2,520 A100s and NeMo's FP8 runs on up to 512 H100s. The bounds fail CI when a
// change makes the out-of-the-box prediction worse; docs/validation.md has the full file's
// figures (bench/fidelity).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "workload/kernels.hpp"
#include "sim/fidelity.hpp"

using namespace parasim;

namespace {

const std::vector<sim::FidelityRow>& subset_rows() {
  static const std::vector<sim::MeasuredRun> runs = [] {
    const auto all = sim::read_measured_runs(std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/vtrain-single-node.csv");
    std::vector<sim::MeasuredRun> every;
    for (std::size_t i = 0; i < all.size(); i += 6) every.push_back(all[i]);
    return every;
  }();
  static const std::vector<sim::FidelityRow> rows = sim::predict_runs(runs, 2);
  return rows;
}

// Predicts `runs`: every row predicted, none off by more than `worst`, and their mean
// absolute error at most `mae`.
void check_predicted(const std::vector<sim::MeasuredRun>& runs, double worst, double mae) {
  const std::vector<sim::FidelityRow> rows = sim::predict_runs(runs, 2);
  std::vector<double> errors;
  for (const auto& r : rows) {
    INFO(fmt::format("line {}: {}", r.run->line, r.error));
    REQUIRE(r.error.empty());
    errors.push_back(r.relative_error());
    CHECK(std::abs(r.relative_error()) <= worst);
  }
  INFO(sim::fidelity_report(rows));
  CHECK(sim::error_stats(errors).mean_abs <= mae);
}

}  // namespace

TEST_CASE("the vTrain measurements are read with Megatron's setup", "[sim][fidelity]") {
  const auto runs = sim::read_measured_runs(std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/vtrain-single-node.csv");
  REQUIRE(runs.size() == 1440);
  const sim::MeasuredRun& r = runs.front();  // 2,16,8,1024,16,24,1024,1,1,2,372.160408
  CHECK(r.gpus == 2);
  CHECK(r.measured == Approx(0.372160408));
  CHECK(r.dims.at("pp") == 2);
  CHECK(r.yaml.find("vocab: 50304") != std::string::npos);  // 50,257 padded to 128 x tp
  CHECK(r.yaml.find("recompute: full") != std::string::npos);
}

TEST_CASE("a subset of the vTrain file predicted within the fidelity bounds", "[sim][fidelity]") {
  const auto& rows = subset_rows();
  std::vector<double> errors;
  for (const auto& r : rows) {
    INFO(fmt::format("line {}: {}", r.run->line, r.error));
    REQUIRE(r.error.empty());
    errors.push_back(r.relative_error());
  }
  const sim::ErrorStats all = sim::error_stats(errors);
  INFO(sim::fidelity_report(rows));
  CHECK(all.n == 240);
  // The targets for the whole file: MAE 8 % and no tp, micro-batch or hidden-size group
  // off by more than 12 % on average (this subset: 7.4 %, the worst group tp 8 at -10.5 %).
  CHECK(all.mean_abs <= 0.08);
  CHECK(all.max_abs <= 0.30);
  for (const char* dim : {"tp", "micro batch", "hidden"}) {
    std::map<int, std::vector<double>> groups;
    for (const auto& r : rows) groups[r.run->dims.at(dim)].push_back(r.relative_error());
    for (const auto& [value, e] : groups) {
      INFO(fmt::format("{} {}", dim, value));
      CHECK(std::abs(sim::error_stats(e).mean) <= 0.12);
    }
  }
}

TEST_CASE("a sweep over layer counts splits the step into a layer's cost and a micro-batch's", "[sim][fidelity]") {
  // Two stages, 8 micro-batches a replica: 9 stage passes a step. Each layer costs 4 ms a
  // micro-batch measured (5 predicted), each micro-batch 3 ms besides (2 predicted).
  const auto run = [](int layers, int hidden) {
    sim::MeasuredRun r;
    r.dims = {{"gpus", 2},  {"global batch", 16}, {"micro batch", 2}, {"hidden", hidden}, {"heads", 16},
              {"seq", 1024}, {"tp", 1},            {"dp", 1},          {"pp", 2},           {"layers", layers}};
    r.measured = 9 * (3e-3 + 4e-3 * layers / 2);
    r.yaml = "cluster: {preset: dgx-a100, nodes: 1, gpus_per_node: 2}\n";
    return r;
  };
  const std::vector<sim::MeasuredRun> runs{run(12, 1024), run(16, 1024), run(24, 1024), run(12, 2048)};
  std::vector<sim::FidelityRow> rows;
  for (const auto& r : runs) rows.push_back({&r, 9 * (2e-3 + 5e-3 * r.dims.at("layers") / 2), ""});
  const auto sweeps = sim::layer_sweeps(rows);
  REQUIRE(sweeps.size() == 1);  // hidden 2,048 has one layer count: no sweep
  const sim::LayerSweep& s = sweeps.front();
  CHECK(s.points == 3);
  CHECK(s.dims.count("layers") == 0);
  CHECK(s.measured_slope == Approx(4e-3));
  CHECK(s.predicted_slope == Approx(5e-3));
  CHECK(s.measured_intercept == Approx(3e-3));
  CHECK(s.predicted_intercept == Approx(2e-3));
  const std::string report = sim::layer_sweep_report(sweeps);
  INFO(report);
  CHECK(report.find("4.00 ms  5.00   +25 %") != std::string::npos);
  CHECK(report.find("3.0 ms   2.0    -33 %") != std::string::npos);
}

TEST_CASE("a malformed measurement file is refused at its line and column", "[sim][fidelity]") {
  const std::string path = "/tmp/parasim-fidelity-bad.csv";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
               "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
               "2,16,8,1024,16,24,1024,1,1,2,372.1\n2,16,x,1024,16,24,1024,1,1,2,372.1\n",
               f);
    std::fclose(f);
  }
  try {
    sim::read_measured_runs(path);
    FAIL("accepted a malformed row");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find(":3:") != std::string::npos);
    CHECK(std::string(e.what()).find("micro batch") != std::string::npos);
  }
}

TEST_CASE("Megatron-LM's weak-scaling runs from 1.7B on 32 A100s to 530B on 2520 predicted within the bounds",
          "[sim][fidelity]") {
  // Measured step times that no constant of the model was taken from: Narayanan et al.,
  // SC '21, Table 1 (tests/data/fidelity/README.md). The trillion-parameter row (12 s to
  // simulate) is left to bench/fidelity, whose figures docs/validation.md records.
  std::vector<sim::MeasuredRun> runs =
      sim::read_measured_runs(std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/megatron-weak-scaling.csv");
  REQUIRE(runs.size() == 10);
  CHECK(runs.back().gpus == 3072);
  // The table states no micro-batch: the file takes the smallest at which Megatron's fused
  // softmax kernel takes the shape (2 where 1 would leave 6 or 10 heads a rank).
  for (const auto& r : runs) {
    INFO(fmt::format("line {}", r.line));
    const long long heads_per_rank = r.dims.at("heads") / r.dims.at("tp");
    CHECK(workload::fused_softmax_available(2, r.dims.at("seq"), r.dims.at("micro batch") * heads_per_rank));
    CHECK((r.dims.at("micro batch") == 1 || !workload::fused_softmax_available(2, r.dims.at("seq"), heads_per_rank)));
  }
  runs.pop_back();
  check_predicted(runs, 0.15, 0.08);
}

TEST_CASE("NeMo's published FP8 runs on DGX H100 from 8 to 512 GPUs predicted within the bounds", "[sim][fidelity]") {
  // Measured throughputs of NVIDIA's NeMo performance recipes (tests/data/fidelity/README.md):
  // H100 and FP8, sequence and context parallelism, interleaved pipelines, tp overlap and
  // the distributed optimizer, none of which the A100 files exercise. No constant of the
  // model was taken from them.
  const std::vector<sim::MeasuredRun> runs =
      sim::read_measured_runs(std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/nemo-h100-fp8.csv");
  REQUIRE(runs.size() == 11);
  // The first row, GPT-3 5B on 64 GPUs: 2,048 x 2,048 tokens at 22,521 tokens/s per GPU.
  CHECK(runs.front().measured == Approx(2048.0 * 2048.0 / (22521.0 * 64.0)).epsilon(1e-4));
  CHECK(runs.front().yaml.find("nodes: 8") != std::string::npos);
  check_predicted(runs, 0.25, 0.12);
}
