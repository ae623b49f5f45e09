// Built when the CUDA backend is off: says why and how to turn it on.
#include "exec/backend.hpp"

namespace parasim::exec {

BackendStatus cuda_status() {
  return BackendStatus{"cuda", false, false,
                       "not built: this binary was configured without CUDA (needs nvcc, cuBLAS and NCCL, e.g. under "
                       "/usr/local/cuda; reconfigure with -DPARASIM_WITH_CUDA=ON, see docs/gpu.md)"};
}

}  // namespace parasim::exec
