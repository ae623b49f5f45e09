// The executor's random numbers: splitmix64 and Box-Muller, the same on every platform, so
// one seed gives the same model and data everywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace parasim::exec {

inline std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in (0, 1), from the top 53 bits.
inline double uniform(std::uint64_t& state) { return (static_cast<double>(splitmix(state) >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal.
inline double normal(std::uint64_t& state) {
  const double u1 = uniform(state);
  const double u2 = uniform(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace parasim::exec
