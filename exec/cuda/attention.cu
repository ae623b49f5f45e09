// FlashAttention's algorithm on CUDA cores (kernels::flash_attention_* is the reference): a
// warp per row, lane l holding elements l, l + 32, ... of a head's d (at most 256, 8 each).
// The forward walks a query row's keys with a running maximum and sum; the backward
// recomputes each probability from q, k and the row's log-sum-exp, dq a warp per query row,
// dk and dv a warp per key row, so nothing is summed across warps: deterministic.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/cuda/warp.cuh"

namespace parasim::exec::cuda {
namespace {

// The row this warp serves: position `pos` of head `hi` of sequence `bi`, and where the
// rows of qkv [b, t, 3, h, d] and of out / dout [b, t, h, d] lie.
struct WarpRow : Lanes {
  int t, h;
  int pos = 0, hi = 0, bi = 0;
  bool valid = false;

  __device__ WarpRow(int b, int t_, int h_, int d_) : t(t_), h(h_) {
    d = d_;
    lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t row = warp_row();
    valid = row < static_cast<std::int64_t>(b) * h * t;
    pos = static_cast<int>(row % t);
    hi = static_cast<int>(row / t % h);
    bi = static_cast<int>(row / t / h);
  }
  __device__ std::int64_t qkv(int at, int part) const {
    return (static_cast<std::int64_t>(bi) * t + at) * 3 * h * d + static_cast<std::int64_t>(part) * h * d +
           static_cast<std::int64_t>(hi) * d;
  }
  __device__ std::int64_t out(int at) const {
    return (static_cast<std::int64_t>(bi) * t + at) * h * d + static_cast<std::int64_t>(hi) * d;
  }
  __device__ std::int64_t lse(int at) const { return (static_cast<std::int64_t>(bi) * h + hi) * t + at; }
};

__global__ void flash_forward_kernel(float* out, float* lse, const float* qkv, int b, int t, int h, int d, float scale) {
  const WarpRow w(b, t, h, d);
  if (!w.valid) return;
  const int i = w.pos;
  float q[per_lane], acc[per_lane] = {};
  w.load(q, qkv + w.qkv(i, 0));
  float m = -INFINITY, l = 0.0F;
  for (int j = 0; j <= i; ++j) {
    const float s = w.dot(q, qkv + w.qkv(j, 1)) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int k = 0; k < per_lane; ++k) acc[k] *= correction;
    w.add_scaled(acc, p, qkv + w.qkv(j, 2));
    m = m_new;
  }
#pragma unroll
  for (int k = 0; k < per_lane; ++k) acc[k] /= l;
  w.store(out + w.out(i), acc);
  if (w.lane == 0) lse[w.lse(i)] = m + logf(l);
}

// dq_i = scale sum_{j <= i} ds_ij k_j, ds_ij = p_ij (dO_i . v_j - dO_i . O_i).
__global__ void flash_backward_dq_kernel(float* dqkv, const float* dout, const float* out, const float* qkv,
                                         const float* lse, int b, int t, int h, int d, float scale) {
  const WarpRow w(b, t, h, d);
  if (!w.valid) return;
  const int i = w.pos;
  float q[per_lane], go[per_lane], dq[per_lane] = {};
  w.load(q, qkv + w.qkv(i, 0));
  w.load(go, dout + w.out(i));
  const float delta = w.dot(go, out + w.out(i));
  const float li = lse[w.lse(i)];
  for (int j = 0; j <= i; ++j) {
    const float* k = qkv + w.qkv(j, 1);
    const float p = expf(scale * w.dot(q, k) - li);
    const float ds = p * (w.dot(go, qkv + w.qkv(j, 2)) - delta);
    w.add_scaled(dq, scale * ds, k);
  }
  w.store(dqkv + w.qkv(i, 0), dq);
}

// dk_j = scale sum_{i >= j} ds_ij q_i, dv_j = sum_{i >= j} p_ij dO_i.
__global__ void flash_backward_dkdv_kernel(float* dqkv, const float* dout, const float* out, const float* qkv,
                                           const float* lse, int b, int t, int h, int d, float scale) {
  const WarpRow w(b, t, h, d);
  if (!w.valid) return;
  const int j = w.pos;
  float k[per_lane], v[per_lane], dk[per_lane] = {}, dv[per_lane] = {};
  w.load(k, qkv + w.qkv(j, 1));
  w.load(v, qkv + w.qkv(j, 2));
  for (int i = j; i < t; ++i) {
    const float* go = dout + w.out(i);
    float gor[per_lane];
    w.load(gor, go);
    const float delta = w.dot(gor, out + w.out(i));
    const float p = expf(scale * w.dot(k, qkv + w.qkv(i, 0)) - lse[w.lse(i)]);
    const float ds = p * (w.dot(v, go) - delta);
    w.add_scaled(dk, scale * ds, qkv + w.qkv(i, 0));
#pragma unroll
    for (int x = 0; x < per_lane; ++x) dv[x] += p * gor[x];
  }
  w.store(dqkv + w.qkv(j, 1), dk);
  w.store(dqkv + w.qkv(j, 2), dv);
}

}  // namespace

void flash_attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h, int d) {
  if (d > 32 * per_lane) throw std::invalid_argument("flash attention: head size above 256");
  const std::int64_t rows = static_cast<std::int64_t>(b) * h * t;
  if (rows == 0) return;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  flash_forward_kernel<<<blocks_for_rows(rows), 32 * warps_per_block, 0, s>>>(out, lse, qkv, b, t, h, d, scale);
  check_launch("flash_attention_forward");
}

void flash_attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* out, const float* qkv,
                              const float* lse, int b, int t, int h, int d) {
  if (d > 32 * per_lane) throw std::invalid_argument("flash attention: head size above 256");
  const std::int64_t rows = static_cast<std::int64_t>(b) * h * t;
  if (rows == 0) return;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  const unsigned blocks = blocks_for_rows(rows);
  flash_backward_dq_kernel<<<blocks, 32 * warps_per_block, 0, s>>>(dqkv, dout, out, qkv, lse, b, t, h, d, scale);
  flash_backward_dkdv_kernel<<<blocks, 32 * warps_per_block, 0, s>>>(dqkv, dout, out, qkv, lse, b, t, h, d, scale);
  check_launch("flash_attention_backward");
}

}  // namespace parasim::exec::cuda
