#include "workload/memory.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "workload/accounting.hpp"
#include "workload/buckets.hpp"
#include "workload/schedule.hpp"
#include "topology/units.hpp"

namespace parasim::workload {

const MemoryBreakdown& MemoryReport::peak() const& {
  return *std::max_element(stages.begin(), stages.end(),
                           [](const MemoryBreakdown& a, const MemoryBreakdown& b) { return a.total() < b.total(); });
}

const MemoryBreakdown& MemoryReport::host_peak() const& {
  return *std::max_element(stages.begin(), stages.end(),
                           [](const MemoryBreakdown& a, const MemoryBreakdown& b) { return a.host < b.host; });
}

namespace {

// What one layer's backward holds besides the stored activations, at the step's peak (the
// start of a backward): the gradient coming in and the one going out (T·h each, T/tp under
// sequence parallelism), and the MLP's two intermediate gradients (T·f/tp each: the down
// projection's input gradient, then the activation function's); under full recompute also
// the layer's activations, recomputed for its backward. A generic model: twice its
// largest layer's activations.
double backward_transient(const scenario::Scenario& s, const scenario::ModelSpec& m) {
  const scenario::TrainingSpec& t = s.training;
  const scenario::ParallelPlan& p = s.plan;
  const int e = topology::dtype_bytes(topology::storage_dtype(t.precision));
  const int linear = t.precision == scenario::Dtype::fp8 ? 1 : 0;
  if (m.kind != scenario::ModelKind::transformer) {
    double largest = 0.0;
    for (const scenario::GenericLayer& g : m.generic_layers) largest = std::max(largest, g.activations);
    return 2.0 * largest * t.micro_batch * e;
  }
  const double tokens = static_cast<double>(t.micro_batch) * m.seq_len / p.cp;  // this rank's positions
  const bool sp = p.sequence_parallel && p.tp > 1;
  double bytes = 2.0 * tokens / (sp ? p.tp : 1) * m.hidden * e;
  if (m.moe()) {
    // The routed copies' gradients: the expert output's and input's (T·top_k·load·h each)
    // and the two intermediate ones.
    const double routed = tokens * m.top_k * m.expert_load();
    bytes += 2.0 * routed * m.hidden * e + 2.0 * routed * m.expert_ffn_hidden / p.tp * e;
    bytes += 2.0 * tokens * m.shared_expert_ffn_hidden / p.tp * e;  // the shared experts' (none: 0)
  } else {
    bytes += 2.0 * tokens * m.ffn_hidden / p.tp * e;
  }
  if (t.recompute == scenario::Recompute::full) {
    bytes += layer_activation_bytes(m, t.micro_batch, p.tp, p.sequence_parallel, scenario::Recompute::none, e,
                                    scenario::fused(t.attention), linear) /
             p.cp;
  }
  // Ring attention's backward: the keys and values with their gradients, one block
  // travelling out and one coming in.
  if (p.cp > 1) bytes += 2.0 * 2.0 * cp_kv_block_bytes(s);
  return bytes;
}

// The larger of a mixture of experts' layers' and its dense first layers'.
double backward_transient(const scenario::Scenario& s) {
  const double moe = backward_transient(s, s.model);
  return s.model.moe() && s.model.dense_layers > 0 ? std::max(moe, backward_transient(s, s.model.layer_spec(0))) : moe;
}

// TorchTitan's op-level selective checkpointing (workload::op_level_recompute) keeps per
// layer and micro-batch what its policy saves (torchtitan/parallelisms/parallelize_llama.py
// at 9dec370, _save_list and _custom_policy): the layer's input (the checkpoint's own, 1/tp
// under sequence parallelism), the odd-numbered mm outputs (wq's T·h/tp, wv's T·h_kv/tp,
// w1's T·f/tp and, under SwiGLU, w2's T·h: a row-parallel mm's partial sums, whole on
// every tp rank), the flash kernel's output (T·h/tp) and log-sum-exp (4 bytes per head and
// token) and, under tp, the two reduce-scatters' outputs (T·h/tp each). Every element-wise
// output and the even mms' (wk, wo, w3) are recomputed. Megatron's selective keeps all but
// the attention core: about twice as much for a Llama layer.
double op_level_saved_bytes(const scenario::Scenario& s, const scenario::ModelSpec& m) {
  const scenario::ParallelPlan& p = s.plan;
  const int e = topology::dtype_bytes(topology::storage_dtype(s.training.precision));
  const double tokens = static_cast<double>(s.training.micro_batch) * m.seq_len;
  const double tp = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double q_width = static_cast<double>(m.heads) * m.head_dim();
  const double kv_width = static_cast<double>(m.kv_heads) * m.head_dim();
  double elements = tokens * m.hidden / (sp ? tp : 1.0)               // the layer input
                    + tokens * q_width / tp                           // wq
                    + tokens * kv_width / tp                          // wv
                    + tokens * m.ffn_hidden / tp;                     // w1
  if (m.mlp == scenario::Mlp::swiglu) elements += tokens * m.hidden;  // w2, the 7th mm
  if (p.tp > 1) elements += 2.0 * tokens * m.hidden / tp;             // wo's and w2's reduce-scatters
  double bytes = elements * e;
  if (scenario::fused(s.training.attention)) bytes += tokens * q_width / tp * e + 4.0 * m.heads / tp * tokens;
  return bytes;
}

bool op_level_checkpointing(const scenario::Scenario& s, const scenario::ModelSpec& m) {
  return s.training.framework == scenario::Framework::torchtitan &&
         s.training.recompute == scenario::Recompute::selective && !m.moe() && !m.mla();
}

// What transformer layer `layer` (built from `m`, its layer_spec) puts on a rank: its
// parameters, the experts' share of them, its stored activations per micro-batch, its FP8
// weight copies.
struct LayerFootprint {
  double parameters = 0.0, experts = 0.0, activation = 0.0, fp8_weights = 0.0;
};

LayerFootprint layer_footprint(const scenario::Scenario& s, const scenario::ModelSpec& m, int layer) {
  const scenario::ParallelPlan& p = s.plan;
  const scenario::TrainingSpec& t = s.training;
  const int e = topology::dtype_bytes(topology::storage_dtype(t.precision));
  const bool fp8 = t.precision == scenario::Dtype::fp8;
  LayerFootprint f;
  // Expert parallelism holds experts / ep of each layer's experts.
  f.experts = expert_params_on_rank(m, p.tp, p.ep);
  f.parameters = layer_params_on_rank(s.model, layer, p.tp, p.ep);
  // Context parallelism: 1/cp of every stored tensor (under FlashAttention none is s x s).
  f.activation =
      (op_level_checkpointing(s, m) ? op_level_saved_bytes(s, m)
                                    : layer_activation_bytes(m, t.micro_batch, p.tp, p.sequence_parallel, t.recompute,
                                                             e, scenario::fused(t.attention), fp8 ? 1 : 0)) /
      p.cp;
  // fp8: Transformer Engine's FP8 copies of the linear weights, in both layouts.
  if (fp8)
    f.fp8_weights = 2.0 * (m.linear_params_per_layer() - m.expert_params_per_layer() * (1.0 - 1.0 / p.ep)) / p.tp;
  return f;
}

}  // namespace

MemoryReport memory_per_rank(const scenario::Scenario& s) {
  const scenario::ModelSpec& m = s.model;
  const scenario::ParallelPlan& p = s.plan;
  const scenario::TrainingSpec& t = s.training;
  const int e = topology::dtype_bytes(topology::storage_dtype(t.precision));
  const bool mixed = e == 2;
  const double optimizer_bytes = optimizer_state_bytes(t.optimizer);
  const int v = p.virtual_stages;
  const PipelineShape shape{p.pp, s.micro_batches(), v};

  LayerFootprint main_layer;
  LayerFootprint dense_layer;
  if (m.kind == scenario::ModelKind::transformer) {
    main_layer = layer_footprint(s, m, m.moe() ? m.dense_layers : 0);
    dense_layer = m.moe() && m.dense_layers > 0 ? layer_footprint(s, m.layer_spec(0), 0) : main_layer;
  }
  MemoryReport report;
  report.capacity = s.cluster.device.memory_bytes;
  report.headroom = s.cluster.device.headroom;
  const double nccl_buffers = nccl_buffer_bytes(s);
  if (p.offloads())
    report.host_capacity = s.cluster.host.memory / std::max(1, std::min(s.cluster.gpus_per_node, p.world()));
  for (int stage = 0; stage < p.pp; ++stage) {
    MemoryBreakdown b;
    b.stage = stage;
    double chunk_activation = 0.0;  // the largest chunk's bytes per micro-batch
    double layer_activation = 0.0;  // one layer's (offload_activations)
    double fp8_weights = 0.0;
    double experts = 0.0;  // of b.parameters: the experts' (expert parallelism's share)
    for (int c = 0; c < v; ++c) {
      const auto [first, last] = chunk_layers(m.layer_count(), p.pp, v, stage, c);
      double act = 0.0;
      if (m.kind == scenario::ModelKind::transformer) {
        // The dense first layers of a mixture of experts, then the rest.
        const int dense = std::clamp(m.moe() ? m.dense_layers - first : 0, 0, last - first);
        for (const auto& [f, n] : {std::pair{dense_layer, dense}, std::pair{main_layer, last - first - dense}}) {
          b.parameters += n * f.parameters;
          experts += n * f.experts;
          act += n * f.activation;
          fp8_weights += n * f.fp8_weights;
          if (n > 0) layer_activation = std::max(layer_activation, f.activation);
        }
      } else {
        for (int l = first; l < last; ++l) {
          const scenario::GenericLayer& g = m.generic_layers[static_cast<std::size_t>(l)];
          b.parameters += g.params;
          // Full recompute keeps only the chunk's first layer as its checkpoint.
          act += t.recompute == scenario::Recompute::full && l != first ? 0.0 : g.activations * t.micro_batch * e;
        }
      }
      chunk_activation = std::max(chunk_activation, act);
    }
    double logits_per_micro_batch = 0.0;
    if (m.kind == scenario::ModelKind::transformer) {
      const double word = static_cast<double>(m.vocab) * m.hidden / p.tp;
      if (stage == 0)
        b.parameters += word + (m.mlp == scenario::Mlp::gelu ? static_cast<double>(m.seq_len) * m.hidden : 0.0);
      if (stage == p.pp - 1) {
        b.parameters += 2.0 * m.hidden;  // final norm
        // An untied head has its own matrix; a tied one needs a copy when it is on another stage.
        if (!m.tie_embeddings || p.pp > 1) b.parameters += word;
        logits_per_micro_batch = static_cast<double>(t.micro_batch) * (m.seq_len / p.cp) * m.vocab / p.tp * 4.0;
      }
    }
    // Walk the stage's order: activations are held per (micro-batch, chunk) from forward to
    // backward, logits per micro-batch of the last chunk; the peak is of their sum.
    double peak = -1.0;
    for (const auto& [held, holding_logits] : stage_holdings(p.schedule, shape, stage)) {
      const double bytes = chunk_activation * held + logits_per_micro_batch * holding_logits;
      if (bytes > peak) {
        peak = bytes;
        b.in_flight = held;
        b.logits_in_flight = logits_per_micro_batch > 0.0 ? holding_logits : 0;
      }
    }
    b.activations = chunk_activation * b.in_flight + backward_transient(s);
    if (p.offload_activations) {
      // In host memory what the stage would hold; on the device two layers' (the one
      // computing and the one in transit), unless it would hold less anyway.
      const double stored = chunk_activation * b.in_flight;
      const double kept = std::min(stored, 2.0 * layer_activation);
      b.host += stored - kept;
      b.activations = kept + backward_transient(s);
    }
    b.logits = logits_per_micro_batch * b.logits_in_flight;
    // TorchTitan's loss, cross_entropy(pred.float(), labels) (train.py at 9dec370), keeps the
    // log-softmax's fp32 output (the logits counted above); the backward that starts from it
    // holds two more fp32 copies at once, the NLL's gradient and the log-softmax's input
    // gradient. Megatron's vocab-parallel cross entropy writes its gradient into the saved
    // softmax in place. The layers' backward transient comes later, so only the excess counts.
    if (logits_per_micro_batch > 0.0 && t.framework == scenario::Framework::torchtitan)
      b.logits += std::max(0.0, 2.0 * logits_per_micro_batch - backward_transient(s));
    const int g = topology::dtype_bytes(t.grad_dtype);
    const int sharded = p.grad_ranks() > 1 ? p.zero : 0;  // ZeRO stage in effect
    const int n = p.shard_size();                         // over this many ranks
    // ZeRO-2/3's units (gradient_sources): at most two are whole at once, the one computing
    // and the one in its reduce-scatter (gradients) or gather (ZeRO-3's parameters).
    double largest_unit = 0.0;
    if (sharded >= 2 || p.offload_optimizer) {
      const bool transformer = m.kind == scenario::ModelKind::transformer;
      for (const GradientSource& u : gradient_sources(s, stage, transformer && stage == p.pp - 1, stage == 0)) {
        largest_unit = std::max(largest_unit, u.params);
      }
    }
    b.weights = b.parameters * e + fp8_weights;
    if (sharded == 3) b.weights = b.weights / n + 2.0 * largest_unit * e;
    b.gradients = sharded >= 2 ? b.parameters * g / n + 2.0 * largest_unit * g : b.parameters * g;
    // The distributed optimizer shards the experts' state over the ranks holding the same
    // experts (ParallelPlan::expert_grad_ranks), the rest over all.
    const double state_params = optimizer_shard_params(p, b.parameters, p.ep > 1 ? experts : 0.0);
    b.master = mixed && s.training.master_weights ? state_params * 4.0 : 0.0;
    b.optimizer = state_params * optimizer_bytes;
    if (p.offload_optimizer) {
      // In host memory (beside any activations): the master weights (fp32 even when training in fp32: they are the
      // weights the host updates), the state and the gradients accumulated in fp32; on the
      // device two units' gradients (and, offloading the parameters, weights) whole.
      b.host += state_params * (4.0 + optimizer_bytes + 4.0);
      b.master = 0.0;
      b.optimizer = 0.0;
      b.gradients = 2.0 * largest_unit * e;  // copied out in the weights' type
      if (p.offload_params) {
        b.host += state_params * e;
        b.weights = 2.0 * largest_unit * e + fp8_weights;
      }
    }
    b.workspace = s.cluster.device.workspace_bytes;
    b.communicators = nccl_buffers;
    report.stages.push_back(b);
  }
  return report;
}

double nccl_buffer_bytes(const scenario::Scenario& s) {
  const scenario::ParallelPlan& p = s.plan;
  const int channels = s.cluster.device.kernels.collective_sms;
  if (channels <= 0 || p.world() < 2) return 0.0;
  constexpr double simple = 4.0 * 1024 * 1024;   // DEFAULT_BUFFSIZE
  constexpr double ll128 = 120.0 * 640 * 8 * 8;  // NCCL_LL128_ELEMS_PER_THREAD x MAX_NTHREADS x NCCL_STEPS x 8
  constexpr double ll = 8.0 * 512 * 8 * 16;      // NCCL_LL_LINES_PER_THREAD x MAX_NTHREADS x NCCL_STEPS x 16
  // The collective communicators: tensor, context and expert parallelism's, the gradients'
  // (dp x cp), and the world's (the default group a barrier or a loss reduction runs on)
  // where it is none of those.
  int groups = 0;
  int largest = 1;
  for (const int size : {p.tp, p.cp, p.grad_ranks(), p.ep}) {
    if (size > 1) ++groups;
    largest = std::max(largest, size);
  }
  if (p.world() > largest) ++groups;
  const double collective = groups * channels * (simple + ll128 + ll);
  const double pipeline = p.pp > 1 ? 2.0 * 2.0 * simple : 0.0;  // two peers, two channels each
  return collective + pipeline;
}

std::string describe_memory(const MemoryReport& r) {
  namespace u = units;
  const MemoryBreakdown& b = r.peak();
  std::string host;
  if (r.host_capacity > 0.0) {
    const MemoryBreakdown& h = r.host_peak();
    host = fmt::format("; host memory: stage {} keeps {} of its {} share ({})", h.stage, u::format_bytes(h.host),
                       u::format_bytes(r.host_capacity), r.host_fits() ? "fits" : "OUT OF HOST MEMORY");
  }
  const double left = r.capacity - b.total();
  const std::string verdict = b.total() > r.capacity   ? "OUT OF MEMORY"
                              : b.total() > r.usable() ? fmt::format("past the {:g} % headroom: {} left",
                                                                     100 * r.headroom, u::format_bytes(left))
                                                       : fmt::format("fits, {} left", u::format_bytes(left));
  return fmt::format(
      "stage {} needs {} of {} ({}): weights {}, gradients {}, master weights {}, optimizer {}, activations {} "
      "({} in flight), logits {} ({} in flight), workspace {}, NCCL buffers {}{}",
      b.stage, u::format_bytes(b.total()), u::format_bytes(r.capacity), verdict, u::format_bytes(b.weights),
      u::format_bytes(b.gradients), u::format_bytes(b.master), u::format_bytes(b.optimizer),
      u::format_bytes(b.activations), b.in_flight, u::format_bytes(b.logits), b.logits_in_flight,
      u::format_bytes(b.workspace), u::format_bytes(b.communicators), host);
}

}  // namespace parasim::workload
