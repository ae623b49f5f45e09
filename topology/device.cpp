#include "topology/device.hpp"

namespace parasim::topology {

std::string_view to_string(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::tf32: return "tf32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8: return "fp8";
  }
  return "?";
}

std::optional<Dtype> dtype_from_string(std::string_view s) {
  for (Dtype d : all_dtypes) {
    if (to_string(d) == s) return d;
  }
  return std::nullopt;
}

int dtype_bytes(Dtype d) { return d == Dtype::fp8 ? 1 : d == Dtype::bf16 || d == Dtype::fp16 ? 2 : 4; }

Dtype storage_dtype(Dtype precision) { return precision == Dtype::fp8 ? Dtype::bf16 : precision; }

}  // namespace parasim::topology
