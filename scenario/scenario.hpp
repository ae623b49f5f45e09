// A scenario: the cluster, the model, the training setup, the parallel plan, an optional
// measured hardware profile and executor settings. It is what `load()` returns after
// parsing, merging presets / extends / overrides, applying defaults and checking every
// constraint; everything downstream may assume it is consistent.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scenario/model.hpp"
#include "scenario/reader.hpp"
#include "topology/cluster_spec.hpp"

namespace parasim::scenario {

using topology::Dtype;

// adamw8bit: AdamW whose two moments are kept in 8 bits, a byte per value plus an fp32
// maximum per block of 2048 (bitsandbytes' AdamW8bit, blockwise dynamic quantization).
enum class Optimizer { adamw, sgd, adamw8bit };

// Bytes of optimizer state per parameter: AdamW's two fp32 moments, SGD's fp32 momentum,
// the 8-bit moments with their blocks' maxima.
inline double optimizer_state_bytes(Optimizer o) {
  return o == Optimizer::adamw ? 8.0 : o == Optimizer::sgd ? 4.0 : 2.0 + 8.0 / 2048.0;
}
// Host memory traffic per parameter of the offloaded optimizer step (DeepSpeed's CPU
// Adam, one fused pass): it reads the fp32 master weight, the fp32 gradient and the state,
// and writes the master weight, the state and the `weight_bytes` weight copied back in.
inline double host_optimizer_bytes(Optimizer o, int weight_bytes) {
  return 4.0 + 4.0 + 4.0 + 2.0 * optimizer_state_bytes(o) + weight_bytes;
}
enum class Recompute { none, selective, full };
enum class Schedule { gpipe, one_f_one_b, interleaved_1f1b };
enum class Collective { automatic, ring, tree, hierarchical, nvls, direct };
// cp: context parallelism (each rank of a cp group holds a part of every sequence).
enum class Dim { tp, dp, pp, cp };
enum class Backend { cpu, cuda };
// How the attention core runs: FlashAttention (one fused kernel, no s x s tensors kept) or
// the unfused GEMMs, softmax and dropout. flash is the device's best fused kernel (cuDNN's,
// Transformer Engine's; FlashAttention-2 on Ampere); flash_v2 FlashAttention-2 itself (as
// PyTorch's scaled_dot_product_attention runs it), which on Hopper reaches about half of
// cuDNN's rate; flash_v1 the first generation (flash-attn 1.x and its Triton port), the same
// algorithm at about two thirds of FlashAttention-2's rate (KernelSpec).
enum class Attention { flash, flash_v2, flash_v1, naive };
// Whether the attention core is one fused kernel (either FlashAttention).
inline bool fused(Attention a) { return a != Attention::naive; }
// The training framework that runs the plan (training.framework): it decides kernels the
// plan does not name. What each changes, with its source, is in workload/kernels.hpp
// (gradient accumulation) and scenario/load.cpp (its defaults). nemo runs Megatron-Core's
// kernels with its recipes' overlaps on by default (scenario/load.cpp, nemo_defaults).
enum class Framework : std::uint8_t { megatron_core, megatron_lm, megatron_deepspeed, pytorch_fsdp, torchtitan, nemo };
// Megatron-Core's kernels and gradient handling: megatron-core, megatron-lm and nemo.
inline bool megatron_kernels(Framework f) {
  return f == Framework::megatron_core || f == Framework::megatron_lm || f == Framework::nemo;
}

std::string_view to_string(Optimizer o);
std::string_view to_string(Recompute r);
std::string_view to_string(Schedule s);
std::string_view to_string(Collective c);
std::string_view to_string(Dim d);
std::string_view to_string(Backend b);
std::string_view to_string(Attention a);
std::string_view to_string(Framework f);

enum class Fp8Recipe : std::uint8_t { delayed, current };
enum class LrDecay : std::uint8_t { constant, linear, cosine };
enum class LrScaling : std::uint8_t { none, linear, sqrt };
std::string_view to_string(Fp8Recipe r);

struct TrainingSpec {
  Framework framework = Framework::megatron_core;
  bool compile = false;  // torch.compile (training.compile): TorchTitan's element-wise chains fused
  int global_batch = 1;  // samples per optimizer step
  int micro_batch = 1;   // samples per micro-batch
  Dtype precision = Dtype::bf16;
  Optimizer optimizer = Optimizer::adamw;
  Recompute recompute = Recompute::none;
  Attention attention = Attention::flash;  // default: flash on GPUs, naive on CPU cores (what the executor runs)
  // The main gradients' type: weight gradients accumulate into them and the data-parallel
  // reduction sums them. Megatron's default: fp32 under bf16, the compute type otherwise.
  Dtype grad_dtype = Dtype::bf16;
  double learning_rate = 1e-3;  // AdamW's, when the executor trains the model
  // fp16's dynamic loss scaling on the executor: the initial scale, and the count of
  // overflow-free steps after which it doubles.
  double loss_scale = 65536.0;
  int loss_scale_window = 1000;
  // Switches that trade stability for memory or speed: no fp32 master weights under 16-bit
  // precision (the optimizer updates the 16-bit weights themselves, so an update under half
  // a 16-bit step is lost; 4 bytes per parameter less), and fp16 without loss scaling (its
  // small gradients underflow, its large ones overflow unnoticed).
  bool master_weights = true;
  bool loss_scaling = true;
  // fp8: Transformer Engine's scaling recipe. delayed: each tensor's scale from the amax
  // history of earlier steps, the amax taken inside the cast kernels; current: from the
  // tensor's own amax, one more pass over it before each cast.
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
  // The executor's optimizer step, as Megatron's: the global gradient norm (over every
  // shard, each value once) clipped to grad_clip (0: no clipping; Megatron's default is
  // 1.0), and the learning rate's schedule (learning_rate_at).
  double grad_clip = 0.0;
  int warmup_steps = 0;
  LrDecay lr_decay = LrDecay::constant;
  int decay_steps = 0;  // the optimizer step the decay ends at, warm-up included (0: none)
  double min_lr = 0.0;
  // A learning rate tuned for another global batch, scaled to this one: linear (Goyal et
  // al.) or square root (the rule for Adam), by global_batch / lr_reference_batch.
  LrScaling lr_scaling = LrScaling::none;
  int lr_reference_batch = 0;
  // A generic model's BatchNorm layers under data parallelism: statistics of the rank's own
  // micro-batch (PyTorch's BatchNorm under DDP: false), or synchronised over the dp
  // replicas (SyncBatchNorm: true). SyncBN gathers each layer's per-channel statistics in
  // forward (an all-gather of 2C + 1 fp32 values per rank) and sums its two per-channel
  // gradient sums in backward (an all-reduce of 2C), both on the dp group, blocking.
  bool sync_batch_norm = false;
  // The whole run's length (training.tokens or training.steps): optimizer steps to train.
  // 0: not stated (no run estimate). Tokens become steps of global_batch x seq_len tokens,
  // rounded up.
  int total_steps = 0;
  double tokens = 0.0;  // as stated; 0 when the run is given in steps
};

// The learning rate of optimizer step `k` (0-based, successful steps: a skipped fp16 step
// does not advance it): learning_rate scaled by lr_scaling, ramped linearly over
// warmup_steps ((k + 1) / warmup_steps of it), then decayed linearly or by a half cosine to
// min_lr at decay_steps, and min_lr after.
double learning_rate_at(const TrainingSpec& t, int k);

struct ParallelPlan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  // Context parallelism (Megatron-Core's --context-parallel-size, Transformer Engine's ring
  // attention): each sequence split over cp ranks in 2·cp chunks, rank i holding chunks i
  // and 2·cp-1-i (balanced causal work); the attention's keys and values travel the cp
  // ring block by block, each block's attention running while the next one arrives. The
  // cp ranks hold the same weights: gradients are summed over dp x cp.
  int cp = 1;
  // Expert parallelism (mixture of experts, Megatron-Core's --expert-model-parallel-size):
  // the experts of every layer split over ep ranks among the dp x cp ranks (consecutive
  // grad_index()es), each token sent to its experts' ranks and back by an all-to-all over
  // them. Each expert's gradients are summed over the ranks holding it: dp x cp / ep (the
  // expert data-parallel group). Experts run with the dense layers' tp.
  int ep = 1;
  int virtual_stages = 1;
  Schedule schedule = Schedule::one_f_one_b;
  bool sequence_parallel = false;
  // Megatron's scatter-gather of pipeline transfers: with tp > 1 (and no sequence
  // parallelism, which already shards them) each tp rank sends 1/tp of the activation and
  // the receivers all-gather it over tp.
  bool pp_scatter_gather = true;
  // Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers; needs sequence
  // parallelism): each layer half's all-gather runs as a ring exchange of sequence blocks,
  // each block's GEMM running while the next block travels, and its reduce-scatter as a
  // ring of partial sums, each block's GEMM running while the previous block's sum travels.
  bool tp_comm_overlap = false;
  int zero = 0;
  // Hybrid sharding (FSDP's HYBRID_SHARD, Megatron's partial distributed optimizer): the
  // ZeRO stage shards over groups of this many consecutive dp ranks, each group a replica
  // of the others, whose shards are summed across the groups. 0: all dp ranks, one group.
  int shard_group = 0;
  double bucket_bytes = 25.0 * 1024 * 1024;
  bool overlap_dp = true;
  // Megatron's --overlap-param-gather (with the distributed optimizer, zero 1): the
  // updated parameters' all-gathers run under the next step's forward, each layer waiting
  // for its bucket, instead of after the optimizer.
  bool overlap_param_gather = false;
  // Offloading to host memory (DeepSpeed's ZeRO-Offload and ZeRO-Infinity, Megatron-Core's
  // --optimizer-cpu-offload). offload_optimizer: the fp32 master weights, the optimizer
  // state and an fp32 copy of the main gradients live in host memory; each unit's
  // gradients leave the device after every micro-batch's backward of it (after their
  // reduce-scatter under ZeRO-2/3), the optimizer step runs on the host's cores (CPU Adam,
  // bound by host memory bandwidth), and the updated 16-bit parameters are copied back.
  // offload_params (with offload_optimizer): the 16-bit parameters too stay in host memory,
  // each unit copied to the device before each pass over it, one unit ahead (under ZeRO-3
  // each rank copies its shard, then the unit is all-gathered).
  bool offload_optimizer = false;
  bool offload_params = false;
  // offload_activations (Megatron-Core / Transformer Engine's --cpu-offloading): each layer's
  // stored activations are copied to host memory after its forward and back before its
  // backward, one layer ahead; the device holds about two layers' at a time.
  bool offload_activations = false;
  [[nodiscard]] bool offloads() const { return offload_optimizer || offload_activations; }
  Collective collective = Collective::automatic;
  std::array<Dim, 4> placement{Dim::tp, Dim::cp, Dim::dp, Dim::pp};  // innermost first (Megatron's order)

  [[nodiscard]] int world() const { return dp * tp * pp * cp; }
  // The ranks holding the same weights, over which gradients are summed: dp x cp.
  [[nodiscard]] int grad_ranks() const { return dp * cp; }
  // The ranks holding the same experts, over which their gradients are summed.
  [[nodiscard]] int expert_grad_ranks() const { return grad_ranks() / ep; }
  // The ranks ZeRO shards over, and whether they are fewer than dp x cp (hybrid sharding).
  [[nodiscard]] int shard_size() const { return shard_group > 0 && zero >= 1 ? shard_group : grad_ranks(); }
  [[nodiscard]] bool hybrid_shard() const { return shard_size() < grad_ranks(); }
  // ZeRO-1's parameter all-gathers open the next step (overlap_param_gather with dp > 1).
  // Each unit's gradients leave the device after every backward of it: reduce-scattered
  // (ZeRO-2/3 with several gradient ranks) or copied to host memory (offload_optimizer).
  [[nodiscard]] bool unit_grads() const { return (zero >= 2 && grad_ranks() > 1) || offload_optimizer; }
  // Each unit's parameters arrive before each pass over it: gathered (ZeRO-3) or copied in.
  [[nodiscard]] bool unit_params() const { return (zero == 3 && grad_ranks() > 1) || offload_params; }
  [[nodiscard]] bool defers_param_gather() const { return overlap_param_gather && zero == 1 && grad_ranks() > 1; }
};

// Whether training.framework overlaps the distributed optimizer's parameter all-gather where
// the plan does not say: NeMo's recipes do (optim: distributed_fused_adam with
// overlap_param_sync: true), with plan.zero 1 and no expert parallelism (not modelled with
// it: check).
inline bool default_param_gather_overlap(Framework f, const ParallelPlan& p) {
  return f == Framework::nemo && p.zero == 1 && p.ep == 1;
}

struct HardwareSpec {
  std::string profile;  // path of a measured device profile; empty = datasheet defaults
};

// A fault injected into a run, for experiments: at step `step` (from 1, as `run` counts
// them, warm-up steps included; 0: every step) rank `rank` scales its
// gradients by `factor`, zeroes them, makes them NaN or random (normal, of the gradients'
// own RMS times `factor`) before their data-parallel reduction, or computes `factor` times
// slower (a straggler: each compute op followed by a wait of factor - 1 times its time).
enum class InjectKind : std::uint8_t { scale, zero, nan, random, delay };
struct Injection {
  int step = 0;  // 0: every step
  int rank = 0;
  InjectKind kind = InjectKind::scale;
  double factor = 1.0;
};

// What a run does when the training diverges (a non-finite loss or gradient norm, or a loss
// over divergence_factor times the median of the last 10 steps'): warn, stop (exit status
// 5), or nothing.
enum class OnDivergence : std::uint8_t { warn, stop, ignore };

struct RunSpec {
  Backend backend = Backend::cpu;
  int steps = 10;
  int warmup = 2;
  std::uint64_t seed = 1234;
  OnDivergence on_divergence = OnDivergence::warn;
  double divergence_factor = 3.0;
  std::vector<Injection> inject;
};

// The training job beyond one step (job:): its failures, checkpoints, power and price, for
// the run estimate (report/run_model.hpp). Every default and its source is in
// docs/scenario-format.md ("job").
enum class CheckpointMode : std::uint8_t { sync, async };
std::string_view to_string(CheckpointMode m);

struct JobSpec {
  // Interruptions: each device (a GPU with its memory and NVLink) and each node (its host,
  // NICs, cables, switches and the software) fails after an exponentially distributed time
  // with these means; any failure stops the whole job. Defaults: Llama 3 405B's 419
  // unexpected interruptions in 54 days on 16,384 H100s in 2,048 nodes, 58.7 % of them GPU
  // issues (Llama 3 report, section 3.3.4).
  double device_mtbf = 16384.0 * 54.0 * 86400.0 / (0.587 * 419.0);
  double node_mtbf = 2048.0 * 54.0 * 86400.0 / (0.413 * 419.0);
  // After a failure: detecting it, re-launching, rebuilding the communicators and the first
  // steps' warm-up; loading the checkpoint is added from its size.
  double restart = 600.0;
  // Checkpoints: every checkpoint_interval seconds of training (0: the Young / Daly optimum)
  // or every checkpoint_steps steps; sync stops training while the state is written, async
  // while it is copied to host memory, the write running under training.
  double checkpoint_interval = 0.0;
  int checkpoint_steps = 0;
  CheckpointMode checkpoint_mode = CheckpointMode::sync;
  bool save_optimizer = true;  // the optimizer state (fp32 master weights and moments) too
  bool sharded = true;         // every rank writes its share (Megatron-Core's, PyTorch DCP)
  double storage_bandwidth = 2e12;   // aggregate, bytes/s (write and read)
  double node_storage_bandwidth = 0.0;  // per node, bytes/s; 0: only the aggregate limits
  // Power, watts per device: computing, communicating only, idle; the node's other parts
  // (CPUs, memory, NICs, fans) at full load; the facility's power usage effectiveness.
  double power_busy = 0.0;  // 0: unknown (a device without a stated TDP): no energy figures
  double power_communication = 0.0;
  double power_idle = 0.0;
  double node_power = 0.0;
  double pue = 1.1;
  double price = 0.0;  // per device-hour; 0: not priced

  [[nodiscard]] bool has_power() const { return power_busy > 0.0; }
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file it was loaded from
  topology::ClusterSpec cluster;
  ModelSpec model;
  TrainingSpec training;
  ParallelPlan plan;
  HardwareSpec hardware;
  RunSpec run;
  JobSpec job;
  // Where each key was set: fixed once loaded, so the planner's many copies of a scenario
  // share it.
  std::shared_ptr<const LocationMap> locations;

  // Micro-batches each pipeline processes per step: global_batch / (dp * micro_batch).
  [[nodiscard]] int micro_batches() const { return training.global_batch / (plan.dp * training.micro_batch); }
  // SyncBN exchanges statistics: training.batch_norm sync, dp > 1, and BatchNorm layers.
  [[nodiscard]] bool syncs_batch_norm() const {
    if (!training.sync_batch_norm || plan.dp == 1) return false;
    for (const GenericLayer& l : model.generic_layers) {
      if (l.batch_norm.layers > 0) return true;
    }
    return false;
  }
};

}  // namespace parasim::scenario
