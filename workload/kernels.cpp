// The kernel lists' frame (kernels.hpp): a kernel's FLOPs and bytes, the plan they are
// made for, a layer's dimensions on one rank, and a layer's lists assembled from its
// halves (attention: kernels_attention.cpp; MLP: kernels_mlp.cpp; their norms and residual
// adds: kernels_norms.cpp), with the context- and tp-overlap splits of those lists. The
// other families: the embedding and the loss (kernels_embedding.cpp), the optimizer
// (kernels_optimizer.cpp), generic layers (kernels_generic.cpp), the mixture of experts and
// latent attention (kernels_moe.cpp).
#include "workload/kernels.hpp"

#include <algorithm>

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

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

KernelPlan kernel_plan(const scenario::Scenario& s) {
  KernelPlan p;
  p.model = s.model;
  p.micro_batch = s.training.micro_batch;
  p.tp = s.plan.tp;
  p.cp = s.plan.cp;
  p.sequence_parallel = s.plan.sequence_parallel && s.plan.tp > 1;
  p.element = topology::dtype_bytes(topology::storage_dtype(s.training.precision));
  p.fp8 = s.training.precision == scenario::Dtype::fp8;
  p.fp8_current = p.fp8 && s.training.fp8_recipe == scenario::Fp8Recipe::current;
  p.grad_element = topology::dtype_bytes(s.training.grad_dtype);
  p.framework = s.training.framework;
  p.compiled = s.training.compile;
  p.flash = scenario::fused(s.training.attention);
  p.flash_v1 = s.training.attention == scenario::Attention::flash_v1;
  p.flash_v2 = s.training.attention == scenario::Attention::flash_v2;
  p.dropout = s.model.dropout > 0.0;
  p.biases = s.model.mlp == scenario::Mlp::gelu;
  p.ep = s.plan.ep;
  p.expert_load = s.model.expert_load();
  p.bn_members = s.syncs_batch_norm() ? s.plan.dp : 1;
  p.qk_layer_scaling = s.training.precision == scenario::Dtype::fp16;
  p.loss_scale = s.training.precision == scenario::Dtype::fp16 && s.training.loss_scaling;
  p.fused_softmax = fused_softmax_available(p.element, s.model.seq_len,
                                            static_cast<long long>(p.micro_batch) * (s.model.heads / s.plan.tp));
  return p;
}

std::vector<std::pair<std::string_view, double>> accumulate_bytes(const KernelPlan& p) {
  if (p.framework != scenario::Framework::megatron_deepspeed) return {};  // fused, or FSDP's shard
  const auto e = static_cast<double>(p.element);
  if (p.grad_element <= p.element) return {{"grad-accumulate", 3.0 * e}};
  return {{"lp-grad-zero", e},
          {"grad-accumulate", 3.0 * e},
          {"hp-grad-cast", e + p.grad_element},
          {"hp-grad-add", 3.0 * p.grad_element}};
}

KernelPlan layer_kernel_plan(const KernelPlan& p, const scenario::ModelSpec& spec) {
  KernelPlan out = p;
  out.model = spec;
  out.expert_load = spec.expert_load();
  return out;
}

namespace detail {

Dims dims_of(const KernelPlan& p) {
  const scenario::ModelSpec& m = p.model;
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

}  // namespace detail

using namespace detail;

std::vector<Kernel> layer_kernels(const KernelPlan& p, LayerPart part, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  if (part == LayerPart::attention_core) {
    if (op_level_recompute(p)) return op_level_recompute_kernels(p);
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

bool op_level_recompute(const KernelPlan& p) {
  return p.framework == scenario::Framework::torchtitan && !p.model.moe() && !p.model.mla();
}

std::vector<Kernel> op_level_recompute_kernels(const KernelPlan& p) {
  const Dims x = dims_of(p);
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
  std::vector<Kernel> out;
  for (Kernel k : layer_kernels(p, LayerPart::whole, false)) {
    if (k.kind == KernelKind::flash_forward) continue;  // saved
    if (k.kind == KernelKind::gemm) {
      // The torch mm ops in order: wq 1, wk 2, wv 3, wo 4, then w1 5, w3 6, w2 7 (SwiGLU,
      // w2(silu(w1(x)) * w3(x))) or w1 5, w2 6: the even ones run again. The layer's fused
      // GEMMs keep the recomputed columns: wk's of QKV, w3's of gate-up.
      if (k.name == "qkv") {
        k.n = x.kvi;
      } else if (k.name == "mlp-gate-up") {
        k.n = x.fi;
      } else if (k.name != "attention-out" && !(k.name == "mlp-down" && !swiglu)) {
        continue;  // saved: wq, wv, w1 and SwiGLU's w2
      }
    }
    out.push_back(k);
  }
  return out;
}

ContextKernels context_kernels(const KernelPlan& p, bool backward) {
  ContextKernels c;
  bool after = false;
  for (const Kernel& k : layer_kernels(p, LayerPart::attention, backward)) {
    if (k.kind == KernelKind::flash_forward || k.kind == KernelKind::flash_backward) {
      const long long q = k.m;  // b·s/cp queries of this rank, in the kernel's batch of b·heads
      Kernel first = k, block = k;
      first.m = first.n = q;
      first.causal = true;
      block.m = q;
      block.n = q / 2;
      block.causal = false;
      c.first.push_back(first);
      c.block.push_back(block);
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
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
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

}  // namespace parasim::workload
