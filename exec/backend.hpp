// The executor's backends, found by the name a scenario uses (run.backend: cpu | cuda).
// Each backend is compiled only when its libraries were found at configure time; a
// backend left out compiles to a status that says why and how to get it, so every
// build answers `parasim backends` and a run on a missing backend fails with that reason.
//
// status() is a real probe, not a flag: the CPU backend reports the MPI library and checks
// one BLAS GEMM against a hand-computed product; the CUDA backend asks the runtime for its
// driver and devices, reports cuBLAS and NCCL versions and, when a device is present,
// launches a kernel and checks its result.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parasim::exec {

struct BackendStatus {
  std::string name;    // "cpu", "cuda"
  bool built = false;  // compiled into this binary
  bool usable = false; // built and its probe passed on this machine
  std::string detail;  // versions found, or why it cannot be used
};

BackendStatus cpu_status();
BackendStatus cuda_status();
std::vector<BackendStatus> all_backends();
// nullptr-free lookup: an unknown name gives a status that says which names exist.
BackendStatus backend_status(std::string_view name);

}  // namespace parasim::exec
