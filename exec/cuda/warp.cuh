// What the attention kernels share (attention.cu, ring_attention.cu): a warp per row, lane l
// holding elements l, l + 32, ... of a head's d (at most 32 x per_lane).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace parasim::exec::cuda {

inline constexpr int per_lane = 8;
inline constexpr int warps_per_block = 4;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffU, v, o);
  return v;
}

// The warp's lanes over one head's d values.
struct Lanes {
  int d = 0, lane = 0;

  __device__ void load(float (&r)[per_lane], const float* src) const {
#pragma unroll
    for (int k = 0; k < per_lane; ++k) r[k] = lane + 32 * k < d ? src[lane + 32 * k] : 0.0F;
  }
  __device__ void store(float* dst, const float (&r)[per_lane]) const {
#pragma unroll
    for (int k = 0; k < per_lane; ++k) {
      if (lane + 32 * k < d) dst[lane + 32 * k] = r[k];
    }
  }
  // r += a · x, over this lane's elements.
  __device__ void add_scaled(float (&r)[per_lane], float a, const float* x) const {
#pragma unroll
    for (int k = 0; k < per_lane; ++k) {
      if (lane + 32 * k < d) r[k] += a * x[lane + 32 * k];
    }
  }
  // r · x over the whole warp.
  __device__ float dot(const float (&r)[per_lane], const float* x) const {
    float s = 0.0F;
#pragma unroll
    for (int k = 0; k < per_lane; ++k) {
      if (lane + 32 * k < d) s += r[k] * x[lane + 32 * k];
    }
    return warp_sum(s);
  }
};

// This thread's warp's row among `rows` rows (valid when below), its lane.
__device__ inline std::int64_t warp_row() {
  return static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
}

inline unsigned blocks_for_rows(std::int64_t rows) {
  return static_cast<unsigned>((rows + warps_per_block - 1) / warps_per_block);
}

}  // namespace parasim::exec::cuda
