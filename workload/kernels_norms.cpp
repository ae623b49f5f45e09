// The norms and element-wise kernels both halves of a layer share (the residual add with
// its bias and dropout, the layer norm's backward), and under fp8 the casts of a layer's
// weights to FP8 once per step.
#include "workload/kernels.hpp"

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

namespace detail {

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

using namespace detail;

std::vector<Kernel> weight_cast_kernels(const KernelPlan& p, LayerPart part) {
  Emit k(p);
  const Dims x = dims_of(p);
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
  if (part != LayerPart::mlp && p.model.mla()) {
    const scenario::ModelSpec& m = p.model;
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

}  // namespace parasim::workload
