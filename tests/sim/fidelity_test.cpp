// The prediction against public measurements of real training runs: a fixed subset of the
// vTrain file (every 6th of its 1,440 rows: Megatron-DeepSpeed GPT training on 2 to 8 A100s
// of one DGX node) predicted with the built-in A100 profile, Megatron-LM's weak-scaling runs
// on up to 2,520 A100s and NeMo's FP8 runs on up to 512 H100s. The bounds fail CI when a
// change makes the out-of-the-box prediction worse; docs/validation.md has the full file's
// figures (bench/fidelity).
#include <catch2/catch.hpp>

#include <algorithm>
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

namespace {

std::string public_file(const char* name) {
  return std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/public/" + name + ".csv";
}

}  // namespace

TEST_CASE("published runs are read from their sources' own words", "[sim][fidelity][public]") {
  // BLOOM-176B's production row: 384 A100s as 48 DGX A100 nodes with 4 Omni-Path links of
  // 100 Gb/s, tp 4 x pp 12 x dp 8, micro-batch 2 of 2,048, full recompute, the unfused
  // attention (Megatron-DeepSpeed), ZeRO-1; the step as printed ("elapsed time per
  // iteration 105.22 s"); the vocabulary 250,680 padded to 128 x tp.
  const auto bloom = sim::read_public_runs(public_file("bloom-megatron-deepspeed"));
  REQUIRE(bloom.size() == 53);
  const sim::MeasuredRun& b = bloom.front();
  CHECK(b.gpus == 384);
  CHECK(b.measured == Approx(105.22));
  CHECK(b.labels.at("framework") == "megatron-deepspeed");
  CHECK(b.dims.at("tp") == 4);
  CHECK(b.dims.at("pp") == 12);
  CHECK(b.dims.at("dp") == 8);
  CHECK(b.yaml.find("nodes: 48, gpus_per_node: 8, device: a100-80gb") != std::string::npos);
  CHECK(b.yaml.find("vocab: 250880") != std::string::npos);
  CHECK(b.yaml.find("recompute: full, attention: naive") != std::string::npos);
  CHECK(b.yaml.find("zero: 1") != std::string::npos);
  CHECK(std::find(b.overrides.begin(), b.overrides.end(), "cluster.inter_node.nics_per_node=4") != b.overrides.end());
  CHECK(std::find(b.overrides.begin(), b.overrides.end(), "cluster.inter_node.nic_bandwidth=100Gb/s") != b.overrides.end());

  // llm-foundry's first row: 410 tokens/s per GPU on 64 GPUs, 2,048 x 2,048 tokens a step;
  // FSDP FULL_SHARD as ZeRO-3; 1600 Gbps a node as 8 NICs of 200 Gb/s.
  const auto mpt = sim::read_public_runs(public_file("llm-foundry-fsdp"));
  REQUIRE(mpt.size() == 139);
  CHECK(mpt.front().measured == Approx(2048.0 * 2048.0 / (410.0 * 64.0)));
  CHECK(mpt.front().labels.at("framework") == "pytorch-fsdp");
  CHECK(mpt.front().yaml.find("zero: 3") != std::string::npos);
  CHECK(std::find(mpt.front().overrides.begin(), mpt.front().overrides.end(), "cluster.inter_node.nic_bandwidth=200Gb/s") !=
        mpt.front().overrides.end());

  // MegaScale: the MLP width only as the note assumes it ("4h=49152 assumed"); vpp 6 as
  // the interleaved schedule; sequence parallelism, unstated, on (Megatron-LM with tp 8).
  const auto mega = sim::read_public_runs(public_file("megascale-megatron-lm"));
  REQUIRE(mega.size() == 4);
  CHECK(mega.front().measured == Approx(40.0));
  CHECK(mega.front().labels.at("framework") == "megatron-lm");
  CHECK(mega.front().yaml.find("ffn_hidden: 49152") != std::string::npos);
  CHECK(mega.front().yaml.find("schedule: interleaved-1f1b, virtual_stages: 6") != std::string::npos);
  CHECK(mega.front().yaml.find("sequence_parallel: true") != std::string::npos);

  // Nemotron-4: squared ReLU ("neither SwiGLU nor GeLU") runs as a GeLU MLP of its width,
  // the width the note assumes ("24576 = 4h in NeMo config").
  const auto nemotron = sim::read_public_runs(public_file("nemotron-megatron-core"));
  REQUIRE(nemotron.size() == 1);
  CHECK(nemotron.front().yaml.find("ffn_hidden: 24576, vocab: 256000, seq_len: 4096, mlp: gelu") != std::string::npos);
  CHECK(nemotron.front().measured == Approx(0.57));
  // A Nemotron model runs under NeMo (its published recipes are NeMo's): the framework's
  // defaults give it the distributed optimizer's overlaps and tp overlap.
  CHECK(nemotron.front().yaml.find("framework: nemo,") != std::string::npos);
  CHECK(sim::framework_of_row("NeMo Framework performance summary", "Llama 3 70B", "", "") == "nemo");
  CHECK(sim::framework_of_row("Megatron-LM README", "GPT-3 175B", "", "distributed optimizer") == "megatron-core");

  // Mixtral: 8 experts, top 2; published as TFLOP/s per GPU alone.
  const auto moe = sim::read_public_runs(public_file("moe-megatron-core"));
  REQUIRE(moe.size() == 1);
  CHECK(moe.front().measured_flops_rate == Approx(468e12));
  CHECK(moe.front().yaml.find("experts: 8, top_k: 2") != std::string::npos);

  // TorchTitan: FP8 linears as fp8, FSDP2 sharding over 4 of 4 ranks as plain ZeRO-3, and
  // "tokens/sec" (its per-GPU figure) where no TPS/GPU is printed.
  const auto titan = sim::read_public_runs(public_file("torchtitan"));
  REQUIRE(titan.size() == 13);
  CHECK(titan[2].yaml.find("precision: fp8") != std::string::npos);
  CHECK(titan[2].measured == Approx(16.0 * 8192 / (8532.0 * 8)));
  CHECK(titan[10].measured == Approx(96.0 * 8192 / (4378.0 * 64)));
  CHECK(titan[4].yaml.find("cp: 2") != std::string::npos);
  // Eager in the first row ("FSDP"), compiled in the second ("FSDP + torch.compile"); every
  // row on H100s capped at 500 W ("500W power limit" in gpu_type).
  CHECK(titan[0].yaml.find("compile: true") == std::string::npos);
  CHECK(titan[1].yaml.find("compile: true") != std::string::npos);
  CHECK(std::find(titan[0].overrides.begin(), titan[0].overrides.end(), "cluster.device.power_limit=500W") !=
        titan[0].overrides.end());
  // The memory TorchTitan logged (its allocator's peak reserved), where a row has it.
  CHECK(titan[0].measured_memory == Approx(82.4 * 1024 * 1024 * 1024));
  CHECK(titan[10].measured_memory == 0.0);
  // TorchTitan's SDPA ran FlashAttention-2 (its flash backend); llm-foundry's tables
  // FlashAttention-1 (MPT's Triton port, the default attn_impl then).
  CHECK(titan[0].yaml.find("attention: flash-v2") != std::string::npos);
  CHECK(mpt.front().yaml.find("attention: flash-v1") != std::string::npos);
}

TEST_CASE("published runs beyond Megatron-LM predicted within today's bounds", "[sim][fidelity][public]") {
  // Every file of the public development half (every 4th BLOOM row, for time): each row
  // predicted, and each file's mean absolute error no worse than measured now (2026-11-27,
  // with training.framework, the collectives' hold on the SMs, FlashAttention-1 under
  // llm-foundry, TorchTitan's op-level recompute and eager element-wise ops, the power
  // cap and FlashAttention-2 under PyTorch's SDPA; 2026-11-28: NeMo's overlaps under
  // training.framework nemo, the SMs of concurrent collectives added up and Transformer
  // Engine's userbuffers holding their own, Megatron-LM's gradient reduction after the
  // backward without --overlap-grad-reduce; docs/validation.md), a point or three above it. These are regression bounds while the framework-specific
  // mechanisms are built, not the targets (10 % MAE, mean within 5 %).
  struct File {
    const char* name;
    int every;
    double mae;
  };
  for (const File f : {File{"bloom-megatron-deepspeed", 4, 0.21}, File{"llm-foundry-fsdp", 1, 0.075},
                       File{"megascale-megatron-lm", 1, 0.16}, File{"nemotron-megatron-core", 1, 0.24},
                       File{"moe-megatron-core", 1, 0.06}, File{"torchtitan", 1, 0.21}}) {
    INFO(f.name);
    const auto all = sim::read_public_runs(public_file(f.name));
    std::vector<sim::MeasuredRun> runs;
    for (std::size_t i = 0; i < all.size(); i += static_cast<std::size_t>(f.every)) runs.push_back(all[i]);
    check_predicted(runs, 1.0, f.mae);
  }
}

TEST_CASE("TorchTitan's logged peak memory predicted within 8 %", "[sim][fidelity][public][memory]") {
  // The ten rows that log "memory: X GiB" (the caching allocator's peak reserved bytes,
  // torchtitan/metrics.py): predicted as the tensors' peak (op-level checkpointing's saved
  // set, the loss's fp32 copies of the logits, FSDP's sharded state). Measured 2026-11-27:
  // MAE 4.8 %, mean -4.6 %, every row within 8.4 % (docs/validation.md); Megatron's selective
  // set and logits in their place gave 28.5 %.
  const auto runs = sim::read_public_runs(public_file("torchtitan"));
  const auto rows = sim::predict_runs(runs, 2);
  std::vector<double> errors;
  for (const sim::FidelityRow& r : rows) {
    if (!r.has_memory()) continue;
    INFO("line " << r.run->line);
    CHECK(std::abs(r.memory_error()) < 0.09);
    errors.push_back(r.memory_error());
  }
  REQUIRE(errors.size() == 10);
  CHECK(sim::error_stats(errors).mean_abs < 0.06);
}
