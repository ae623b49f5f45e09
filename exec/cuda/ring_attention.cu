// Ring attention (context parallelism) on CUDA cores: exec/model/ring_attention.hpp is the
// reference and fixes the layouts. As attention.cu: a warp per row, lane l holding
// elements l, l + 32, ... of a head's d (at most 256). The forward merges one block of keys
// and values into a query row's running output, maximum and sum; the backward recomputes
// each probability from q, k and the row's log-sum-exp, dq a warp per query row, dk and dv
// a warp per key row (nothing summed across warps: deterministic). A key counts for a query
// when its position is not after the query's (the positions on the device).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/cuda/warp.cuh"

namespace parasim::exec::cuda {
namespace {

// A warp's row: row `pos` of head `hi` of sequence `bi`, of `rows` per sequence.
struct Row : Lanes {
  int rows, h, pos = 0, hi = 0, bi = 0;
  bool valid = false;
  __device__ Row(int b, int rows_, int h_, int d_) : rows(rows_), h(h_) {
    d = d_;
    lane = static_cast<int>(threadIdx.x % 32);
    const std::int64_t r = warp_row();
    valid = r < static_cast<std::int64_t>(b) * h * rows;
    pos = static_cast<int>(r % rows);
    hi = static_cast<int>(r / rows % h);
    bi = static_cast<int>(r / rows / h);
  }
  // Element 0 of this head in row `row` of a [b, n, parts, h, d] tensor, part `part`.
  __device__ std::int64_t at(int n, int parts, int row, int part) const {
    return (static_cast<std::int64_t>(bi) * n + row) * parts * h * d + static_cast<std::int64_t>(part) * h * d +
           static_cast<std::int64_t>(hi) * d;
  }
  __device__ std::int64_t stat(int n, int row) const { return (static_cast<std::int64_t>(bi) * h + hi) * n + row; }
};

__global__ void begin_kernel(float* m, std::int64_t rows) {
  PARASIM_FOR_EACH(i, rows) m[i] = -INFINITY;
}

__global__ void forward_block_kernel(float* acc, float* m, float* l, const float* qkv, const float* kv, const int* qpos,
                                     const int* kpos, int b, int tq, int tk, int h, int d, float scale) {
  const Row w(b, tq, h, d);
  if (!w.valid) return;
  const int i = w.pos;
  float q[per_lane], a[per_lane];
  w.load(q, qkv + w.at(tq, 3, i, 0));
  float* out = acc + w.at(tq, 1, i, 0);
  w.load(a, out);
  float mi = m[w.stat(tq, i)], li = l[w.stat(tq, i)];
  for (int j = 0; j < tk; ++j) {
    if (kpos[j] > qpos[i]) continue;
    const float s = w.dot(q, kv + w.at(tk, 2, j, 0)) * scale;
    const float m_new = fmaxf(mi, s);
    const float correction = expf(mi - m_new);
    const float p = expf(s - m_new);
    li = li * correction + p;
#pragma unroll
    for (int k = 0; k < per_lane; ++k) a[k] *= correction;
    w.add_scaled(a, p, kv + w.at(tk, 2, j, 1));
    mi = m_new;
  }
  w.store(out, a);
  if (w.lane == 0) {
    m[w.stat(tq, i)] = mi;
    l[w.stat(tq, i)] = li;
  }
}

__global__ void end_kernel(float* out, float* lse, const float* acc, const float* m, const float* l, int b, int tq,
                           int h, int d) {
  PARASIM_FOR_EACH(e, static_cast<std::int64_t>(b) * tq * h * d) {
    const std::int64_t row = e / d;  // (bi, i, hi)
    const std::int64_t hi = row % h, i = row / h % tq, bi = row / h / tq;
    const std::int64_t s = (bi * h + hi) * tq + i;
    out[e] = acc[e] / l[s];
    if (e % d == 0) lse[s] = m[s] + logf(l[s]);
  }
}

// dq_i += scale sum_j ds_ij k_j over the block's keys, ds_ij = p_ij (dO_i . v_j - dO_i . O_i).
__global__ void backward_dq_kernel(float* dqkv, const float* dout, const float* out, const float* qkv, const float* kv,
                                   const float* lse, const int* qpos, const int* kpos, int b, int tq, int tk, int h,
                                   int d, float scale) {
  const Row w(b, tq, h, d);
  if (!w.valid) return;
  const int i = w.pos;
  float q[per_lane], go[per_lane], dq[per_lane];
  w.load(q, qkv + w.at(tq, 3, i, 0));
  w.load(go, dout + w.at(tq, 1, i, 0));
  w.load(dq, dqkv + w.at(tq, 3, i, 0));
  const float delta = w.dot(go, out + w.at(tq, 1, i, 0));
  const float li = lse[w.stat(tq, i)];
  for (int j = 0; j < tk; ++j) {
    if (kpos[j] > qpos[i]) continue;
    const float* k = kv + w.at(tk, 2, j, 0);
    const float p = expf(scale * w.dot(q, k) - li);
    const float ds = p * (w.dot(go, kv + w.at(tk, 2, j, 1)) - delta);
    w.add_scaled(dq, scale * ds, k);
  }
  w.store(dqkv + w.at(tq, 3, i, 0), dq);
}

// dk_j += scale sum_i ds_ij q_i, dv_j += sum_i p_ij dO_i over this rank's queries.
__global__ void backward_dkdv_kernel(float* dkv, const float* dout, const float* out, const float* qkv, const float* kv,
                                     const float* lse, const int* qpos, const int* kpos, int b, int tq, int tk, int h,
                                     int d, float scale) {
  const Row w(b, tk, h, d);
  if (!w.valid) return;
  const int j = w.pos;
  float k[per_lane], v[per_lane], dk[per_lane], dv[per_lane];
  w.load(k, kv + w.at(tk, 2, j, 0));
  w.load(v, kv + w.at(tk, 2, j, 1));
  w.load(dk, dkv + w.at(tk, 2, j, 0));
  w.load(dv, dkv + w.at(tk, 2, j, 1));
  for (int i = 0; i < tq; ++i) {
    if (kpos[j] > qpos[i]) continue;
    const float* go = dout + w.at(tq, 1, i, 0);
    float gor[per_lane];
    w.load(gor, go);
    const float delta = w.dot(gor, out + w.at(tq, 1, i, 0));
    const float* q = qkv + w.at(tq, 3, i, 0);
    const float p = expf(scale * w.dot(k, q) - lse[w.stat(tq, i)]);
    const float ds = p * (w.dot(v, go) - delta);
    w.add_scaled(dk, scale * ds, q);
#pragma unroll
    for (int x = 0; x < per_lane; ++x) dv[x] += p * gor[x];
  }
  w.store(dkv + w.at(tk, 2, j, 0), dk);
  w.store(dkv + w.at(tk, 2, j, 1), dv);
}

__global__ void kv_pack_kernel(float* kv, const float* qkv, std::int64_t rows, int c) {
  PARASIM_FOR_EACH(e, rows * 2 * c) {
    const std::int64_t r = e / (2 * c);
    kv[e] = qkv[r * 3 * c + c + e % (2 * c)];
  }
}

__global__ void kv_unpack_add_kernel(float* dqkv, const float* dkv, std::int64_t rows, int c) {
  PARASIM_FOR_EACH(e, rows * 2 * c) {
    const std::int64_t r = e / (2 * c);
    dqkv[r * 3 * c + c + e % (2 * c)] += dkv[e];
  }
}

void check_head(int d) {
  if (d > 32 * per_lane) throw std::invalid_argument("ring attention: head size above 256");
}

}  // namespace

void kv_pack(cudaStream_t s, float* kv, const float* qkv, std::int64_t rows, int c) {
  if (rows <= 0) return;
  kv_pack_kernel<<<blocks_for(rows * 2 * c), threads, 0, s>>>(kv, qkv, rows, c);
  check_launch("kv_pack");
}

void kv_unpack_add(cudaStream_t s, float* dqkv, const float* dkv, std::int64_t rows, int c) {
  if (rows <= 0) return;
  kv_unpack_add_kernel<<<blocks_for(rows * 2 * c), threads, 0, s>>>(dqkv, dkv, rows, c);
  check_launch("kv_unpack_add");
}

void ring_attention_begin(cudaStream_t s, float* acc, float* m, float* l, int b, int tq, int h, int d) {
  const std::int64_t rows = static_cast<std::int64_t>(b) * h * tq;
  if (rows == 0) return;
  if (cudaMemsetAsync(acc, 0, static_cast<std::size_t>(rows) * d * sizeof(float), s) != cudaSuccess ||
      cudaMemsetAsync(l, 0, static_cast<std::size_t>(rows) * sizeof(float), s) != cudaSuccess) {
    throw std::runtime_error("CUDA: memset failed");
  }
  begin_kernel<<<blocks_for(rows), threads, 0, s>>>(m, rows);
  check_launch("ring_attention_begin");
}

void ring_attention_block(cudaStream_t s, float* acc, float* m, float* l, const float* qkv, const float* kv,
                          const int* qpos, const int* kpos, int b, int tq, int tk, int h, int d) {
  check_head(d);
  const std::int64_t rows = static_cast<std::int64_t>(b) * h * tq;
  if (rows == 0 || tk == 0) return;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  forward_block_kernel<<<blocks_for_rows(rows), 32 * warps_per_block, 0, s>>>(acc, m, l, qkv, kv, qpos, kpos, b, tq,
                                                                              tk, h, d, scale);
  check_launch("ring_attention_block");
}

void ring_attention_end(cudaStream_t s, float* out, float* lse, const float* acc, const float* m, const float* l, int b,
                        int tq, int h, int d) {
  const std::int64_t count = static_cast<std::int64_t>(b) * tq * h * d;
  if (count == 0) return;
  end_kernel<<<blocks_for(count), threads, 0, s>>>(out, lse, acc, m, l, b, tq, h, d);
  check_launch("ring_attention_end");
}

void ring_attention_block_backward(cudaStream_t s, float* dqkv, float* dkv, const float* dout, const float* out,
                                   const float* qkv, const float* kv, const float* lse, const int* qpos,
                                   const int* kpos, int b, int tq, int tk, int h, int d) {
  check_head(d);
  if (static_cast<std::int64_t>(b) * h * tq * tk == 0) return;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  backward_dq_kernel<<<blocks_for_rows(static_cast<std::int64_t>(b) * h * tq), 32 * warps_per_block, 0, s>>>(
      dqkv, dout, out, qkv, kv, lse, qpos, kpos, b, tq, tk, h, d, scale);
  backward_dkdv_kernel<<<blocks_for_rows(static_cast<std::int64_t>(b) * h * tk), 32 * warps_per_block, 0, s>>>(
      dkv, dout, out, qkv, kv, lse, qpos, kpos, b, tq, tk, h, d, scale);
  check_launch("ring_attention_block_backward");
}

}  // namespace parasim::exec::cuda
