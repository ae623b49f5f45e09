#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/cuda/rounding.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace parasim::exec::cuda {
namespace {

// A reduction over a block (blockDim.x a multiple of 32, at most 1024): through each warp's
// shuffles, then the warps' results in the first warp.
template <class Op>
__device__ float block_reduce(float v, float identity, Op op) {
  __shared__ float warp[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffU, v, o));
  const int lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) warp[threadIdx.x / 32] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? warp[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffU, v, o));
  return v;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ float block_sum(float v) { return block_reduce(v, 0.0F, Add{}); }
__device__ float block_max(float v) { return block_reduce(v, -INFINITY, Max{}); }

// --- layer norm ----------------------------------------------------------------------------

__global__ void layer_norm_forward_kernel(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                          const float* beta, int c) {
  const std::int64_t row = blockIdx.x;
  const float* xi = x + row * c;
  float s = 0.0F;
  for (int j = threadIdx.x; j < c; j += blockDim.x) s += xi[j];
  const float m = block_sum(s) / static_cast<float>(c);
  float v = 0.0F;
  for (int j = threadIdx.x; j < c; j += blockDim.x) v += (xi[j] - m) * (xi[j] - m);
  const float r = rsqrtf(block_sum(v) / static_cast<float>(c) + 1e-5F);
  float* yi = y + row * c;
  for (int j = threadIdx.x; j < c; j += blockDim.x) yi[j] = (xi[j] - m) * r * gamma[j] + beta[j];
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

__global__ void layer_norm_backward_dx_kernel(float* dx, const float* dy, const float* x, const float* mean,
                                              const float* rstd, const float* gamma, int c) {
  const std::int64_t row = blockIdx.x;
  const float* dyi = dy + row * c;
  const float* xi = x + row * c;
  const float m = mean[row];
  const float r = rstd[row];
  float a = 0.0F, b = 0.0F;
  for (int j = threadIdx.x; j < c; j += blockDim.x) {
    const float dnorm = dyi[j] * gamma[j];
    a += dnorm;
    b += dnorm * (xi[j] - m) * r;
  }
  const float dnorm_mean = block_sum(a) / static_cast<float>(c);
  const float dnorm_norm_mean = block_sum(b) / static_cast<float>(c);
  float* dxi = dx + row * c;
  for (int j = threadIdx.x; j < c; j += blockDim.x) {
    const float norm = (xi[j] - m) * r;
    dxi[j] += r * (dyi[j] * gamma[j] - dnorm_mean - norm * dnorm_norm_mean);
  }
}

// Column sums of n x c row-major terms, 32 columns per block of 32 x 32 threads: thread
// (x, y) adds rows y, y + 32, ... of column 32·block + x, so each warp reads 32 neighbouring
// floats of a row (coalesced) and every block streams its own columns; then the block adds
// its 32 partial sums of each column in row order. Deterministic: the same order every run.
// `term(i, j, a, b)` adds row i, column j's two terms to a and b (b unused by one-sum terms).
constexpr int column_tile = 32;

template <class Term>
__global__ void column_sums_kernel(float* dst_a, float* dst_b, int n, int c, Term term) {
  __shared__ float part_a[column_tile][column_tile + 1];
  __shared__ float part_b[column_tile][column_tile + 1];
  const int j = blockIdx.x * column_tile + threadIdx.x;
  float a = 0.0F, b = 0.0F;
  if (j < c) {
    for (int i = threadIdx.y; i < n; i += column_tile) term(i, j, a, b);
  }
  part_a[threadIdx.y][threadIdx.x] = a;
  part_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || j >= c) return;
  a = 0.0F;
  b = 0.0F;
  for (int y = 0; y < column_tile; ++y) {
    a += part_a[y][threadIdx.x];
    b += part_b[y][threadIdx.x];
  }
  dst_a[j] += a;
  if (dst_b != nullptr) dst_b[j] += b;
}

struct LayerNormParamTerms {  // dgamma += dy · x̂, dbeta += dy
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int c;
  __device__ void operator()(int i, int j, float& g, float& b) const {
    const std::int64_t at = static_cast<std::int64_t>(i) * c + j;
    const float d = dy[at];
    g += d * (x[at] - mean[i]) * rstd[i];
    b += d;
  }
};

struct ColumnTerms {  // a bias gradient: the plain column sum
  const float* src;
  int c;
  __device__ void operator()(int i, int j, float& a, float&) const { a += src[static_cast<std::int64_t>(i) * c + j]; }
};

dim3 column_grid(int c) { return dim3(static_cast<unsigned>((c + column_tile - 1) / column_tile)); }
const dim3 column_block(column_tile, column_tile);

// --- GELU -------------------------------------------------------------------------------------

__device__ float gelu_inner(float v) { return 0.7978845608028654F * (v + 0.044715F * v * v * v); }

__global__ void gelu_forward_kernel(float* y, const float* x, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) {
    const float v = x[i];
    y[i] = 0.5F * v * (1.0F + tanhf(gelu_inner(v)));
  }
}

__global__ void gelu_backward_kernel(float* dx, const float* x, const float* dy, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) {
    const float v = x[i];
    const float th = tanhf(gelu_inner(v));
    const float du = 0.7978845608028654F * (1.0F + 3.0F * 0.044715F * v * v);
    dx[i] += dy[i] * (0.5F * (1.0F + th) + 0.5F * v * (1.0F - th * th) * du);
  }
}

// The MLP's bias, rounding and GELU in one pass, each value rounded to the 16-bit format
// where stored (format 0: fp32).
__global__ void bias_gelu_forward_kernel(float* pre, float* act, const float* bias, std::int64_t count, int c,
                                         int format) {
  PARASIM_FOR_EACH(i, count) {
    const float v = round_to_format(pre[i] + bias[i % c], format);
    pre[i] = v;
    act[i] = round_to_format(0.5F * v * (1.0F + tanhf(gelu_inner(v))), format);
  }
}

// --- causal softmax ---------------------------------------------------------------------------

__global__ void causal_softmax_forward_kernel(float* p, const float* in, int t, float scale) {
  const std::int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % t);
  const float* s = in + row * t;
  float* out = p + row * t;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, s[j] * scale);
  m = block_max(m);
  float sum = 0.0F;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(s[j] * scale - m);
  const float inv = 1.0F / block_sum(sum);
  // Reads of s happen before this block's writes to out for every j (s and p may alias):
  // each j is read and written by the same thread.
  for (int j = threadIdx.x; j < t; j += blockDim.x) out[j] = j <= i ? expf(s[j] * scale - m) * inv : 0.0F;
}

__global__ void causal_softmax_backward_kernel(float* ds, const float* p, const float* dp, int t, float scale) {
  const std::int64_t row = blockIdx.x;
  const float* pr = p + row * t;
  const float* dr = dp + row * t;
  float dot = 0.0F;
  for (int j = threadIdx.x; j < t; j += blockDim.x) dot += pr[j] * dr[j];
  dot = block_sum(dot);
  float* out = ds + row * t;
  for (int j = threadIdx.x; j < t; j += blockDim.x) out[j] = scale * pr[j] * (dr[j] - dot);
}

// --- element-wise -----------------------------------------------------------------------------

__global__ void add_bias_kernel(float* out, const float* bias, std::int64_t count, int c) {
  PARASIM_FOR_EACH(i, count) out[i] += bias[i % c];
}


__global__ void add_kernel(float* y, const float* a, const float* b, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) y[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* y, const float* x, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) y[i] += x[i];
}

__global__ void scale_kernel(float* y, float alpha, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) y[i] *= alpha;
}

// --- embedding -------------------------------------------------------------------------------

__global__ void embedding_forward_kernel(float* x, const std::int32_t* tokens, const float* wte, const float* wpe,
                                         int t, int c, int v0, int vn, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) {
    const std::int64_t row = i / c;
    const int j = static_cast<int>(i % c);
    const int tok = tokens[row] - v0;
    float v = tok >= 0 && tok < vn ? wte[static_cast<std::int64_t>(tok) * c + j] : 0.0F;
    if (wpe != nullptr) v += wpe[(row % t) * c + j];
    x[i] = v;
  }
}

__global__ void embedding_backward_wte_kernel(float* dwte, const float* dx, const std::int32_t* tokens, int c, int v0,
                                              int vn, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) {
    const std::int64_t row = i / c;
    const int tok = tokens[row] - v0;
    if (tok >= 0 && tok < vn) atomicAdd(dwte + static_cast<std::int64_t>(tok) * c + i % c, dx[i]);
  }
}

// dwpe[pos][j] += Σ over the b sequences of dx at that position: one thread per (pos, j).
__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dx, int b, int t, int c) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::int64_t>(t) * c) return;
  float s = 0.0F;
  for (int bi = 0; bi < b; ++bi) s += dx[static_cast<std::int64_t>(bi) * t * c + i];
  dwpe[i] += s;
}

// --- cross-entropy ----------------------------------------------------------------------------

__global__ void cross_entropy_stats_kernel(float* stats, const float* logits, const std::int32_t* targets, int vn,
                                           int v0) {
  const std::int64_t row = blockIdx.x;
  const float* l = logits + row * vn;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < vn; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m);
  float s = 0.0F;
  for (int j = threadIdx.x; j < vn; j += blockDim.x) s += expf(l[j] - m);
  s = block_sum(s);
  if (threadIdx.x == 0) {
    const int tgt = targets[row] - v0;
    stats[3 * row] = m;
    stats[3 * row + 1] = s;
    stats[3 * row + 2] = tgt >= 0 && tgt < vn ? l[tgt] : 0.0F;
  }
}

__global__ void cross_entropy_backward_kernel(float* dlogits, float* loss, const float* logits,
                                              const float* all_stats, int parts, const std::int32_t* targets, int n,
                                              int vn, int v0, float scale) {
  const std::int64_t row = blockIdx.x;
  float m = -INFINITY;
  float target = 0.0F;
  for (int p = 0; p < parts; ++p) {
    const float* st = all_stats + (static_cast<std::int64_t>(p) * n + row) * 3;
    m = fmaxf(m, st[0]);
    target += st[2];
  }
  float sum = 0.0F;
  for (int p = 0; p < parts; ++p) {
    const float* st = all_stats + (static_cast<std::int64_t>(p) * n + row) * 3;
    sum += st[1] * expf(st[0] - m);
  }
  if (threadIdx.x == 0) loss[row] = logf(sum) + m - target;
  const float* l = logits + row * vn;
  float* dl = dlogits + row * vn;
  const int tgt = targets[row] - v0;
  const float factor = scale / sum;
  for (int j = threadIdx.x; j < vn; j += blockDim.x) dl[j] = factor * expf(l[j] - m) - (j == tgt ? scale : 0.0F);
}

// --- generic models' GEMM equivalents ---------------------------------------------------------

// floor(a·b / c) and ceil(a·b / c) for non-negative values, exact in 128 bits.
__device__ std::int64_t mul_div_floor(std::int64_t a, std::int64_t b, std::int64_t c) {
  return static_cast<std::int64_t>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b) /
                                   static_cast<unsigned __int128>(c));
}
__device__ std::int64_t mul_div_ceil(std::int64_t a, std::int64_t b, std::int64_t c) {
  const auto num = static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b);
  return static_cast<std::int64_t>((num + static_cast<unsigned __int128>(c) - 1) / static_cast<unsigned __int128>(c));
}

__global__ void resample_forward_kernel(float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) {
  PARASIM_FOR_EACH(i, ny) {
    const float v = x[mul_div_floor(i, nx, ny)];
    y[i] = relu ? fmaxf(v, 0.0F) : v;
  }
}

__global__ void resample_backward_kernel(float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                                         const float* relu_input) {
  PARASIM_FOR_EACH(j, nx) {
    const std::int64_t b = mul_div_ceil(j, ny, nx);
    const std::int64_t e = mul_div_ceil(j + 1, ny, nx);
    float s = 0.0F;
    for (std::int64_t i = b; i < e; ++i) s += dy[i];
    dx[j] = relu_input != nullptr && !(relu_input[j] > 0.0F) ? 0.0F : s;
  }
}

__global__ void add_cyclic_kernel(float* y, std::int64_t count, const float* bias, std::int64_t nb) {
  PARASIM_FOR_EACH(i, count) y[i] += bias[i % nb];
}

// One thread per value of the output: a copy's row (permute) or a token's (unpermute,
// its copies summed in order).
__global__ void moe_permute_kernel(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) {
  PARASIM_FOR_EACH(v, static_cast<std::int64_t>(n) * k * c) {
    const std::int64_t q = v / c;
    const std::int64_t j = v % c;
    const float f = scale != nullptr ? scale[q] : 1.0F;
    y[static_cast<std::int64_t>(pos[q]) * c + j] = f * x[(q / k) * c + j];
  }
}

__global__ void moe_unpermute_kernel(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                                     bool accumulate) {
  PARASIM_FOR_EACH(v, static_cast<std::int64_t>(n) * c) {
    const std::int64_t i = v / c;
    const std::int64_t m = v % c;
    float sum = accumulate ? y[v] : 0.0F;
    for (int j = 0; j < k; ++j) {
      const std::int64_t q = i * k + j;
      sum += (scale != nullptr ? scale[q] : 1.0F) * x[static_cast<std::int64_t>(pos[q]) * c + m];
    }
    y[v] = sum;
  }
}

__global__ void cyclic_backward_kernel(float* dbias, std::int64_t nb, const float* dy, std::int64_t count) {
  PARASIM_FOR_EACH(j, nb) {
    float s = 0.0F;
    for (std::int64_t i = j; i < count; i += nb) s += dy[i];
    dbias[j] += s;
  }
}

int row_threads(int width) {
  int t = 32;
  while (t < width && t < 1024) t *= 2;
  return t;
}

}  // namespace

void layer_norm_forward(cudaStream_t s, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                        const float* beta, int n, int c) {
  if (n == 0) return;
  layer_norm_forward_kernel<<<n, row_threads(c), 0, s>>>(y, mean, rstd, x, gamma, beta, c);
  check_launch("layer_norm_forward");
}

void layer_norm_backward(cudaStream_t s, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                         const float* mean, const float* rstd, const float* gamma, int n, int c) {
  if (n == 0) return;
  layer_norm_backward_dx_kernel<<<n, row_threads(c), 0, s>>>(dx, dy, x, mean, rstd, gamma, c);
  column_sums_kernel<<<column_grid(c), column_block, 0, s>>>(dgamma, dbeta, n, c,
                                                             LayerNormParamTerms{dy, x, mean, rstd, c});
  check_launch("layer_norm_backward");
}

void gelu_forward(cudaStream_t s, float* y, const float* x, std::int64_t count) {
  gelu_forward_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, count);
  check_launch("gelu_forward");
}

void bias_gelu_forward(cudaStream_t s, float* pre, float* act, const float* bias, int n, int c, int format) {
  const std::int64_t count = static_cast<std::int64_t>(n) * c;
  if (count == 0) return;
  bias_gelu_forward_kernel<<<blocks_for(count), threads, 0, s>>>(pre, act, bias, count, c, format);
  check_launch("bias_gelu_forward");
}

void gelu_backward(cudaStream_t s, float* dx, const float* x, const float* dy, std::int64_t count) {
  gelu_backward_kernel<<<blocks_for(count), threads, 0, s>>>(dx, x, dy, count);
  check_launch("gelu_backward");
}

void causal_softmax_forward(cudaStream_t s, float* p, const float* in, int batch, int t, float scale) {
  const std::int64_t rows = static_cast<std::int64_t>(batch) * t;
  if (rows == 0) return;
  causal_softmax_forward_kernel<<<static_cast<unsigned>(rows), row_threads(t), 0, s>>>(p, in, t, scale);
  check_launch("causal_softmax_forward");
}

void causal_softmax_backward(cudaStream_t s, float* ds, const float* p, const float* dp, int batch, int t, float scale) {
  const std::int64_t rows = static_cast<std::int64_t>(batch) * t;
  if (rows == 0) return;
  causal_softmax_backward_kernel<<<static_cast<unsigned>(rows), row_threads(t), 0, s>>>(ds, p, dp, t, scale);
  check_launch("causal_softmax_backward");
}

void add_bias(cudaStream_t s, float* out, const float* bias, int n, int c) {
  const std::int64_t count = static_cast<std::int64_t>(n) * c;
  add_bias_kernel<<<blocks_for(count), threads, 0, s>>>(out, bias, count, c);
  check_launch("add_bias");
}

void bias_backward(cudaStream_t s, float* dbias, const float* dout, int n, int c) {
  if (c == 0) return;
  column_sums_kernel<<<column_grid(c), column_block, 0, s>>>(dbias, nullptr, n, c, ColumnTerms{dout, c});
  check_launch("bias_backward");
}

void add(cudaStream_t s, float* y, const float* a, const float* b, std::int64_t count) {
  add_kernel<<<blocks_for(count), threads, 0, s>>>(y, a, b, count);
  check_launch("add");
}

void accumulate(cudaStream_t s, float* y, const float* x, std::int64_t count) {
  accumulate_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, count);
  check_launch("accumulate");
}

void scale(cudaStream_t s, float* y, float alpha, std::int64_t count) {
  scale_kernel<<<blocks_for(count), threads, 0, s>>>(y, alpha, count);
  check_launch("scale");
}

void embedding_forward(cudaStream_t s, float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b,
                       int t, int c, int v0, int vn) {
  const std::int64_t count = static_cast<std::int64_t>(b) * t * c;
  embedding_forward_kernel<<<blocks_for(count), threads, 0, s>>>(x, tokens, wte, wpe, t, c, v0, vn, count);
  check_launch("embedding_forward");
}

void embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b,
                        int t, int c, int v0, int vn) {
  const std::int64_t count = static_cast<std::int64_t>(b) * t * c;
  if (dwte != nullptr) embedding_backward_wte_kernel<<<blocks_for(count), threads, 0, s>>>(dwte, dx, tokens, c, v0, vn, count);
  if (dwpe != nullptr) {
    const std::int64_t tc = static_cast<std::int64_t>(t) * c;
    embedding_backward_wpe_kernel<<<static_cast<unsigned>((tc + threads - 1) / threads), threads, 0, s>>>(dwpe, dx, b, t,
                                                                                                       c);
  }
  check_launch("embedding_backward");
}

void cross_entropy_stats(cudaStream_t s, float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                         int v0) {
  if (n == 0) return;
  cross_entropy_stats_kernel<<<n, row_threads(vn), 0, s>>>(stats, logits, targets, vn, v0);
  check_launch("cross_entropy_stats");
}

void cross_entropy_backward(cudaStream_t s, float* dlogits, float* loss, const float* logits, const float* all_stats,
                            int parts, const std::int32_t* targets, int n, int vn, int v0, float scale) {
  if (n == 0) return;
  cross_entropy_backward_kernel<<<n, row_threads(vn), 0, s>>>(dlogits, loss, logits, all_stats, parts, targets, n, vn,
                                                              v0, scale);
  check_launch("cross_entropy_backward");
}

void resample_forward(cudaStream_t s, float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) {
  resample_forward_kernel<<<blocks_for(ny), threads, 0, s>>>(y, ny, x, nx, relu);
  check_launch("resample_forward");
}

void resample_backward(cudaStream_t s, float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                       const float* relu_input) {
  resample_backward_kernel<<<blocks_for(nx), threads, 0, s>>>(dx, nx, dy, ny, relu_input);
  check_launch("resample_backward");
}

void moe_permute(cudaStream_t s, float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) {
  const std::int64_t count = static_cast<std::int64_t>(n) * k * c;
  if (count <= 0) return;
  moe_permute_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, pos, scale, n, k, c);
  check_launch("moe_permute");
}

void moe_unpermute(cudaStream_t s, float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                   bool accumulate) {
  const std::int64_t count = static_cast<std::int64_t>(n) * c;
  if (count <= 0) return;
  moe_unpermute_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, pos, scale, n, k, c, accumulate);
  check_launch("moe_unpermute");
}

void add_cyclic(cudaStream_t s, float* y, std::int64_t count, const float* bias, std::int64_t nb) {
  if (nb <= 0) return;
  add_cyclic_kernel<<<blocks_for(count), threads, 0, s>>>(y, count, bias, nb);
  check_launch("add_cyclic");
}

void cyclic_backward(cudaStream_t s, float* dbias, std::int64_t nb, const float* dy, std::int64_t count) {
  if (nb <= 0) return;
  cyclic_backward_kernel<<<blocks_for(nb), threads, 0, s>>>(dbias, nb, dy, count);
  check_launch("cyclic_backward");
}

}  // namespace parasim::exec::cuda
