// The CUDA kernel tests' runner: without a usable GPU it says why and exits 77, which ctest
// reports as skipped (SKIP_RETURN_CODE), so the tests are compiled and linked everywhere
// and run wherever a GPU is.
#include "tests/catch_runner.hpp"
#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("no usable GPU (%s): CUDA kernel tests skipped\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 77;
  }
  return parasim::test::run_catch(argc, argv);
}
