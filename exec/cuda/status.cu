// CUDA backend probe: runtime and driver versions, device count, cuBLAS and NCCL versions,
// and on a present device one kernel launch whose result is checked.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace parasim::exec {
namespace {

__global__ void iota_kernel(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

bool kernel_check(std::string& why) {
  constexpr int n = 1024;
  int* d = nullptr;
  if (cudaError_t e = cudaMalloc(&d, n * sizeof(int)); e != cudaSuccess) {
    why = cudaGetErrorString(e);
    return false;
  }
  iota_kernel<<<(n + 255) / 256, 256>>>(d, n);
  std::vector<int> h(n);
  cudaError_t e = cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) {
    why = cudaGetErrorString(e);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (h[i] != 3 * i + 1) {
      why = "kernel produced a wrong result";
      return false;
    }
  }
  return true;
}

}  // namespace

BackendStatus cuda_status() {
  BackendStatus s{"cuda", true, false, {}};
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  int nccl = 0;
  ncclGetVersion(&nccl);
  int cublas = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas);
  s.detail = "CUDA runtime " + version_string(runtime) + ", cuBLAS " + std::to_string(cublas) + ".x, NCCL " +
             std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) + "." + std::to_string(nccl % 100);
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    s.detail += std::string("; no usable GPU: ") + cudaGetErrorString(e);
    return s;
  }
  if (devices == 0) {
    s.detail += "; no GPU found";
    return s;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  s.detail += "; driver " + version_string(driver) + "; " + std::to_string(devices) + " x " + prop.name;
  std::string why;
  s.usable = kernel_check(why);
  s.detail += s.usable ? "; kernel check passed" : "; kernel check FAILED: " + why;
  return s;
}

}  // namespace parasim::exec
