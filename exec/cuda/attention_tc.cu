// FlashAttention-2 on tensor cores (exec/model/flash_tiled.hpp is the algorithm and the host
// model these kernels are tested against): bf16 or fp16 operands through WMMA's 16 x 16 x 16
// fragments with fp32 accumulation, tiles of 64 queries x 64 keys in shared memory, the key
// tiles past a query tile's diagonal skipped.
//
// A block of 4 warps serves one tile of one head of one sequence; each warp owns 16 of its
// rows. Tensors stay fp32 in global memory (the executor's storage) and are rounded to the
// 16-bit format as a tile is loaded, which is exact for what the shard already rounded.
//
//   forward   grid (query tiles, b x h). Per key tile: S = Q K^T into shared memory, the
//             online softmax on it (two lanes per row, 32 columns each), P rounded to 16 bits,
//             the warp's output rows (fp32, in shared memory, where the per-row rescaling can
//             reach them) rescaled and P V added by the tensor cores.
//   backward  delta_i = dO_i . O_i (a warp per row), then two passes, so that no value is
//             summed by two blocks and the result repeats bit for bit: per key tile (dK, dV
//             held in fragments over its query tiles) and per query tile (dQ over its key
//             tiles); each recomputes P = exp(scale S - lse) and dS = P (dP - delta).
//
// Shared memory (D = 128): 113 KiB forward, 95 KiB per backward pass, so one or two blocks
// an SM; it needs the opt-in above 48 KiB (compute capability 8.0 on). Head sizes 16, 32,
// 64, 96 and 128; any other, fp32 / tf32 operands, or an older GPU take the CUDA-core
// kernels (attention.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/cuda/warp.cuh"

namespace parasim::exec::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int tile = 64;       // queries and keys per tile (flash_tiled::tile_q, tile_k)
constexpr int frag = 16;       // WMMA's m = n = k
constexpr int tc_warps = 4;    // 16 rows each
constexpr int tc_threads = 32 * tc_warps;
constexpr int pad16 = 8;       // 16-bit rows padded by 16 bytes (WMMA wants ld % 8 == 0), against bank conflicts
constexpr int pad32 = 4;       // fp32 rows by 16 bytes
constexpr int score_ld = tile + pad32;
constexpr int prob_ld = tile + pad16;

template <class T>
__device__ inline T to16(float x);
template <>
__device__ inline __nv_bfloat16 to16<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half to16<__half>(float x) {
  return __float2half_rn(x);
}

// The shared-memory regions of a kernel, carved in order from one dynamic buffer; every
// region starts 128-byte aligned (WMMA wants 32 bytes).
struct Carver {
  unsigned char* at;
  template <class X>
  __device__ X* take(int count) {
    X* p = reinterpret_cast<X*>(at);
    at += (static_cast<std::size_t>(count) * sizeof(X) + 127) / 128 * 128;
    return p;
  }
};

__host__ __device__ constexpr std::size_t round128(std::size_t bytes) { return (bytes + 127) / 128 * 128; }

// Where head `hi` of sequence `bi` lies in qkv [b, t, 3, h, d], out / dout [b, t, h, d],
// lse / delta [b, h, t].
struct HeadAt {
  int t, h, d, bi, hi;
  __device__ std::int64_t qkv(int pos, int part) const {
    return (static_cast<std::int64_t>(bi) * t + pos) * 3 * h * d + static_cast<std::int64_t>(part) * h * d +
           static_cast<std::int64_t>(hi) * d;
  }
  __device__ std::int64_t out(int pos) const {
    return (static_cast<std::int64_t>(bi) * t + pos) * h * d + static_cast<std::int64_t>(hi) * d;
  }
  __device__ std::int64_t row(int pos) const { return (static_cast<std::int64_t>(bi) * h + hi) * t + pos; }
};

// A tile of 64 rows x D from fp32 global memory into 16-bit shared memory (row stride
// D + pad16), zeros past the sequence's end. `at(pos)` is a row's offset.
template <class T, int D, class At>
__device__ void load_tile(T* dst, const float* src, int first, int t, At at) {
  constexpr int ld = D + pad16;
  for (int idx = static_cast<int>(threadIdx.x); idx < tile * D; idx += tc_threads) {
    const int r = idx / D, e = idx % D;
    const int pos = first + r;
    dst[r * ld + e] = to16<T>(pos < t ? src[at(pos) + e] : 0.0F);
  }
}

using AccFrag = wmma::fragment<wmma::accumulator, frag, frag, frag, float>;
template <class T>
using RowA = wmma::fragment<wmma::matrix_a, frag, frag, frag, T, wmma::row_major>;
template <class T>
using RowB = wmma::fragment<wmma::matrix_b, frag, frag, frag, T, wmma::row_major>;
template <class T>
using ColB = wmma::fragment<wmma::matrix_b, frag, frag, frag, T, wmma::col_major>;

// out[16 x 64] (fp32, ld score_ld) = A[16 x D] B^T, with A's rows at `a` (ld D + pad16) and
// B's 64 rows at `b` (ld D + pad16): a score tile, S = Q K^T or dP = dO V^T.
template <class T, int D>
__device__ void rows_times_rows(float* out, const T* a, const T* b) {
  constexpr int ld = D + pad16;
#pragma unroll
  for (int n = 0; n < tile / frag; ++n) {
    AccFrag acc;
    wmma::fill_fragment(acc, 0.0F);
#pragma unroll
    for (int kk = 0; kk < D / frag; ++kk) {
      RowA<T> fa;
      ColB<T> fb;
      wmma::load_matrix_sync(fa, a + kk * frag, ld);
      wmma::load_matrix_sync(fb, b + n * frag * ld + kk * frag, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * frag, acc, score_ld, wmma::mem_row_major);
  }
}

// acc[n] += P[16 x 64] (16-bit, ld prob_ld) times the 64 x D tile at `b` (ld D + pad16).
template <class T, int D>
__device__ void probs_times_tile(AccFrag (&acc)[D / frag], const T* p, const T* b) {
  constexpr int ld = D + pad16;
#pragma unroll
  for (int kk = 0; kk < tile / frag; ++kk) {
    RowA<T> fa;
    wmma::load_matrix_sync(fa, p + kk * frag, prob_ld);
#pragma unroll
    for (int n = 0; n < D / frag; ++n) {
      RowB<T> fb;
      wmma::load_matrix_sync(fb, b + kk * frag * ld + n * frag, ld);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// A warp's 16 x D fragments, times `factor`, into 16 rows of global memory (row r at
// dst + at(first + r), rows past t left), through the warp's 16 x score_ld scratch.
template <int D, class At>
__device__ void store_rows(const AccFrag (&acc)[D / frag], float factor, float* scratch, float* dst, int first, int t,
                           At at) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int n = 0; n < D / frag; ++n) {
    wmma::store_matrix_sync(scratch, acc[n], score_ld, wmma::mem_row_major);
    __syncwarp();
    for (int idx = lane; idx < frag * frag; idx += 32) {
      const int r = idx / frag, e = idx % frag;
      if (first + r < t) dst[at(first + r) + n * frag + e] = factor * scratch[r * score_ld + e];
    }
    __syncwarp();
  }
}

template <int D>
constexpr std::size_t forward_smem(std::size_t half) {
  return 3 * round128(tile * (D + pad16) * half) + round128(tc_warps * frag * score_ld * 4) +
         round128(tc_warps * frag * prob_ld * half) + round128(tc_warps * frag * (D + pad32) * 4) + 2 * round128(tile * 4);
}

template <class T, int D>
__global__ void __launch_bounds__(tc_threads) tc_forward_kernel(float* out, float* lse, const float* qkv, int t, int h,
                                                                float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ld = D + pad16;
  constexpr int old = D + pad32;
  Carver carve{smem};
  T* q = carve.take<T>(tile * ld);
  T* k = carve.take<T>(tile * ld);
  T* v = carve.take<T>(tile * ld);
  float* scores = carve.take<float>(tc_warps * frag * score_ld);
  T* probs = carve.take<T>(tc_warps * frag * prob_ld);
  float* o = carve.take<float>(tc_warps * frag * old);
  float* row_max = carve.take<float>(tile);
  float* row_sum = carve.take<float>(tile);

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int i0 = static_cast<int>(blockIdx.x) * tile;
  const HeadAt at{t, h, D, static_cast<int>(blockIdx.y) / h, static_cast<int>(blockIdx.y) % h};
  float* s_w = scores + warp * frag * score_ld;
  T* p_w = probs + warp * frag * prob_ld;
  float* o_w = o + warp * frag * old;
  load_tile<T, D>(q, qkv, i0, t, [&](int pos) { return at.qkv(pos, 0); });
  for (int idx = lane; idx < frag * old; idx += 32) o_w[idx] = 0.0F;
  if (threadIdx.x < tile) {
    row_max[threadIdx.x] = -INFINITY;
    row_sum[threadIdx.x] = 0.0F;
  }
  // Two lanes a row: lane 2r + half holds columns [32 half, 32 half + 32) of row r.
  const int r = lane / 2, half = lane % 2;
  const int row = warp * frag + r, i = i0 + row;
  for (int j0 = 0; j0 <= i0; j0 += tile) {  // the key tiles up to the diagonal
    __syncthreads();                        // the last tile's K and V are no longer read
    load_tile<T, D>(k, qkv, j0, t, [&](int pos) { return at.qkv(pos, 1); });
    load_tile<T, D>(v, qkv, j0, t, [&](int pos) { return at.qkv(pos, 2); });
    __syncthreads();
    rows_times_rows<T, D>(s_w, q + warp * frag * ld, k);
    __syncwarp();
    float mx = -INFINITY;
    for (int c = 32 * half; c < 32 * half + 32; ++c) {
      const float s = (j0 + c <= i && j0 + c < t) ? s_w[r * score_ld + c] * scale : -INFINITY;
      s_w[r * score_ld + c] = s;
      mx = fmaxf(mx, s);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffU, mx, 1));
    const float m_old = row_max[row];
    const float m_new = fmaxf(m_old, mx);
    const bool live = m_new != -INFINITY;  // false only for rows past the sequence's end
    float sum = 0.0F;
    for (int c = 32 * half; c < 32 * half + 32; ++c) {
      const float p = live ? expf(s_w[r * score_ld + c] - m_new) : 0.0F;
      sum += p;
      p_w[r * prob_ld + c] = to16<T>(p);
    }
    sum += __shfl_xor_sync(0xffffffffU, sum, 1);
    const float correction = live ? expf(m_old - m_new) : 1.0F;
    for (int e = half * (D / 2); e < (half + 1) * (D / 2); ++e) o_w[r * old + e] *= correction;
    __syncwarp();
    if (half == 0) {
      row_sum[row] = row_sum[row] * correction + sum;
      row_max[row] = m_new;
    }
    AccFrag acc[D / frag];
#pragma unroll
    for (int n = 0; n < D / frag; ++n) wmma::load_matrix_sync(acc[n], o_w + n * frag, old, wmma::mem_row_major);
    probs_times_tile<T, D>(acc, p_w, v);
#pragma unroll
    for (int n = 0; n < D / frag; ++n) wmma::store_matrix_sync(o_w + n * frag, acc[n], old, wmma::mem_row_major);
    __syncwarp();
  }
  if (i < t) {
    const float l = row_sum[row];
    for (int e = half * (D / 2); e < (half + 1) * (D / 2); ++e) out[at.out(i) + e] = o_w[r * old + e] / l;
    if (half == 0) lse[at.row(i)] = row_max[row] + logf(l);
  }
#endif
}

// delta_i = dO_i . O_i, a warp per row (b x h x t rows, lse's layout).
__global__ void tc_delta_kernel(float* delta, const float* dout, const float* out, int b, int t, int h, int d) {
  const std::int64_t row = warp_row();
  if (row >= static_cast<std::int64_t>(b) * h * t) return;
  const int pos = static_cast<int>(row % t), hi = static_cast<int>(row / t % h), bi = static_cast<int>(row / t / h);
  const std::int64_t at = (static_cast<std::int64_t>(bi) * t + pos) * h * d + static_cast<std::int64_t>(hi) * d;
  float s = 0.0F;
  for (int e = static_cast<int>(threadIdx.x % 32); e < d; e += 32) s += dout[at + e] * out[at + e];
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) delta[row] = s;
}

template <int D>
constexpr std::size_t backward_smem(std::size_t half) {
  return 4 * round128(tile * (D + pad16) * half) + round128(tc_warps * frag * score_ld * 4) +
         round128(tc_warps * frag * prob_ld * half) + 2 * round128(tile * 4);
}

// What both backward passes hold in shared memory and where this warp's rows are: the
// block's own tile and its companion (`mine`, `mine2`: K and V for dK / dV, Q and dO for
// dQ), the other side's two tiles, this warp's scores and 16-bit products, and a query
// tile's lse and delta.
template <class T, int D>
struct BackwardBlock {
  static constexpr int ld = D + pad16;
  T *mine, *mine2, *other, *other2;
  float* s_w;
  T* p_w;
  float *lse_s, *delta_s;
  int warp, lane, first;
  HeadAt at;

  __device__ BackwardBlock(unsigned char* smem, int t, int h)
      : at{t, h, D, static_cast<int>(blockIdx.y) / h, static_cast<int>(blockIdx.y) % h} {
    Carver carve{smem};
    mine = carve.take<T>(tile * ld);
    mine2 = carve.take<T>(tile * ld);
    other = carve.take<T>(tile * ld);
    other2 = carve.take<T>(tile * ld);
    float* scores = carve.take<float>(tc_warps * frag * score_ld);
    T* probs = carve.take<T>(tc_warps * frag * prob_ld);
    lse_s = carve.take<float>(tile);
    delta_s = carve.take<float>(tile);
    warp = static_cast<int>(threadIdx.x / 32);
    lane = static_cast<int>(threadIdx.x % 32);
    first = static_cast<int>(blockIdx.x) * tile;
    s_w = scores + warp * frag * score_ld;
    p_w = probs + warp * frag * prob_ld;
  }
  // The lse and delta of the query tile from i0 (0 past the sequence's end).
  __device__ void load_row_stats(const float* lse, const float* delta, int i0) {
    if (threadIdx.x < tile) {
      const int i = i0 + static_cast<int>(threadIdx.x);
      lse_s[threadIdx.x] = i < at.t ? lse[at.row(i)] : 0.0F;
      delta_s[threadIdx.x] = i < at.t ? delta[at.row(i)] : 0.0F;
    }
  }
};

// dK and dV: a block per key tile, its warps' 16 keys each over every query tile at or after it.
template <class T, int D>
__global__ void __launch_bounds__(tc_threads) tc_dkdv_kernel(float* dqkv, const float* dout, const float* qkv,
                                                             const float* lse, const float* delta, int t, int h,
                                                             float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ld = D + pad16;
  BackwardBlock<T, D> blk(smem, t, h);
  T *k = blk.mine, *v = blk.mine2, *q = blk.other, *go = blk.other2;
  float* s_w = blk.s_w;
  T* p_w = blk.p_w;
  const float *lse_s = blk.lse_s, *delta_s = blk.delta_s;
  const int warp = blk.warp, lane = blk.lane, j0 = blk.first;
  const HeadAt& at = blk.at;
  load_tile<T, D>(k, qkv, j0, t, [&](int pos) { return at.qkv(pos, 1); });
  load_tile<T, D>(v, qkv, j0, t, [&](int pos) { return at.qkv(pos, 2); });
  AccFrag dk[D / frag], dv[D / frag];
#pragma unroll
  for (int n = 0; n < D / frag; ++n) {
    wmma::fill_fragment(dk[n], 0.0F);
    wmma::fill_fragment(dv[n], 0.0F);
  }
  const int r = lane / 2, half = lane % 2;
  const int j = j0 + warp * frag + r;  // this lane's key
  float p[32];
  for (int i0 = j0; i0 < t; i0 += tile) {
    __syncthreads();
    load_tile<T, D>(q, qkv, i0, t, [&](int pos) { return at.qkv(pos, 0); });
    load_tile<T, D>(go, dout, i0, t, [&](int pos) { return at.out(pos); });
    blk.load_row_stats(lse, delta, i0);
    __syncthreads();
    // P^T: the warp's keys (rows) against the tile's queries (columns).
    rows_times_rows<T, D>(s_w, k + warp * frag * ld, q);
    __syncwarp();
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      const int c = 32 * half + x, i = i0 + c;
      p[x] = (i >= j && i < t && j < t) ? expf(s_w[r * score_ld + c] * scale - lse_s[c]) : 0.0F;
      p_w[r * prob_ld + c] = to16<T>(p[x]);
    }
    __syncwarp();
    probs_times_tile<T, D>(dv, p_w, go);  // dV += P^T dO
    __syncwarp();
    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta).
    rows_times_rows<T, D>(s_w, v + warp * frag * ld, go);
    __syncwarp();
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      const int c = 32 * half + x;
      p_w[r * prob_ld + c] = to16<T>(p[x] * (s_w[r * score_ld + c] - delta_s[c]));
    }
    __syncwarp();
    probs_times_tile<T, D>(dk, p_w, q);  // dK += dS^T Q
    __syncwarp();
  }
  store_rows<D>(dk, scale, s_w, dqkv, j0 + warp * frag, t, [&](int pos) { return at.qkv(pos, 1); });
  store_rows<D>(dv, 1.0F, s_w, dqkv, j0 + warp * frag, t, [&](int pos) { return at.qkv(pos, 2); });
#endif
}

// dQ: a block per query tile, its warps' 16 queries each over the key tiles up to its diagonal.
template <class T, int D>
__global__ void __launch_bounds__(tc_threads) tc_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                                           const float* lse, const float* delta, int t, int h,
                                                           float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ld = D + pad16;
  BackwardBlock<T, D> blk(smem, t, h);
  T *q = blk.mine, *go = blk.mine2, *k = blk.other, *v = blk.other2;
  float* s_w = blk.s_w;
  T* p_w = blk.p_w;
  const float *lse_s = blk.lse_s, *delta_s = blk.delta_s;
  const int warp = blk.warp, lane = blk.lane, i0 = blk.first;
  const HeadAt& at = blk.at;
  load_tile<T, D>(q, qkv, i0, t, [&](int pos) { return at.qkv(pos, 0); });
  load_tile<T, D>(go, dout, i0, t, [&](int pos) { return at.out(pos); });
  blk.load_row_stats(lse, delta, i0);
  AccFrag dq[D / frag];
#pragma unroll
  for (int n = 0; n < D / frag; ++n) wmma::fill_fragment(dq[n], 0.0F);
  const int r = lane / 2, half = lane % 2;
  const int row = warp * frag + r, i = i0 + row;  // this lane's query
  float p[32];
  for (int j0 = 0; j0 <= i0; j0 += tile) {
    __syncthreads();
    load_tile<T, D>(k, qkv, j0, t, [&](int pos) { return at.qkv(pos, 1); });
    load_tile<T, D>(v, qkv, j0, t, [&](int pos) { return at.qkv(pos, 2); });
    __syncthreads();
    rows_times_rows<T, D>(s_w, q + warp * frag * ld, k);  // S
    __syncwarp();
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      const int c = 32 * half + x, j = j0 + c;
      p[x] = (j <= i && i < t && j < t) ? expf(s_w[r * score_ld + c] * scale - lse_s[row]) : 0.0F;
    }
    __syncwarp();
    rows_times_rows<T, D>(s_w, go + warp * frag * ld, v);  // dP = dO V^T
    __syncwarp();
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      const int c = 32 * half + x;
      p_w[r * prob_ld + c] = to16<T>(p[x] * (s_w[r * score_ld + c] - delta_s[row]));
    }
    __syncwarp();
    probs_times_tile<T, D>(dq, p_w, k);  // dQ += dS K
    __syncwarp();
  }
  store_rows<D>(dq, scale, s_w, dqkv, i0 + warp * frag, t, [&](int pos) { return at.qkv(pos, 0); });
#endif
}

// The GPU's limits, read once per device.
struct TcLimits {
  int capability = 0;
  std::size_t smem_optin = 0;
};

TcLimits limits() {
  int dev = 0;
  cudaGetDevice(&dev);
  static TcLimits cached[64];
  static bool known[64] = {};
  if (dev < 0 || dev >= 64) return {};
  if (!known[dev]) {
    int major = 0, minor = 0, optin = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cached[dev] = {major * 10 + minor, static_cast<std::size_t>(optin)};
    known[dev] = true;
  }
  return cached[dev];
}

// Launches the kernels of one (16-bit type, head size) pair; false when the GPU cannot.
template <class T, int D>
struct Launch {
  static std::size_t fwd_bytes() { return forward_smem<D>(sizeof(T)); }
  static std::size_t bwd_bytes() { return backward_smem<D>(sizeof(T)); }
  static bool fits() {
    const TcLimits l = limits();
    return l.capability >= 80 && fwd_bytes() <= l.smem_optin && bwd_bytes() <= l.smem_optin;
  }
  static void opt_in() {
    static bool done = false;  // per process: the attribute is the function's, on every device
    if (done) return;
    cudaFuncSetAttribute(tc_forward_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(fwd_bytes()));
    cudaFuncSetAttribute(tc_dkdv_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bwd_bytes()));
    cudaFuncSetAttribute(tc_dq_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bwd_bytes()));
    check_launch("flash attention (tensor cores): shared memory opt-in");
    done = true;
  }
  static void forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h) {
    opt_in();
    const dim3 grid(static_cast<unsigned>((t + tile - 1) / tile), static_cast<unsigned>(b * h));
    tc_forward_kernel<T, D><<<grid, tc_threads, fwd_bytes(), s>>>(out, lse, qkv, t, h,
                                                                  1.0F / std::sqrt(static_cast<float>(D)));
    check_launch("flash attention forward (tensor cores)");
  }
  static void backward(cudaStream_t s, float* dqkv, float* delta, const float* dout, const float* out, const float* qkv,
                       const float* lse, int b, int t, int h) {
    opt_in();
    const std::int64_t rows = static_cast<std::int64_t>(b) * h * t;
    tc_delta_kernel<<<blocks_for_rows(rows), 32 * warps_per_block, 0, s>>>(delta, dout, out, b, t, h, D);
    const dim3 grid(static_cast<unsigned>((t + tile - 1) / tile), static_cast<unsigned>(b * h));
    const float scale = 1.0F / std::sqrt(static_cast<float>(D));
    tc_dkdv_kernel<T, D><<<grid, tc_threads, bwd_bytes(), s>>>(dqkv, dout, qkv, lse, delta, t, h, scale);
    tc_dq_kernel<T, D><<<grid, tc_threads, bwd_bytes(), s>>>(dqkv, dout, qkv, lse, delta, t, h, scale);
    check_launch("flash attention backward (tensor cores)");
  }
};

// The head sizes built, for each 16-bit type.
#define PARASIM_TC_HEAD_SIZES(X) X(16) X(32) X(64) X(96) X(128)

template <class T>
bool tc_fits(int d) {
  switch (d) {
#define PARASIM_TC_CASE(D) \
  case D: return Launch<T, D>::fits();
    PARASIM_TC_HEAD_SIZES(PARASIM_TC_CASE)
#undef PARASIM_TC_CASE
    default: return false;
  }
}

template <class T>
void tc_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h, int d) {
  switch (d) {
#define PARASIM_TC_CASE(D) \
  case D: Launch<T, D>::forward(s, out, lse, qkv, b, t, h); break;
    PARASIM_TC_HEAD_SIZES(PARASIM_TC_CASE)
#undef PARASIM_TC_CASE
    default: break;
  }
}

template <class T>
void tc_backward(cudaStream_t s, float* dqkv, float* delta, const float* dout, const float* out, const float* qkv,
                 const float* lse, int b, int t, int h, int d) {
  switch (d) {
#define PARASIM_TC_CASE(D) \
  case D: Launch<T, D>::backward(s, dqkv, delta, dout, out, qkv, lse, b, t, h); break;
    PARASIM_TC_HEAD_SIZES(PARASIM_TC_CASE)
#undef PARASIM_TC_CASE
    default: break;
  }
}

}  // namespace

bool flash_attention_tc_supported(int d, int format) {
  if (format == 1) return tc_fits<__nv_bfloat16>(d);
  if (format == 2) return tc_fits<__half>(d);
  return false;
}

bool flash_attention_tc_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h, int d,
                                int format) {
  if (!flash_attention_tc_supported(d, format)) return false;
  if (static_cast<std::int64_t>(b) * h == 0 || t == 0) return true;
  if (format == 1) tc_forward<__nv_bfloat16>(s, out, lse, qkv, b, t, h, d);
  if (format == 2) tc_forward<__half>(s, out, lse, qkv, b, t, h, d);
  return true;
}

bool flash_attention_tc_backward(cudaStream_t s, float* dqkv, float* delta, const float* dout, const float* out,
                                 const float* qkv, const float* lse, int b, int t, int h, int d, int format) {
  if (!flash_attention_tc_supported(d, format)) return false;
  if (static_cast<std::int64_t>(b) * h == 0 || t == 0) return true;
  if (format == 1) tc_backward<__nv_bfloat16>(s, dqkv, delta, dout, out, qkv, lse, b, t, h, d);
  if (format == 2) tc_backward<__half>(s, dqkv, delta, dout, out, qkv, lse, b, t, h, d);
  return true;
}

}  // namespace parasim::exec::cuda
