// Host-side helpers the GPU tests share: random inputs and the error measure their bounds
// are stated in.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace parasim::test {

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -2.0F, float hi = 2.0F) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Largest difference relative to the largest reference magnitude.
inline double relative(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  return diff / scale;
}

}  // namespace parasim::test
