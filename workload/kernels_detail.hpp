// What the kernel lists of workload/kernels*.cpp share: the list builder with the plan's
// element sizes, a layer's dimensions on one rank, each family's pieces of a layer
// (attention, MLP, the norms and residual adds both halves use, the latent attention's and
// the mixture of experts'), which kernels.cpp assembles into a layer's lists.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "workload/kernels.hpp"

namespace parasim::workload::detail {

// Builds a kernel list with the plan's element sizes.
class Emit {
 public:
  explicit Emit(const KernelPlan& p) : p_(p) {}

  void gemm(std::string_view name, long long m, long long n, long long k, long long batch = 1) {
    out_.push_back({KernelKind::gemm, name, m, n, k, batch, p_.element, 0, 0.0, false});
  }
  // A weight gradient, accumulated into the main gradient: by the GEMM itself (Megatron's
  // gradient accumulation fusion) or by the framework's kernels after it
  // (KernelPlan::fused_grad_accumulation(), accumulate_kernels).
  void wgrad(std::string_view name, long long m, long long n, long long k, long long batch = 1, bool fp8 = false) {
    const bool fused = p_.fused_grad_accumulation();
    out_.push_back({KernelKind::gemm, name, m, n, k, batch, p_.element, fused ? p_.grad_element : 0, 0.0, false});
    out_.back().fp8 = fp8;
    if (!fused) accumulate_kernels(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(batch));
  }
  // The kernels a framework without the fusion runs to add a micro-batch's weight gradient
  // of `elements` values into what earlier micro-batches left (accumulate_bytes).
  void accumulate_kernels(double elements) {
    for (const auto& [name, bytes] : accumulate_bytes(p_)) {
      if (bytes > 0.0) memory(name, bytes * elements);
    }
  }
  // The local experts' GEMMs, grouped (one per expert, `batch` of them).
  void expert(std::string_view name, long long m, long long n, long long k, long long batch) {
    gemm(name, m, n, k, batch);
    out_.back().fp8 = p_.fp8;
  }
  void expert_wgrad(std::string_view name, long long m, long long n, long long k, long long batch) {
    wgrad(name, m, n, k, batch, p_.fp8);
  }
  // A transformer linear layer's GEMM (its forward, data gradient or weight gradient): in
  // FP8 under fp8 precision, as Transformer Engine runs them.
  void linear(std::string_view name, long long m, long long n, long long k) {
    gemm(name, m, n, k);
    out_.back().fp8 = p_.fp8;
  }
  void linear_wgrad(std::string_view name, long long m, long long n, long long k) {
    wgrad(name, m, n, k, 1, p_.fp8);
  }
  // fp8: a cast of `elements` 16-bit values to FP8 in both layouts (TE's cast-transpose:
  // 2 bytes read, 1 + 1 written), after an amax pass over them under current scaling.
  // Casts TE fuses into the kernel before (a layer norm, the activation) cost only that pass.
  void fp8_cast(std::string_view name, double elements, bool fused) {
    if (!p_.fp8) return;
    if (p_.fp8_current) memory("fp8-amax", 2.0 * elements);
    if (!fused) memory(name, 4.0 * elements);
  }
  void memory(std::string_view name, double bytes) {
    out_.push_back({KernelKind::memory, name, 0, 0, 0, 1, p_.element, 0, bytes, false});
  }
  // FlashAttention over `m` queries and `n` keys (causal: the lower triangle only).
  void flash(bool backward, long long m, long long n, long long d, long long batch, bool causal) {
    out_.push_back({backward ? KernelKind::flash_backward : KernelKind::flash_forward,
                    backward ? "flash-attention-bwd" : "flash-attention", m, n, d, batch, p_.element, 0, 0.0, causal});
    out_.back().v1 = p_.flash_v1;
    out_.back().v2 = p_.flash_v2;
  }
  std::vector<Kernel> take() {
    std::vector<Kernel> out = std::move(out_);
    out_.clear();
    return out;
  }

 private:
  const KernelPlan& p_;
  std::vector<Kernel> out_;
};

// Element size, tokens (this rank's; Tl its sequence-parallel share), hidden, the query's
// and keys' columns per tp rank, the MLP width, s² per head and batch; under MLA (and
// equal to d otherwise) the query/key and value head widths dqk and dv, the queries' and
// keys' columns (qw, kw) and the attention output's (o).
struct Dims {
  double e, T, Tl, h, q, kv, f, A, s, d, heads, qw, kw, o;
  long long Ti, hi, qi, kvi, fi, si, di, bh, dqk, dvi, oi;
};

Dims dims_of(const KernelPlan& p);  // kernels.cpp

// The attention half (kernels_attention.cpp): the core alone (the attention of the
// queries against the keys, what context parallelism runs per block), and the whole half.
// FlashAttention's kernels take one head width: under MLA the mean of the query/key and
// value widths, which gives the forward's FLOPs exactly.
long long flash_head_dim(const Dims& x);
void attention_core_forward(Emit& k, const KernelPlan& p, const Dims& x);
void attention_forward(Emit& k, const KernelPlan& p, const Dims& x);
void attention_backward(Emit& k, const KernelPlan& p, const Dims& x);

// The MLP half (kernels_mlp.cpp; a mixture of experts' through the MoE pieces below).
void mlp_forward(Emit& k, const KernelPlan& p, const Dims& x);
void mlp_backward(Emit& k, const KernelPlan& p, const Dims& x);

// The norms and residual adds both halves use (kernels_norms.cpp).
void residual_forward(Emit& k, const KernelPlan& p, const Dims& x);
void residual_backward(Emit& k, const KernelPlan& p, const Dims& x);
void norm_forward(Emit& k, const KernelPlan& p, const Dims& x);
void layer_norm_backward(Emit& k, const KernelPlan& p, const Dims& x);
void rotary(Emit& k, const KernelPlan& p, const Dims& x, bool backward);

// Multi-head latent attention's projections in, forward and backward (kernels_moe.cpp).
void mla_in_forward(Emit& k, const KernelPlan& p, const Dims& x);
void mla_in_backward(Emit& k, const KernelPlan& p, const Dims& x);

// A mixture of experts' MLP (kernels_moe.cpp): the router, permutation and (with tp = 1)
// the shared experts; the local experts; the unpermutation and the router's backward.
void shared_experts(Emit& k, const KernelPlan& p, const Dims& x, bool backward);
void moe_prepare(Emit& k, const KernelPlan& p, const Dims& x, bool backward);
void moe_experts(Emit& k, const KernelPlan& p, const Dims& x, bool backward);
void moe_finish(Emit& k, const KernelPlan& p, const Dims& x, bool backward);

}  // namespace parasim::workload::detail
