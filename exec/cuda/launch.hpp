// What every CUDA kernel file needs: a launch's shape for an element-wise kernel, its
// grid-stride loop, and after a launch its error, as an exception naming the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace parasim::exec::cuda {

inline constexpr int threads = 256;

// Blocks of `threads` for `count` elements, capped (the kernels loop over the rest).
inline unsigned blocks_for(std::int64_t count) {
  const std::int64_t b = (count + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

// Grid-stride loop over [0, count).
#define PARASIM_FOR_EACH(i, count)                                                                      \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace parasim::exec::cuda
