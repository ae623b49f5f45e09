// 8-bit AdamW states (Dettmers et al., "8-bit Optimizers via Block-wise Quantization", as
// bitsandbytes' AdamW8bit): each moment is stored as one byte per value, a code into the
// 256-value dynamic map, times the absolute maximum of its block of 2048 values. A step
// dequantizes both moments, updates them and the parameter in fp32, and quantizes the new
// moments under their blocks' new maxima (nearest code). The first moment uses the signed
// map, the second (never negative) the unsigned one, whose finer steps near zero keep
// small second moments from rounding to zero. The CPU backend runs this code; the CUDA
// kernel (exec/cuda/kernels.cu) the same arithmetic.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace parasim::exec::adam8bit {

inline constexpr std::int64_t block = 2048;

inline std::int64_t blocks(std::int64_t count) { return (count + block - 1) / block; }

// bitsandbytes' create_dynamic_map(signed, max_exponent_bits = 7, total_bits = 8): for
// each exponent i (0..6) a linear run of fractions in [0.1, 1] (the midpoints of its
// linspace) times 10^(i - 6), mirrored for the signed map, then 0 and 1, sorted.
inline std::array<float, 256> dynamic_map(bool is_signed) {
  constexpr int exponent_bits = 7;
  constexpr int non_sign_bits = 7;
  std::vector<double> data;
  auto run = [&](int items, double scale) {
    // torch.linspace(0.1, 1, items): the midpoints of its items - 1 intervals.
    for (int j = 0; j + 1 < items; ++j) {
      const double a = 0.1 + 0.9 * j / (items - 1);
      const double b = 0.1 + 0.9 * (j + 1) / (items - 1);
      const double mean = (a + b) / 2.0;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  };
  for (int i = 0; i < exponent_bits; ++i) {
    const int items = is_signed ? (1 << (i + non_sign_bits - exponent_bits)) + 1
                                : (1 << (i + non_sign_bits - exponent_bits + 1)) + 1;
    run(items, std::pow(10.0, -(exponent_bits - 1) + i));
  }
  const int additional = (1 << (non_sign_bits - exponent_bits)) - 1;
  if (additional > 0) run(additional + 1, std::pow(10.0, 0));
  data.push_back(0.0);
  data.push_back(1.0);
  while (data.size() < 256) data.push_back(0.0);  // the signed map has 255 values
  std::sort(data.begin(), data.end());
  std::array<float, 256> out{};
  for (std::size_t i = 0; i < 256; ++i) out[i] = static_cast<float>(data[i]);
  return out;
}

inline const std::array<float, 256>& signed_map() {
  static const std::array<float, 256> m = dynamic_map(true);
  return m;
}
inline const std::array<float, 256>& unsigned_map() {
  static const std::array<float, 256> m = dynamic_map(false);
  return m;
}

// The code whose value is nearest x (a sorted map; ties to the lower code).
inline std::uint8_t quantize(float x, const float* map) {
  int lo = 0;
  int hi = 255;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (map[mid] <= x ? lo : hi) = mid;
  }
  return static_cast<std::uint8_t>(x - map[lo] <= map[hi] - x ? lo : hi);
}

// One AdamW step (bias-corrected, decoupled weight decay; `step` from 1) over `count`
// parameters whose moments are codes m, v with per-block maxima m_max, v_max
// (blocks(count) each).
inline void adamw(float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max, float* v_max,
                  std::int64_t count, double lr, double beta1, double beta2, double eps, double weight_decay,
                  int step) {
  const float* sm = signed_map().data();
  const float* um = unsigned_map().data();
  const double c1 = 1.0 - std::pow(beta1, step);
  const double c2 = 1.0 - std::pow(beta2, step);
  std::vector<float> nm(static_cast<std::size_t>(std::min(count, block)));
  std::vector<float> nv(nm.size());
  for (std::int64_t b = 0; b < blocks(count); ++b) {
    const std::int64_t first = b * block;
    const std::int64_t n = std::min(block, count - first);
    float top_m = 0.0F;
    float top_v = 0.0F;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t k = first + i;
      const double g = grad[k];
      const double mi = beta1 * sm[m[k]] * m_max[b] + (1.0 - beta1) * g;
      const double vi = beta2 * um[v[k]] * v_max[b] + (1.0 - beta2) * g * g;
      nm[static_cast<std::size_t>(i)] = static_cast<float>(mi);
      nv[static_cast<std::size_t>(i)] = static_cast<float>(vi);
      top_m = std::max(top_m, std::abs(nm[static_cast<std::size_t>(i)]));
      top_v = std::max(top_v, nv[static_cast<std::size_t>(i)]);
      const double update = (mi / c1) / (std::sqrt(vi / c2) + eps) + weight_decay * param[k];
      param[k] = static_cast<float>(param[k] - lr * update);
    }
    m_max[b] = top_m;
    v_max[b] = top_v;
    for (std::int64_t i = 0; i < n; ++i) {
      m[first + i] = quantize(top_m > 0.0F ? nm[static_cast<std::size_t>(i)] / top_m : 0.0F, sm);
      v[first + i] = quantize(top_v > 0.0F ? nv[static_cast<std::size_t>(i)] / top_v : 0.0F, um);
    }
  }
}

}  // namespace parasim::exec::adam8bit
