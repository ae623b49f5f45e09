// FP8 as Transformer Engine's current scaling runs a GEMM operand: the tensor is scaled so
// that its largest magnitude lands on the format's largest value, rounded to the format,
// and (here) scaled back, so a GEMM on the result multiplies exactly the FP8 values TE's
// would and the caller needs no separate descale ("fake quantization"). The formats (OCP
// 8-bit floating point, as NVIDIA's E4M3 / E5M2):
//   E4M3  3 mantissa bits, smallest normal exponent -6, largest value 448 (no infinity)
//   E5M2  2 mantissa bits, smallest normal exponent -14, largest value 57344
// Rounding is to nearest, ties to even, with subnormals; values past the largest saturate
// to it (TE casts saturating). Host and CUDA code share these functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#if defined(__CUDACC__)
#define PARASIM_HOST_DEVICE __host__ __device__
#else
#define PARASIM_HOST_DEVICE
#endif

namespace parasim::exec::fp8 {

struct Format {
  int mantissa_bits;
  float min_normal;  // the smallest normal value: 2^min_exponent
  float quantum;     // the subnormals' step: min_normal / 2^mantissa_bits
  float max;
};

inline constexpr Format e4m3{3, 0.015625F, 0.001953125F, 448.0F};         // 2^-6, 2^-9
inline constexpr Format e5m2{2, 6.103515625e-05F, 1.52587890625e-05F, 57344.0F};  // 2^-14, 2^-16

PARASIM_HOST_DEVICE inline unsigned int float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  unsigned int u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PARASIM_HOST_DEVICE inline float bits_float(unsigned int u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x = 0.0F;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// x rounded to the nearest value of the format (saturating; NaN stays NaN). Normal values
// keep `mantissa_bits` of fp32's 23, rounded to nearest even on the bits (as bf16 rounding
// does with 7); below the smallest normal the step is the fixed subnormal quantum.
PARASIM_HOST_DEVICE inline float round(float x, Format f) {
  if (!(x == x)) return x;
  const float a = fabsf(x);
  float r = 0.0F;
  if (a < f.min_normal) {
    r = rintf(a / f.quantum) * f.quantum;  // to nearest, ties to even
  } else {
    const int drop = 23 - f.mantissa_bits;
    unsigned int bits = float_bits(a);
    bits += ((1U << (drop - 1)) - 1U) + ((bits >> drop) & 1U);
    r = bits_float(bits & ~((1U << drop) - 1U));
  }
  if (r > f.max) r = f.max;  // also catches infinity
  return copysignf(r, x);
}

// The scale that maps `amax` onto the format's largest value (1 for an all-zero tensor).
PARASIM_HOST_DEVICE inline float scale_for(float amax, Format f) {
  return amax > 0.0F && amax == amax ? f.max / amax : 1.0F;
}

PARASIM_HOST_DEVICE inline float fake_quantize(float x, float scale, Format f) { return round(x * scale, f) / scale; }

// FP8 GEMMs on cuBLASLt (exec/cuda/fp8_gemm.cpp), which runs FP8 only "TN": column-major
// D[M x N] = A^T B, A stored K x M and B K x N, both with leading dimension K. The
// row-major C[m x n] = op(A) op(B) (leading dimension ldc) is the column-major
// C^T[n x m] = op(B)^T op(A)^T, so cuBLASLt's A is op(B)^T, gathered n x k row-major, and
// its B is op(A), gathered m x k row-major. Each gathered operand: element (r, c) of a
// contiguous rows x cols block, taken from src[gather_index(r, c, ld, transposed)].
struct TnOperand {
  int rows = 0, cols = 0;
  bool transposed = false;  // read src's transpose
};
inline TnOperand tn_first(bool trans_b, int n, int k) { return {n, k, !trans_b}; }   // op(B)^T from B
inline TnOperand tn_second(bool trans_a, int m, int k) { return {m, k, trans_a}; }   // op(A) from A

PARASIM_HOST_DEVICE inline long long gather_index(long long r, long long c, int ld, bool transposed) {
  return transposed ? c * ld + r : r * ld + c;
}

// The alignment cuBLASLt may assume of a matrix (its MIN_ALIGNMENT preferences): the
// largest power of two, at most 256 (cuBLASLt's default), dividing both the address and the
// bytes between rows. Left at the default, the heuristic may pick a kernel that assumes 256
// bytes for an operand that starts inside a buffer.
inline std::uint32_t buffer_alignment(const void* p, std::size_t row_bytes) {
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(p) | row_bytes | std::uintptr_t{256};
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

// Entries kept by the address of the tensor they describe (an operand's FP8 tag, its cast
// codes). A buffer's release must drop every entry inside it, not only the one at its start:
// calibrate quantizes copies at offsets inside one buffer, and an entry left behind would
// outlive its memory (and claim FP8 values for whatever is allocated there next).
template <class T>
class AddressMap {
 public:
  T* find(const void* p) {
    const auto it = map_.find(key(p));
    return it == map_.end() ? nullptr : &it->second;
  }
  T& operator[](const void* p) { return map_[key(p)]; }
  // Removes the entries whose address lies in [p, p + bytes) (only the one at p when bytes
  // is 0) and hands them back, so that what they own is released after the map is whole.
  std::vector<T> extract_range(const void* p, std::size_t bytes) {
    std::vector<T> out;
    const auto first = map_.lower_bound(key(p));
    const auto last = map_.lower_bound(key(p) + std::max<std::size_t>(bytes, 1));
    for (auto it = first; it != last; ++it) out.push_back(std::move(it->second));
    map_.erase(first, last);
    return out;
  }
  std::vector<T> extract_all() {
    std::vector<T> out;
    for (auto& [at, value] : map_) out.push_back(std::move(value));
    map_.clear();
    return out;
  }
  [[nodiscard]] std::size_t size() const { return map_.size(); }

 private:
  static std::uintptr_t key(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  std::map<std::uintptr_t, T> map_;
};

}  // namespace parasim::exec::fp8
