// Rounding fp32 values to the 16-bit formats on the host, kept in fp32: bf16 (8 bits of
// mantissa) and fp16 (11), to nearest, ties to even, as the GPUs' conversions do. The CPU
// backend's round_to() and the tiled attention model (flash_tiled.hpp) use them.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace parasim::exec::rounding {

inline float round_bf16(float x) {
  if (std::isnan(x)) return x;
  auto bits = std::bit_cast<std::uint32_t>(x);
  bits += 0x7fffU + ((bits >> 16) & 1U);
  return std::bit_cast<float>(bits & 0xffff0000U);
}

inline float round_fp16(float x) {
#ifdef __FLT16_MAX__
  return static_cast<float>(static_cast<_Float16>(x));
#else
  // Without _Float16 (clang 14 on x86): IEEE round-to-nearest-even in software. 11
  // significant bits for normals, a fixed step of 2^-24 for subnormals, and infinity from
  // 65520 (half an ulp past the largest value, 65504) on, as a loss-scaled overflow needs.
  if (!std::isfinite(x) || x == 0.0F) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0F) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int e = 0;
  (void)std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  const int ulp = std::max(e - 11, -24);
  return std::copysign(std::ldexp(std::nearbyint(std::ldexp(a, -ulp)), ulp), x);
#endif
}

// format 0: x as it is, 1: bf16, 2: fp16 (the CUDA kernels' numbering).
inline float round_format(float x, int format) {
  return format == 1 ? round_bf16(x) : format == 2 ? round_fp16(x) : x;
}

}  // namespace parasim::exec::rounding
