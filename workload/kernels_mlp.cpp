// A transformer layer's MLP half: the layer norm, the up (or SwiGLU's gate-and-up) GEMM, the
// activation, the down GEMM and the residual add, and their backward; a mixture of experts'
// MLP goes to kernels_moe.cpp.
#include "workload/kernels.hpp"

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

namespace detail {

void mlp_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
  if (p.model.moe()) {
    moe_prepare(k, p, x, false);
    if (p.tp > 1) shared_experts(k, p, x, false);
    moe_experts(k, p, x, false);
    moe_finish(k, p, x, false);
    return;
  }
  norm_forward(k, p, x);
  k.fp8_cast("mlp-input-cast", x.Tl * x.h, true);
  k.linear(swiglu ? "mlp-gate-up" : "mlp-up", x.Ti, swiglu ? 2 * x.fi : x.fi, x.hi);
  if (p.eager_elementwise()) {  // F.silu(w1(x)) * w3(x)
    k.memory("silu", 2.0 * x.T * x.f * x.e);
    k.memory("swiglu-mul", 3.0 * x.T * x.f * x.e);
  } else {
    k.memory(swiglu ? "swiglu" : "bias-gelu", (swiglu ? 3.0 : 2.0) * x.T * x.f * x.e);
  }
  k.fp8_cast("mlp-down-input-cast", x.T * x.f, true);  // fused into the activation (LayerNormMLP)
  k.linear("mlp-down", x.Ti, x.hi, x.fi);
  residual_forward(k, p, x);
}

void mlp_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
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
  if (p.eager_elementwise()) {  // the product's two gradients, then SiLU's
    k.memory("swiglu-mul-bwd-gate", 3.0 * x.T * x.f * x.e);
    k.memory("swiglu-mul-bwd-up", 3.0 * x.T * x.f * x.e);
    k.memory("silu-bwd", 3.0 * x.T * x.f * x.e);
  } else {
    k.memory(swiglu ? "swiglu-bwd" : "bias-gelu-bwd", (swiglu ? 5.0 : 3.0) * x.T * x.f * x.e);
  }
  if (!swiglu) k.memory("bias-grad", x.T * x.f * x.e);
  k.fp8_cast("mlp-up-grad-cast", x.T * static_cast<double>(up), true);  // fused into the activation's backward
  k.linear("mlp-up-dgrad", x.Ti, x.hi, up);
  k.linear_wgrad("mlp-up-wgrad", up, x.hi, x.Ti);
  layer_norm_backward(k, p, x);
}

}  // namespace detail

}  // namespace parasim::workload
