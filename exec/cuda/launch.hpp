// What every CUDA kernel file needs after a launch: the launch's error, as an exception
// naming the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace parasim::exec::cuda {

inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace parasim::exec::cuda
