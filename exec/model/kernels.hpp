// Host kernels of the GPT decoder: the reference every backend is checked against.
//
// Row-major throughout. N is the number of token positions (batch x sequence), C the
// width of a row. Each forward kernel has its backward, which *adds* into the gradients
// of its inputs (so a tensor used twice, like a residual stream, accumulates), except
// where it says it writes. Templated on the element type: float for training, double for
// the tests' finite-difference checks. The GEMM uses CBLAS when the build has it
// (PARASIM_HAVE_CBLAS), else a plain loop.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace parasim::exec::kernels {

// exp(x) for x <= 0 in float (below -87 it gives exp(-87), about 1.6e-38): Cephes' range
// reduction x = n ln 2 + r and degree-6 polynomial for exp(r), 2^n from the exponent bits;
// relative error about 2e-7. Unlike libm's it has no branches or calls, so loops over it
// vectorize. The float kernels' softmaxes and GELU use it; double keeps std::exp.
inline float fast_exp_nonpositive(float x) {
  x = x > -87.0F ? x : -87.0F;
  // Round to nearest by adding and taking away 1.5 * 2^23 (no libm call).
  const float n = (x * 1.44269504088896341F + 12582912.0F) - 12582912.0F;
  float r = x - n * 0.693359375F;
  r -= n * -2.12194440e-4F;
  float p = 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  const float e = p * r * r + r + 1.0F;
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

// Sum of f(x[i]) and maximum of n floats in eight interleaved lanes (a fixed order, so the
// same inputs give the same result, and one the compiler can vectorize).
template <class F>
float lane_sum(const float* x, std::int64_t n, F f) {
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += f(x[i + k]);
  }
  for (; i < n; ++i) acc[0] += f(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
inline float lane_sum(const float* x, std::int64_t n) {
  return lane_sum(x, n, [](float v) { return v; });
}
inline float lane_max(const float* x, std::int64_t n) {
  float acc[8];
  for (float& a : acc) a = -3.4028235e38F;
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] = acc[k] > x[i + k] ? acc[k] : x[i + k];
  }
  for (; i < n; ++i) acc[0] = acc[0] > x[i] ? acc[0] : x[i];
  float m = acc[0];
  for (float a : acc) m = m > a ? m : a;
  return m;
}

// C = alpha op(A) op(B) + beta C; op(A) is M x K, op(B) K x N, C M x N (row-major, dense).
template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta, T* c);

// out[N x C] = x @ w[C x OC] + bias (bias may be null).
template <class T>
void linear_forward(T* out, const T* x, const T* w, const T* bias, int n, int c, int oc);
// dx += dout @ w^T, dw += x^T @ dout, dbias += column sums of dout (dbias may be null).
template <class T>
void linear_backward(T* dx, T* dw, T* dbias, const T* dout, const T* x, const T* w, int n, int c, int oc);

// y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per row; writes mean and rstd per row.
template <class T>
void layer_norm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int n, int c);
template <class T>
void layer_norm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                         const T* gamma, int n, int c);

// GELU, tanh approximation (as GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
void gelu_forward(T* y, const T* x, std::int64_t count);
template <class T>
void gelu_backward(T* dx, const T* x, const T* dy, std::int64_t count);

// Causal multi-head attention over qkv [B, T, 3, H, D] (q, k, v of each position side by
// side, as one QKV GEMM writes them): out [B, T, H, D]. Writes the softmax
// probabilities att [B, H, T, T] (zero above the diagonal) for the backward.
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int b, int t, int h, int d);
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int b, int t, int h, int d);

// The same attention as FlashAttention computes it: per query row the keys in order with a
// running maximum and sum (the online softmax), so no T x T tensor is kept; lse [B, H, T]
// holds each row's log-sum-exp of the scaled scores. The backward recomputes each
// probability from q, k and lse and writes every entry of dqkv: dq row by row over its keys,
// dk and dv key by key over their queries (no accumulation across threads: deterministic).
template <class T>
void flash_attention_forward(T* out, T* lse, const T* qkv, int b, int t, int h, int d);
template <class T>
void flash_attention_backward(T* dqkv, const T* dout, const T* out, const T* qkv, const T* lse, int b, int t, int h,
                              int d);

// x[N x C] = wte[token] + wpe[position]; positions run 0..T-1 within each of B sequences.
template <class T>
void embedding_forward(T* x, const std::int32_t* tokens, const T* wte, const T* wpe, int b, int t, int c);
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dx, const std::int32_t* tokens, int b, int t, int c);

// Mean cross-entropy of logits [N x V] against targets; writes dlogits = (softmax -
// onehot) / N (not accumulated). Returns the loss.
template <class T>
T cross_entropy(T* dlogits, const T* logits, const std::int32_t* targets, int n, int v);

// The GEMM-equivalent layers of generic models (generic.hpp) --------------------------------

// Nearest-neighbour stretch of nx values to ny: y[i] = x[floor(i·nx / ny)], so the j-th
// of nx values fills the j-th of nx equal stretches of y (repeated when ny > nx, sampled
// when ny < nx); through a ReLU, max(x, 0), when `relu` is set. Its backward writes each
// value's gradient, the sum of the dy it was stretched over: dx[j] = Σ dy[i] over the i
// with floor(i·nx / ny) = j (a contiguous run), or 0 where relu_input[j] <= 0 when the
// forward went through a ReLU of relu_input (nullptr: none).
template <class T>
void resample_forward(T* y, std::int64_t ny, const T* x, std::int64_t nx, bool relu);
template <class T>
void resample_backward(T* dx, std::int64_t nx, const T* dy, std::int64_t ny, const T* relu_input);

// y[i] += bias[i mod nb]; dbias[j] += Σ dy[i] over the i ≡ j (mod nb).
template <class T>
void add_cyclic(T* y, std::int64_t count, const T* bias, std::int64_t nb);
// Device::moe_permute / moe_unpermute on the host (positions as whole floats).
template <class T>
void moe_permute(T* y, const T* x, const T* pos, const T* scale, int n, int k, int c);
template <class T>
void moe_unpermute(T* y, const T* x, const T* pos, const T* scale, int n, int k, int c, bool accumulate);
template <class T>
void cyclic_backward(T* dbias, std::int64_t nb, const T* dy, std::int64_t count);

// One AdamW step over `count` parameters (bias-corrected, decoupled weight decay);
// `step` counts from 1.
struct AdamW {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
};
template <class T>
void adamw(T* param, const T* grad, T* m, T* v, std::int64_t count, const AdamW& h, int step);

}  // namespace parasim::exec::kernels
