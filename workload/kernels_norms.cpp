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

// The layer norm before each half: one kernel (Megatron's and Transformer Engine's fused
// norms, Apex's, PyTorch's F.layer_norm, Inductor's fusion); TorchTitan's RMSNorm in eager
// mode as the ops its forward calls (torchtitan/models/norms.py at 9dec370, RMSNorm:
// `self._norm(x.float()).type_as(x) * self.weight`, _norm = `x * torch.rsqrt(x.pow(2).mean(-1,
// keepdim=True) + self.eps)`), N = T·h values, fp32 intermediates:
//   to fp32 (e + 4 bytes a value), pow (8), mean (4), add eps and rsqrt (a value per row,
//   two kernels), x · rsqrt (8), type_as (4 + e), · weight (2e)
void norm_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const double n = x.Tl * x.h;
  if (!p.eager_elementwise()) {
    k.memory("layer-norm", 2.0 * n * x.e);
    return;
  }
  k.memory("rmsnorm-to-fp32", n * (x.e + 4.0));
  k.memory("rmsnorm-square", 8.0 * n);
  k.memory("rmsnorm-mean", 4.0 * n);
  k.memory("rmsnorm-eps", 8.0 * x.Tl);
  k.memory("rmsnorm-rsqrt", 8.0 * x.Tl);
  k.memory("rmsnorm-scale", 8.0 * n);
  k.memory("rmsnorm-to-16-bit", n * (4.0 + x.e));
  k.memory("rmsnorm-weight", 2.0 * n * x.e);
}

// Backward: one kernel for the input's gradient and one for the weight's (eager: autograd's
// kernels for each op above, in reverse: · weight (the input's gradient 2e, the weight's a
// product 3e and a row sum e), type_as (e + 4), x · rsqrt (the input's gradient 8, the
// rsqrt's a product 12 and a row sum 4), rsqrt, eps and mean (a value per row, then the
// mean's gradient spread over the row, 4), pow (2x · grad, 12), the two paths' gradients
// added (12), the cast back (4 + e)); then the residual's gradient added.
void layer_norm_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const double n = x.Tl * x.h;
  if (!p.eager_elementwise()) {
    k.memory("layer-norm-bwd", 3.0 * n * x.e);
    k.memory("layer-norm-weight-grad", 2.0 * n * x.e);
  } else {
    k.memory("rmsnorm-weight-bwd", 2.0 * n * x.e);
    k.memory("rmsnorm-weight-grad-mul", 3.0 * n * x.e);
    k.memory("rmsnorm-weight-grad-sum", n * x.e);
    k.memory("rmsnorm-to-16-bit-bwd", n * (x.e + 4.0));
    k.memory("rmsnorm-scale-bwd", 8.0 * n);
    k.memory("rmsnorm-rsqrt-grad-mul", 12.0 * n);
    k.memory("rmsnorm-rsqrt-grad-sum", 4.0 * n);
    k.memory("rmsnorm-rsqrt-bwd", 16.0 * x.Tl);
    k.memory("rmsnorm-mean-bwd", 4.0 * n);
    k.memory("rmsnorm-square-bwd", 12.0 * n);
    k.memory("rmsnorm-grad-add", 12.0 * n);
    k.memory("rmsnorm-to-fp32-bwd", n * (4.0 + x.e));
  }
  k.memory("residual-grad-add", 3.0 * n * x.e);
}

// Rotary embeddings on this rank's queries and keys: one kernel each (Megatron's and
// Transformer Engine's fused RoPE, Inductor's fusion), or TorchTitan's eager
// apply_rotary_emb (torchtitan/models/llama/model.py at 9dec370): each of q and k to fp32
// (e + 4 bytes a value), the complex product with freqs_cis (8), type_as back (4 + e);
// backward the same three in reverse.
void rotary(Emit& k, const KernelPlan& p, const Dims& x, bool backward) {
  const double q = x.T * x.q, kv = x.T * x.kv;
  if (!p.eager_elementwise()) {
    k.memory(backward ? "rotary-q-bwd" : "rotary-q", 2.0 * q * x.e);
    k.memory(backward ? "rotary-k-bwd" : "rotary-k", 2.0 * kv * x.e);
    return;
  }
  for (const double n : {q, kv}) {
    k.memory(backward ? "rotary-to-16-bit-bwd" : "rotary-to-fp32", n * (x.e + 4.0));
    k.memory(backward ? "rotary-mul-bwd" : "rotary-mul", 8.0 * n);
    k.memory(backward ? "rotary-to-fp32-bwd" : "rotary-to-16-bit", n * (4.0 + x.e));
  }
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
