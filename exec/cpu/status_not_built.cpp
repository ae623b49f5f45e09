// Built when the CPU backend is off: says why and how to turn it on.
#include "exec/backend.hpp"

namespace parasim::exec {

BackendStatus cpu_status() {
  return BackendStatus{"cpu", false, false,
                       "not built: this binary was configured without MPI + BLAS (install libopenmpi-dev and "
                       "libopenblas-dev, then reconfigure with -DPARASIM_WITH_MPI=ON)"};
}

}  // namespace parasim::exec
