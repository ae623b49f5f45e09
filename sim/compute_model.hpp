// Time of a compute op on a device.
//
// A GEMM of F FLOPs moving M bytes takes max(F / (peak(dtype) · eff(size)), M / bw) plus
// a launch overhead, where size = (m·n·k)^(1/3) and eff(size) is interpolated linearly in
// log(size) between the profile's points (clamped at the ends): a 1024³ GEMM reaches a
// fraction of what an 8192³ one does. Backward ops run each forward GEMM twice (data and
// weight gradients have the same FLOPs). The rest of an op's memory traffic (norms,
// softmax, activations, the optimizer) moves at the memory bandwidth.
//
// Built-in profiles (default_profile) take peak rates and memory bandwidth from the
// device's datasheet and a typical efficiency curve for its kind; a measured profile
// written by `parasim calibrate` (hardware.profile) replaces them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "plan/program.hpp"
#include "topology/device.hpp"

namespace parasim::sim {

struct DeviceProfile {
  std::string name;
  std::array<double, 4> peak{};                         // FLOP/s per dtype
  std::vector<std::pair<double, double>> gemm_efficiency;  // (size, fraction of peak), ascending size
  double memory_bandwidth = 0.0;                        // achievable bytes/s
  double launch_overhead = 0.0;                         // seconds per kernel

  [[nodiscard]] double efficiency(double size) const;
};

DeviceProfile default_profile(const topology::DeviceSpec& device);
// Reads a measured profile (YAML); errors name file, line and key.
DeviceProfile load_profile(const std::string& path, const topology::DeviceSpec& device);

double gemm_seconds(const DeviceProfile& p, const plan::Gemm& g, topology::Dtype dtype, int element_bytes);
// Duration of a compute op of `program`.
double compute_seconds(const DeviceProfile& p, const plan::Program& program, const plan::Op& op,
                       topology::Dtype dtype);

}  // namespace parasim::sim
