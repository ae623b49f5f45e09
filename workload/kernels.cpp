#include "plan/kernels.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "plan/kernels_detail.hpp"

namespace parasim::plan {

double Kernel::flops() const {
  const double mnk =
      static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  switch (kind) {
    case KernelKind::gemm: return 2.0 * mnk;
    // Q·K^T and P·V forward; backward recomputes Q·K^T and forms dV, dP, dQ, dK (FlashAttention-2).
    case KernelKind::flash_forward: return 4.0 * mnk * (causal ? 0.5 : 1.0);
    case KernelKind::flash_backward: return 10.0 * mnk * (causal ? 0.5 : 1.0);
    case KernelKind::memory: return 0.0;
  }
  return 0.0;
}

double Kernel::io_bytes() const {
  const auto dm = static_cast<double>(m);
  const auto dn = static_cast<double>(n);
  const auto dk = static_cast<double>(k);
  const auto db = static_cast<double>(batch);
  switch (kind) {
    case KernelKind::gemm: {
      const double operand = fp8 ? 1.0 : element;
      return db * ((dm * dk + dk * dn) * operand + dm * dn * (accumulate > 0 ? 2.0 * accumulate : element));
    }
    // Q, K, V in and O out (forward); Q, K, V, O, dO in and dQ, dK, dV out (backward).
    // (m queries, n keys: Q and O of m rows, K and V of n.)
    case KernelKind::flash_forward: return db * (2.0 * dm + 2.0 * dn) * dk * element;
    case KernelKind::flash_backward: return db * (4.0 * dm + 4.0 * dn) * dk * element;
    case KernelKind::memory: return bytes;
  }
  return 0.0;
}

bool fused_softmax_available(int element_bytes, int seq_len, long long attention_batches) {
  if (element_bytes != 2) return true;
  if (seq_len <= 16 || seq_len > 16384 || seq_len % 4 != 0 || attention_batches % 4 != 0) return false;
  int pow2 = 1;
  while (pow2 < seq_len) pow2 *= 2;
  const int warp = std::min(pow2, 32);
  const int batches_per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  return attention_batches % batches_per_block == 0;
}

KernelPlan kernel_plan(const Scenario& s) {
  KernelPlan p;
  p.model = s.model;
  p.micro_batch = s.training.micro_batch;
  p.tp = s.plan.tp;
  p.cp = s.plan.cp;
  p.sequence_parallel = s.plan.sequence_parallel && s.plan.tp > 1;
  p.element = topology::dtype_bytes(topology::storage_dtype(s.training.precision));
  p.fp8 = s.training.precision == Dtype::fp8;
  p.fp8_current = p.fp8 && s.training.fp8_recipe == Fp8Recipe::current;
  p.grad_element = topology::dtype_bytes(s.training.grad_dtype);
  p.flash = s.training.attention == Attention::flash;
  p.dropout = s.model.dropout > 0.0;
  p.biases = s.model.mlp == Mlp::gelu;
  p.ep = s.plan.ep;
  p.expert_load = s.model.expert_load();
  p.bn_members = s.syncs_batch_norm() ? s.plan.dp : 1;
  p.qk_layer_scaling = s.training.precision == Dtype::fp16;
  p.loss_scale = s.training.precision == Dtype::fp16 && s.training.loss_scaling;
  p.fused_softmax = fused_softmax_available(p.element, s.model.seq_len,
                                            static_cast<long long>(p.micro_batch) * (s.model.heads / s.plan.tp));
  return p;
}

KernelPlan layer_kernel_plan(const KernelPlan& p, const ModelSpec& spec) {
  KernelPlan out = p;
  out.model = spec;
  out.expert_load = spec.expert_load();
  return out;
}

namespace detail {

Dims dims_of(const KernelPlan& p) {
  const ModelSpec& m = p.model;
  Dims x{};
  x.e = p.element;
  x.si = m.seq_len;
  x.di = m.head_dim();
  x.Ti = static_cast<long long>(p.micro_batch) * (m.seq_len / p.cp);  // this rank's positions
  x.hi = m.hidden;
  x.qi = static_cast<long long>(m.hidden) / p.tp;
  x.kvi = static_cast<long long>(m.kv_heads) * m.head_dim() / p.tp;
  x.fi = static_cast<long long>(m.ffn_hidden) / p.tp;
  x.bh = static_cast<long long>(p.micro_batch) * (m.heads / p.tp);
  x.T = static_cast<double>(x.Ti);
  x.Tl = p.sequence_parallel ? x.T / p.tp : x.T;
  x.h = static_cast<double>(x.hi);
  x.q = static_cast<double>(x.qi);
  x.kv = static_cast<double>(x.kvi);
  x.f = static_cast<double>(x.fi);
  x.s = static_cast<double>(x.si);
  x.d = static_cast<double>(x.di);
  x.heads = static_cast<double>(x.bh);
  x.A = x.heads * x.s * x.s;
  x.dqk = m.qk_head_dim();
  x.dvi = m.value_head_dim();
  const long long heads = m.heads / p.tp;
  x.oi = m.mla() ? heads * x.dvi : x.qi;
  x.o = static_cast<double>(x.oi);
  x.qw = m.mla() ? static_cast<double>(heads * x.dqk) : x.q;
  x.kw = m.mla() ? x.qw : x.kv;
  return x;
}

// FlashAttention's kernels take one head width: under MLA the mean of the query/key and
// value widths, which gives the forward's FLOPs exactly.
long long flash_head_dim(const Dims& x) {
  return (x.dqk + x.dvi) / 2;
}

void attention_core_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  if (p.flash) {  // this rank's queries against every key (all s of them under context parallelism)
    k.flash(false, x.si / p.cp, x.si, flash_head_dim(x), x.bh, true);
    return;
  }
  k.memory("qk-layout-copy", 2.0 * x.T * (x.qw + x.kw) * x.e);
  k.gemm("attention-scores", x.si, x.si, x.dqk, x.bh);
  if (p.fused_softmax) {
    k.memory("scale-mask-softmax", 2.0 * x.A * x.e);
  } else {  // PyTorch: to fp32, mask, softmax, back to 16 bits
    k.memory("scores-to-fp32", x.A * (x.e + 4.0));
    if (p.qk_layer_scaling) k.memory("scores-scale", 8.0 * x.A);
    k.memory("mask-fill", 8.0 * x.A);
    k.memory("softmax", 8.0 * x.A);
    k.memory("probs-to-16-bit", x.A * (4.0 + x.e));
  }
  if (p.dropout) k.memory("attention-dropout", 2.0 * x.A * x.e + x.A);
  k.gemm("attention-values", x.si, x.dvi, x.si, x.bh);
  k.memory("context-permute", 2.0 * x.T * x.o * x.e);
}

// The residual add after a block, with the bias and dropout before it (GPT: one fused
// kernel), writing the dropout mask.
void residual_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const char* name = p.dropout ? "bias-dropout-add" : p.biases ? "bias-add" : "residual-add";
  k.memory(name, 3.0 * x.Tl * x.h * x.e + (p.dropout ? x.Tl * x.h : 0.0));
}

// Without dropout or bias the gradient passes through the add unchanged.
void residual_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  if (p.dropout) k.memory("dropout-bwd", 2.0 * x.Tl * x.h * x.e + x.Tl * x.h);
  if (p.biases) k.memory("bias-grad", x.Tl * x.h * x.e);
}

void layer_norm_backward(Emit& k, const Dims& x) {
  k.memory("layer-norm-bwd", 3.0 * x.Tl * x.h * x.e);
  k.memory("layer-norm-weight-grad", 2.0 * x.Tl * x.h * x.e);
  k.memory("residual-grad-add", 3.0 * x.Tl * x.h * x.e);
}

}  // namespace detail

namespace {

using namespace detail;

void attention_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool rotary = p.model.mlp == Mlp::swiglu;
  if (p.model.mla()) {
    k.memory("layer-norm", 2.0 * x.Tl * x.h * x.e);
    k.fp8_cast("qkv-input-cast", x.Tl * x.h, true);
    mla_in_forward(k, p, x);
    attention_core_forward(k, p, x);
    k.fp8_cast("attention-out-input-cast", x.T * x.o, false);
    k.linear("attention-out", x.Ti, x.hi, x.oi);
    residual_forward(k, p, x);
    return;
  }
  k.memory("layer-norm", 2.0 * x.Tl * x.h * x.e);
  k.fp8_cast("qkv-input-cast", x.Tl * x.h, true);  // TE's LayerNormLinear writes FP8
  k.linear("qkv", x.Ti, x.qi + 2 * x.kvi, x.hi);
  if (rotary) {
    k.memory("rotary-q", 2.0 * x.T * x.q * x.e);
    k.memory("rotary-k", 2.0 * x.T * x.kv * x.e);
  }
  attention_core_forward(k, p, x);
  k.fp8_cast("attention-out-input-cast", x.T * x.q, false);
  k.linear("attention-out", x.Ti, x.hi, x.qi);
  residual_forward(k, p, x);
}

void mlp_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool swiglu = p.model.mlp == Mlp::swiglu;
  if (p.model.moe()) {
    moe_prepare(k, p, x, false);
    if (p.tp > 1) shared_experts(k, p, x, false);
    moe_experts(k, p, x, false);
    moe_finish(k, p, x, false);
    return;
  }
  k.memory("layer-norm", 2.0 * x.Tl * x.h * x.e);
  k.fp8_cast("mlp-input-cast", x.Tl * x.h, true);
  k.linear(swiglu ? "mlp-gate-up" : "mlp-up", x.Ti, swiglu ? 2 * x.fi : x.fi, x.hi);
  k.memory(swiglu ? "swiglu" : "bias-gelu", (swiglu ? 3.0 : 2.0) * x.T * x.f * x.e);
  k.fp8_cast("mlp-down-input-cast", x.T * x.f, true);  // fused into the activation (LayerNormMLP)
  k.linear("mlp-down", x.Ti, x.hi, x.fi);
  residual_forward(k, p, x);
}

void mlp_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool swiglu = p.model.mlp == Mlp::swiglu;
  if (p.model.moe()) {
    moe_prepare(k, p, x, true);
    if (p.tp > 1) shared_experts(k, p, x, true);
    moe_experts(k, p, x, true);
    moe_finish(k, p, x, true);
    return;
  }
  const long long up = swiglu ? 2 * x.fi : x.fi;
  residual_backward(k, p, x);
  k.fp8_cast("mlp-down-grad-cast", x.T * x.h, false);  // the output's gradient, E5M2
  k.linear("mlp-down-dgrad", x.Ti, x.fi, x.hi);
  k.linear_wgrad("mlp-down-wgrad", x.fi, x.hi, x.Ti);
  k.memory(swiglu ? "swiglu-bwd" : "bias-gelu-bwd", (swiglu ? 5.0 : 3.0) * x.T * x.f * x.e);
  if (!swiglu) k.memory("bias-grad", x.T * x.f * x.e);
  k.fp8_cast("mlp-up-grad-cast", x.T * static_cast<double>(up), true);  // fused into the activation's backward
  k.linear("mlp-up-dgrad", x.Ti, x.hi, up);
  k.linear_wgrad("mlp-up-wgrad", up, x.hi, x.Ti);
  layer_norm_backward(k, x);
}

void attention_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool mla = p.model.mla();
  const bool rotary = p.model.mlp == Mlp::swiglu && !mla;
  const long long qkv = x.qi + 2 * x.kvi;
  const double qkv_grads = mla ? x.qw + x.kw + x.o : static_cast<double>(qkv);  // dQ, dK, dV
  residual_backward(k, p, x);
  k.fp8_cast("attention-out-grad-cast", x.T * x.h, false);
  k.linear("attention-out-dgrad", x.Ti, x.oi, x.hi);
  k.linear_wgrad("attention-out-wgrad", x.oi, x.hi, x.Ti);
  if (p.flash) {
    // FlashAttention-2's backward: the dO·O row sums, the kernel, dQ from fp32 to 16 bits.
    k.memory("flash-bwd-preprocess", 2.0 * x.T * x.o * x.e);
    k.flash(true, x.si / p.cp, x.si, flash_head_dim(x), x.bh, true);
    k.memory("flash-bwd-dq-convert", x.T * x.qw * (4.0 + x.e));
  } else {
    k.memory("context-permute-bwd", 2.0 * x.T * x.o * x.e);
    k.gemm("attention-probs-grad", x.si, x.si, x.dvi, x.bh);
    k.gemm("attention-values-grad", x.si, x.dvi, x.si, x.bh);
    if (p.dropout) k.memory("attention-dropout-bwd", 2.0 * x.A * x.e + x.A);
    if (p.fused_softmax) {
      k.memory("softmax-bwd", 3.0 * x.A * x.e);
    } else {
      k.memory("probs-grad-to-fp32", x.A * (x.e + 4.0));
      k.memory("softmax-bwd", 12.0 * x.A);
      k.memory("mask-fill-bwd", 8.0 * x.A);
      if (p.qk_layer_scaling) k.memory("scores-scale-bwd", 8.0 * x.A);
      k.memory("scores-grad-to-16-bit", x.A * (4.0 + x.e));
    }
    k.gemm("attention-q-grad", x.si, x.dqk, x.si, x.bh);
    k.gemm("attention-k-grad", x.si, x.dqk, x.si, x.bh);
    k.memory("qkv-grad-layout", 2.0 * x.T * qkv_grads * x.e);
  }
  if (mla) {
    mla_in_backward(k, p, x);
    layer_norm_backward(k, x);
    return;
  }
  if (rotary) {
    k.memory("rotary-q-bwd", 2.0 * x.T * x.q * x.e);
    k.memory("rotary-k-bwd", 2.0 * x.T * x.kv * x.e);
  }
  k.fp8_cast("qkv-grad-cast", x.T * static_cast<double>(qkv), false);
  k.linear("qkv-dgrad", x.Ti, x.hi, qkv);
  k.linear_wgrad("qkv-wgrad", qkv, x.hi, x.Ti);
  if (p.biases) k.memory("bias-grad", x.T * static_cast<double>(qkv) * x.e);
  layer_norm_backward(k, x);
}

}  // namespace

using namespace detail;

std::vector<Kernel> layer_kernels(const KernelPlan& p, LayerPart part, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  if (part == LayerPart::attention_core) {
    attention_core_forward(k, p, x);
    return k.take();
  }
  const bool attention = part != LayerPart::mlp;
  const bool mlp = part != LayerPart::attention;
  if (!backward) {
    if (attention) attention_forward(k, p, x);
    if (mlp) mlp_forward(k, p, x);
  } else {
    if (mlp) mlp_backward(k, p, x);
    if (attention) attention_backward(k, p, x);
  }
  return k.take();
}

ContextKernels context_kernels(const KernelPlan& p, bool backward) {
  ContextKernels c;
  bool after = false;
  for (const Kernel& k : layer_kernels(p, LayerPart::attention, backward)) {
    if (k.kind == KernelKind::flash_forward || k.kind == KernelKind::flash_backward) {
      const long long q = k.m;  // b·s/cp queries of this rank, in the kernel's batch of b·heads
      c.first.push_back({k.kind, k.name, q, q, k.k, k.batch, k.element, 0, 0.0, true});
      c.block.push_back({k.kind, k.name, q, q / 2, k.k, k.batch, k.element, 0, 0.0, false});
      after = true;
      continue;
    }
    (after ? c.finish : c.prepare).push_back(k);
  }
  if (backward) {  // two blocks of b·s/cp keys' and values' gradients in, their sum out
    const Dims x = dims_of(p);
    const double kv = x.T * 2.0 * x.kv * x.e;
    c.merge.push_back({KernelKind::memory, "cp-kv-grad-add", 0, 0, 0, 1, p.element, 0, 3.0 * kv, false});
  }
  return c;
}

int overlap_splits(const KernelPlan& p) {
  const long long rows = static_cast<long long>(p.micro_batch) * p.model.seq_len / std::max(1, p.tp);
  for (int s : {4, 2}) {
    if (rows % s == 0) return s;
  }
  return 1;
}

OverlapKernels overlap_kernels(const KernelPlan& p, LayerPart half, bool backward, int splits) {
  const bool attention = half == LayerPart::attention;
  const bool swiglu = p.model.mlp == Mlp::swiglu;
  const std::string_view column = backward ? (attention ? "attention-out-dgrad" : "mlp-down-dgrad")
                                           : (attention ? "qkv"
                                              : swiglu  ? "mlp-gate-up"
                                                        : "mlp-up");
  const std::string_view row =
      backward ? (attention ? "qkv-dgrad" : "mlp-up-dgrad") : (attention ? "attention-out" : "mlp-down");
  OverlapKernels o;
  std::vector<Kernel> after;
  int seen = 0;  // 0 before the column GEMM, 1 between, 2 after the row GEMM
  for (Kernel k : layer_kernels(p, half, backward)) {
    if (k.name == column) {
      k.m /= p.tp;
      o.column.push_back(k);
      seen = 1;
    } else if (k.name == row) {
      if (!backward) k.m /= splits;
      o.row.push_back(k);
      seen = 2;
    } else {
      (seen == 0 ? o.prepare : seen == 1 ? o.middle : after).push_back(k);
    }
  }
  if (backward) {
    o.wgrad = std::move(after);
  } else {
    o.row_last = o.row;
    o.row_last.insert(o.row_last.end(), after.begin(), after.end());
  }
  return o;
}

std::vector<Kernel> weight_cast_kernels(const KernelPlan& p, LayerPart part) {
  Emit k(p);
  const Dims x = dims_of(p);
  const bool swiglu = p.model.mlp == Mlp::swiglu;
  if (part != LayerPart::mlp && p.model.mla()) {
    const ModelSpec& m = p.model;
    const double heads = static_cast<double>(m.heads / p.tp);
    const double q = m.q_lora_rank > 0 ? m.q_lora_rank * (x.h + x.qw) : x.h * x.qw;
    const double kv = x.h * (m.kv_lora_rank + m.qk_rope_head_dim) +
                      m.kv_lora_rank * heads * static_cast<double>(m.qk_nope_head_dim + x.dvi);
    k.fp8_cast("qkv-weight-cast", q + kv, false);
    k.fp8_cast("attention-out-weight-cast", x.o * x.h, false);
  } else if (part != LayerPart::mlp) {
    k.fp8_cast("qkv-weight-cast", (x.q + 2.0 * x.kv) * x.h, false);
    k.fp8_cast("attention-out-weight-cast", x.q * x.h, false);
  }
  if (part != LayerPart::attention) {
    // Mixture of experts: the local experts' weights.
    const double f = p.model.moe() ? static_cast<double>(p.model.expert_ffn_hidden / p.tp) * (p.model.experts / p.ep) +
                                         static_cast<double>(p.model.shared_expert_ffn_hidden / p.tp)
                                   : x.f;
    k.fp8_cast("mlp-up-weight-cast", (swiglu ? 2.0 : 1.0) * f * x.h, false);
    k.fp8_cast("mlp-down-weight-cast", f * x.h, false);
  }
  return k.take();
}

std::vector<Kernel> generic_layer_kernels(const KernelPlan& p, const GenericLayer& layer, bool backward, int piece) {
  Emit k(p);
  const Gemm g = generic_layer_gemm(layer, p.micro_batch);
  const double act = layer.activations * p.micro_batch * p.element;
  const BatchNorm& bn = layer.batch_norm;
  const int n = bn.layers;
  const double values = n > 0 ? bn.values / n * p.micro_batch * p.element : 0.0;  // one BN layer's
  const double stats = (2.0 * bn.channels + 1.0) * 4.0;  // one member's, fp32
  const double merged = p.bn_members * stats + 2.0 * bn.channels * 4.0;
  if (!backward) {
    if (piece < 0) {
      k.gemm("layer", g.m, g.n, g.k);
      for (int i = 0; i < n; ++i) {
        if (piece == whole_layer) k.memory("bn-stats", values);
        k.memory("bn-normalize", 2.0 * values);
      }
      k.memory("activation", act);
      return k.take();
    }
    if (piece == 0) k.gemm("layer", g.m, g.n, g.k);
    if (piece > 0) {
      // The members' statistics without the empty ones (a boolean-mask selection), merged,
      // then the normalisation.
      k.memory("bn-mask-stats", 2.0 * p.bn_members * stats);
      k.memory("bn-merge-stats", merged);
      k.memory("bn-normalize", 2.0 * values);
    }
    if (piece < n) {
      k.memory("bn-stats", values);
      k.memory("bn-pack-stats", 2.0 * stats);  // mean, invstd and count into one buffer
    }
    if (piece == n) k.memory("activation", act);
    return k.take();
  }
  if (piece < 0 || piece == n) k.memory("activation-grad", act);
  if (piece < 0) {
    for (int i = 0; i < n; ++i) {
      k.memory("bn-backward-reduce", 2.0 * values);
      k.memory("bn-backward-input", 3.0 * values);
    }
  } else {
    if (piece < n) k.memory("bn-backward-input", 3.0 * values);
    if (piece > 0) {
      k.memory("bn-backward-reduce", 2.0 * values);
      k.memory("bn-pack-sums", 2.0 * 2.0 * bn.channels * 4.0);  // Σdy and Σdy·x̂ into one buffer
    }
  }
  if (piece <= 0) {
    k.gemm("layer-dgrad", g.m, g.k, g.n);
    k.wgrad("layer-wgrad", g.k, g.n, g.m);
  }
  return k.take();
}

namespace {

// Megatron's masking of the token ids outside this rank's vocabulary slice (the embedding's
// ids, the cross-entropy's targets): (t < start) | (t >= end), t.clone() - start, and the
// masked ids set to 0, over T int64 ids and a byte of mask each.
void out_of_slice(Emit& k, const Dims& x, const std::array<std::string_view, 6>& names) {
  const double ids = 8.0 * x.T;
  k.memory(names[0], ids + x.T);
  k.memory(names[1], ids + x.T);
  k.memory(names[2], 3.0 * x.T);
  k.memory(names[3], 2.0 * ids);
  k.memory(names[4], 2.0 * ids);
  k.memory(names[5], ids + x.T);
}

}  // namespace

std::vector<Kernel> embedding_kernels(const KernelPlan& p, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  const double word = static_cast<double>(p.model.vocab) / p.tp * x.h;
  const bool positions = p.model.mlp == Mlp::gelu;
  if (!backward) {
    // VocabParallelEmbedding under tp: the ids outside this rank's slice masked to 0 before
    // the lookup ((t < start) | (t >= end), t.clone() - start, the masked fill) and their
    // rows zeroed after it.
    if (p.tp > 1) {
      static constexpr std::array<std::string_view, 6> names{"ids-below", "ids-above",  "ids-mask-or",
                                                             "ids-clone", "ids-shift", "ids-mask-fill"};
      out_of_slice(k, x, names);
    }
    k.memory("embedding-lookup", 2.0 * x.T * x.h * x.e);
    if (p.tp > 1) k.memory("embedding-rows-zero", 2.0 * x.T * x.h * x.e + x.T);
    if (positions) k.memory("position-add", 3.0 * x.T * x.h * x.e);
    if (p.dropout) k.memory("embedding-dropout", 2.0 * x.T * x.h * x.e + x.T * x.h);
    return k.take();
  }
  if (p.dropout) k.memory("embedding-dropout-bwd", 2.0 * x.T * x.h * x.e + x.T * x.h);
  // The dense gradient of the lookup: zeroed, rows added in, then accumulated into the
  // main gradient.
  k.memory("embedding-grad-zero", word * x.e);
  k.memory("embedding-grad-index-add", 3.0 * x.T * x.h * x.e);
  k.memory("embedding-main-grad-add", word * (x.e + 2.0 * p.grad_element));
  if (positions) k.memory("position-grad", x.T * x.h * x.e + x.s * x.h * 2.0 * p.grad_element);
  return k.take();
}

std::vector<Kernel> head_kernels(const KernelPlan& p, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  const long long vocab = p.model.vocab / p.tp;
  const double logits = x.T * static_cast<double>(vocab);
  // The cross-entropy runs on an fp32 copy of the logits: 4 bytes each, plus the cast.
  const double cast = x.e == 4 ? 0.0 : logits * (x.e + 4.0);
  // Megatron's vocabulary-parallel cross-entropy (_VocabParallelCrossEntropy) and GPT's
  // loss_func, kernel by kernel as PyTorch launches them: besides the passes over the
  // logits, a dozen small kernels on the T targets and losses (int64 or fp32 each).
  const double ids = 8.0 * x.T;
  const double per_token = 4.0 * x.T;
  if (!backward) {
    k.memory("final-layer-norm", 2.0 * x.Tl * x.h * x.e);
    k.gemm("lm-head", x.Ti, vocab, x.hi);
    if (cast > 0) k.memory("logits-to-fp32", cast);
    k.memory("logits-max", 4.0 * logits);
    k.memory("logits-sub-max", 8.0 * logits);
    // The targets outside this rank's slice: (t < start) | (t >= end), t.clone() - start,
    // masked to 0.
    static constexpr std::array<std::string_view, 6> names{"target-below", "target-above",  "target-mask-or",
                                                           "target-clone", "target-shift", "target-mask-fill"};
    out_of_slice(k, x, names);
    // logits_2d[arange, target]: the index, the gather, its copy, the masked positions zeroed.
    k.memory("target-arange", ids);
    k.memory("target-logit", 2.0 * ids + per_token);
    k.memory("target-logit-copy", 2.0 * per_token);
    k.memory("target-logit-mask-fill", 2.0 * per_token + x.T);
    k.memory("logits-exp", 8.0 * logits);
    k.memory("logits-sum-exp", 4.0 * logits);
    k.memory("log-sum-exp", 2.0 * per_token);
    k.memory("loss-per-token", 3.0 * per_token);
    k.memory("softmax-divide", 8.0 * logits);
    // loss_func: sum(losses * loss_mask) / loss_mask.sum(), and the copy averaged over the
    // data-parallel group for the log; the schedule divides by the micro-batches.
    k.memory("loss-mask-mul", 3.0 * per_token);
    k.memory("loss-sum", per_token);
    k.memory("loss-mask-sum", per_token);
    k.memory("loss-divide", 12.0);
    k.memory("loss-log-copy", 8.0);
    k.memory("loss-log-cat", 8.0);
    k.memory("loss-log-average", 8.0);
    k.memory("loss-over-micro-batches", 8.0);
    return k.take();
  }
  // The loss's scalar chain backward (the seed gradient, the loss scale under fp16, the
  // divisions, the mask product), then the cross-entropy's: softmax - one-hot at the
  // targets this rank holds (arange, the mask as float, 1 - mask, the gather, the
  // subtraction, the scatter back), times the loss gradient.
  k.memory("loss-grad-seed", 4.0);
  if (p.loss_scale) {
    k.memory("loss-scale", 8.0);
    k.memory("loss-scale-bwd", 8.0);
  }
  k.memory("loss-over-micro-batches-bwd", 8.0);
  k.memory("loss-divide-bwd", 12.0);
  k.memory("loss-mask-mul-bwd", 3.0 * per_token);
  k.memory("target-arange-bwd", ids);
  k.memory("target-mask-float", x.T + per_token);
  k.memory("target-one-minus-mask", 2.0 * per_token);
  k.memory("target-grad-gather", 2.0 * ids + per_token);
  k.memory("target-grad-sub", 3.0 * per_token);
  k.memory("target-grad-scatter", 2.0 * ids + per_token);
  k.memory("logits-grad-scale", 8.0 * logits);
  if (cast > 0) k.memory("logits-grad-cast", cast);
  k.gemm("lm-head-dgrad", x.Ti, x.hi, vocab);
  k.wgrad("lm-head-wgrad", vocab, x.hi, x.Ti);
  k.memory("final-layer-norm-bwd", 3.0 * x.Tl * x.h * x.e);
  k.memory("final-layer-norm-weight-grad", 2.0 * x.Tl * x.h * x.e);
  return k.take();
}

std::vector<Kernel> optimizer_kernels(const Scenario& s, double params) {
  KernelPlan p = kernel_plan(s);
  Emit k(p);
  const int e = p.element;
  const int g = p.grad_element;
  if (g == 2) k.memory("main-grad-to-fp32", params * 6.0);
  if (s.training.precision == Dtype::fp16 && s.training.loss_scaling) k.memory("unscale-check-overflow", params * 8.0);
  k.memory("grad-norm", params * 4.0);
  // The parameter (fp32, or the 16-bit weight without master weights) read and written, the
  // fp32 gradient read, each state read and written: AdamW's two fp32 moments, SGD's
  // momentum, the 8-bit moments (and their blocks' maxima).
  const Optimizer o = s.training.optimizer;
  const bool master = e == 2 && s.training.master_weights;
  k.memory(o == Optimizer::adamw ? "adamw"
           : o == Optimizer::sgd ? "sgd-momentum"
                                 : "adamw8bit",
           params * ((e == 2 && !master ? 2.0 * e : 8.0) + 4.0 + 2.0 * optimizer_state_bytes(o)));
  if (master) k.memory("copy-to-16-bit-weights", params * (4.0 + e));
  k.memory("zero-main-grads", params * g);
  return k.take();
}

}  // namespace parasim::plan
