// The Device of a backend, for a build with the executor (MPI): the CPU backend always, the
// CUDA backend when it was built (PARASIM_HAVE_CUDA_DEVICE). Throws std::invalid_argument
// for a backend this build lacks, and what the backend's constructor throws on a machine
// that cannot run it.
#pragma once

#include <cstddef>
#include <memory>

#include "exec/device.hpp"
#include "scenario/scenario.hpp"

namespace parasim::exec {

// capacity_bytes: the allocator's limit (0: the device's own memory).
std::unique_ptr<Device> make_device(scenario::Backend backend, std::size_t capacity_bytes);

}  // namespace parasim::exec
