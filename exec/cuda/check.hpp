// The CUDA runtime's errors as exceptions naming what failed (host code of the CUDA backend).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

#include <fmt/format.h>

namespace parasim::exec {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("CUDA {} failed: {}", what, cudaGetErrorString(e)));
}

}  // namespace parasim::exec
