// Predictions against measured training runs: reads a CSV of measured step times, builds
// the scenario of each row, predicts its step and summarises the errors.
//
// The CSV has vTrain's columns (tests/data/fidelity/vtrain-single-node.csv):
//   # GPUs, global batch, micro batch, hidden size, attention heads, # layers,
//   sequence length, tensor parallelism, data parallelism, pipeline parallelism,
//   iteration time (ms)
// and optionally
//   cluster      a cluster preset (default dgx-a100); gpus per node default to the
//                preset's (or # GPUs when fewer), nodes to # GPUs over that
//   precision    fp32 | tf32 | bf16 | fp16 (default fp16)
//   recompute    none | selective | full (default full)
//   attention    flash | naive (default naive)
//   schedule, virtual stages, sequence parallel, vocabulary (default 50,257),
//   kv heads, ffn hidden, mlp
//   any dotted scenario key (plan.zero, training.grad_dtype, cluster.inter_node.nic_bandwidth, ...)
// The defaults are vTrain's setup (Megatron-DeepSpeed: fp16, full recompute, the unfused
// attention, 1F1B, gradient all-reduce after the backward pass). The vocabulary is padded
// as Megatron pads it, to a multiple of 128 x tp.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace parasim::sim {

struct MeasuredRun {
  int line = 0;                  // in the CSV, for messages
  int gpus = 0;
  double measured = 0.0;         // seconds per step
  // A run published as FLOP/s per GPU alone (no time, no tokens/s): its step time is the
  // model's FLOPs per step (report::model_flops_per_step) over this rate times the GPUs,
  // set when it is predicted.
  double measured_flops_rate = 0.0;
  // The peak device memory the run logged, in bytes (0: none): TorchTitan's "memory: X GiB",
  // its caching allocator's peak reserved bytes (torchtitan/metrics.py at 9dec370,
  // reserved_bytes.all.peak), so without the CUDA context and NCCL's buffers.
  double measured_memory = 0.0;
  std::map<std::string, int> dims;  // tp, pp, dp, micro batch, hidden, layers, ... for grouping
  std::map<std::string, std::string> labels;  // framework, gpu, model (public files), for grouping
  std::string yaml;              // the scenario
  std::vector<std::string> overrides;
};

// Throws scenario::ScenarioError naming the file, line and column on a malformed CSV.
std::vector<MeasuredRun> read_measured_runs(const std::string& path);

// Published runs in the public files' columns (tests/data/fidelity/public/README.md: source,
// gpu_type, total_gpus, gpus_per_node, interconnect, model, layers, hidden, heads, kv_heads,
// ffn_hidden, mlp, vocab, seq_len, global_batch_seqs, micro_batch, precision, recompute,
// flash_attn, tp, pp, vpp, dp, cp, ep, sp, zero_fsdp, measured, notes), read as they are:
// each field's leading value, "unknown" as the framework's default. The framework comes
// from the source and notes (framework_of_row); the cluster from the GPU (A100: DGX A100,
// H100: DGX H100) with the NICs the interconnect names; the measured step from an
// iteration time, else tokens/s per GPU, else TFLOP/s per GPU (measured_flops_rate).
std::vector<MeasuredRun> read_public_runs(const std::string& path);
// megatron-lm, megatron-core, megatron-deepspeed, pytorch-fsdp or torchtitan.
std::string framework_of_row(const std::string& source, const std::string& model, const std::string& notes,
                             const std::string& sharding);

struct FidelityRow {
  const MeasuredRun* run = nullptr;
  double predicted = 0.0;  // seconds; 0 when the prediction failed
  std::string error;       // why it failed
  // Seconds from the run's FLOP/s (MeasuredRun::measured_flops_rate); 0: the run's time.
  double measured_from_rate = 0.0;
  [[nodiscard]] double measured() const { return measured_from_rate > 0.0 ? measured_from_rate : run->measured; }
  [[nodiscard]] double relative_error() const { return (predicted - measured()) / measured(); }
  // The allocator's predicted peak reserved bytes (workload::MemoryBreakdown::reserved()),
  // compared where the run logged its own (MeasuredRun::measured_memory).
  double predicted_memory = 0.0;
  [[nodiscard]] bool has_memory() const { return error.empty() && run->measured_memory > 0.0; }
  [[nodiscard]] double memory_error() const { return (predicted_memory - run->measured_memory) / run->measured_memory; }
};

// Predicts every run on `threads` threads; the rows come back in input order.
std::vector<FidelityRow> predict_runs(const std::vector<MeasuredRun>& runs, int threads);

struct ErrorStats {
  int n = 0;
  double mean_abs = 0.0;  // MAE of the relative error
  double mean = 0.0;      // signed: negative means predicted too fast
  double median_abs = 0.0;
  double p90_abs = 0.0;
  double max_abs = 0.0;
};
ErrorStats error_stats(const std::vector<double>& relative_errors);

// The report: overall, then by framework, GPU and model where the rows name them, then by
// tp, pp, dp, micro batch, hidden size, layers and GPUs.
std::string fidelity_report(const std::vector<FidelityRow>& rows);
// Predicted against measured on log axes, with the y = x line and +-10 % band.
std::string fidelity_svg(const std::vector<FidelityRow>& rows, const std::string& title);

// Where the error lives: per layer or per micro-batch. Rows that differ only in their layer
// count are one sweep; its step times per micro-batch, t / (m + pp - 1) with m micro-batches
// a replica (a pipeline's step is about m + pp - 1 stage passes), are fitted against the
// layers per stage by least squares, measured and predicted alike. The slope is a layer's
// cost per micro-batch (forward, recompute and backward, with its share of the per-step
// optimizer and gradient reduction spread over the m micro-batches), the intercept what a
// micro-batch costs besides its layers (embedding, LM head, loss). Sweeps of fewer than two
// layer counts are left out.
struct LayerSweep {
  std::map<std::string, int> dims;  // the rows' dims, layers excepted
  int points = 0;                   // rows fitted
  double measured_slope = 0.0, predicted_slope = 0.0;          // seconds per layer
  double measured_intercept = 0.0, predicted_intercept = 0.0;  // seconds per micro-batch
};
std::vector<LayerSweep> layer_sweeps(const std::vector<FidelityRow>& rows);
// The sweeps' medians by hidden size, tp and micro-batch: slope and intercept, measured
// against predicted.
std::string layer_sweep_report(const std::vector<LayerSweep>& sweeps);

// All-reduce bus bandwidth on n GPUs of one node of `cluster` (a preset) as the simulator
// runs it alone (NCCL's choice of algorithm and protocol), against the measured times in
// `dir`/AR_GPU<n>_a100 (nccl-tests' busbw), at 1, 16, 64, 256 MiB and 1 GiB.
std::string allreduce_report(const std::string& dir, const std::string& cluster);

}  // namespace parasim::sim
