// A compute device as the cost models see it: peak dense FLOP rate per data type, memory
// capacity and memory bandwidth. Figures for the presets are the vendors' datasheet values
// (dense, no sparsity); a measured profile from `parasim calibrate` refines them later.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace parasim::topology {

enum class Dtype { fp32, tf32, bf16, fp16 };
inline constexpr std::array<Dtype, 4> all_dtypes{Dtype::fp32, Dtype::tf32, Dtype::bf16, Dtype::fp16};

std::string_view to_string(Dtype d);
std::optional<Dtype> dtype_from_string(std::string_view s);
// Bytes of one element stored in this type (tf32 is stored as fp32).
int dtype_bytes(Dtype d);

struct DeviceSpec {
  std::string name;
  std::array<double, 4> peak_flops{};  // FLOP/s per Dtype; 0 = not supported
  double memory_bytes = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s
  // Memory the runtime takes before the model: CUDA context, cuBLAS workspace, NCCL buffers.
  double workspace_bytes = 1024.0 * 1024 * 1024;

  [[nodiscard]] double peak(Dtype d) const { return peak_flops[static_cast<std::size_t>(d)]; }
  [[nodiscard]] bool supports(Dtype d) const { return peak(d) > 0.0; }
};

}  // namespace parasim::topology
