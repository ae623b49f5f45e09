#include "exec/devices.hpp"

#include <stdexcept>

#include "exec/cpu/cpu_device.hpp"
#ifdef PARASIM_HAVE_CUDA_DEVICE
#include "exec/cuda/cuda_device.hpp"
#endif

namespace parasim::exec {

std::unique_ptr<Device> make_device(scenario::Backend backend, std::size_t capacity_bytes) {
  if (backend == scenario::Backend::cuda) {
#ifdef PARASIM_HAVE_CUDA_DEVICE
    return std::make_unique<CudaDevice>(capacity_bytes);
#else
    throw std::invalid_argument("this build has no CUDA executor (configure with nvcc, cuBLAS and NCCL found)");
#endif
  }
  return std::make_unique<CpuDevice>(capacity_bytes);
}

}  // namespace parasim::exec
