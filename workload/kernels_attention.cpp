// A transformer layer's attention half, kernel by kernel as Megatron-LM launches it: the
// layer norm, the QKV GEMM (rotary embeddings under SwiGLU models), the attention core
// (FlashAttention-2, or the unfused scores, softmax and values GEMMs with Megatron's fused
// softmax where its kernel takes the shape, PyTorch's otherwise), the projection and the
// residual add; and the backward of each.
#include "workload/kernels.hpp"

#include <algorithm>

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

bool fused_softmax_available(int element_bytes, int seq_len, long long attention_batches) {
  if (element_bytes != 2) return true;
  if (seq_len <= 16 || seq_len > 16384 || seq_len % 4 != 0 || attention_batches % 4 != 0) return false;
  int pow2 = 1;
  while (pow2 < seq_len) pow2 *= 2;
  const int warp = std::min(pow2, 32);
  const int batches_per_block = (128 / warp) * (pow2 <= 128 ? 2 : 1);
  return attention_batches % batches_per_block == 0;
}

namespace detail {

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

void attention_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool rope = p.model.mlp == scenario::Mlp::swiglu;
  if (p.model.mla()) {
    norm_forward(k, p, x);
    k.fp8_cast("qkv-input-cast", x.Tl * x.h, true);
    mla_in_forward(k, p, x);
    attention_core_forward(k, p, x);
    k.fp8_cast("attention-out-input-cast", x.T * x.o, false);
    k.linear("attention-out", x.Ti, x.hi, x.oi);
    residual_forward(k, p, x);
    return;
  }
  norm_forward(k, p, x);
  k.fp8_cast("qkv-input-cast", x.Tl * x.h, true);  // TE's LayerNormLinear writes FP8
  k.linear("qkv", x.Ti, x.qi + 2 * x.kvi, x.hi);
  if (rope) rotary(k, p, x, false);
  attention_core_forward(k, p, x);
  k.fp8_cast("attention-out-input-cast", x.T * x.q, false);
  k.linear("attention-out", x.Ti, x.hi, x.qi);
  residual_forward(k, p, x);
}

void attention_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const bool mla = p.model.mla();
  const bool rope = p.model.mlp == scenario::Mlp::swiglu && !mla;
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
    layer_norm_backward(k, p, x);
    return;
  }
  if (rope) rotary(k, p, x, true);
  k.fp8_cast("qkv-grad-cast", x.T * static_cast<double>(qkv), false);
  k.linear("qkv-dgrad", x.Ti, x.hi, qkv);
  k.linear_wgrad("qkv-wgrad", qkv, x.hi, x.Ti);
  if (p.biases) k.memory("bias-grad", x.T * static_cast<double>(qkv) * x.e);
  layer_norm_backward(k, p, x);
}

}  // namespace detail

}  // namespace parasim::workload
