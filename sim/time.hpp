// Simulated time: integer picoseconds in a strong type. Integers make event order exact
// and runs bit-identical; picoseconds keep a 100 Gb/s byte (80 ps) representable while
// int64 still spans 106 days.
#pragma once

#include <compare>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace parasim::sim {

// A figure past what Time can hold: the scenario asks for a step of more than 106 days.
// Bad input, not a fault: the command reports it with exit code 2.
class TimeRangeError : public std::range_error {
 public:
  TimeRangeError()
      : std::range_error(
            "the simulated step passes the simulator's time range (106 days of picoseconds); the model is too large "
            "for the devices' rates or the links' bandwidths are too low (check model.hidden, model.seq_len, "
            "cluster.device.peak and the link bandwidths)") {}
};

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ps(std::int64_t v) { return Time(v); }
  static constexpr Time ns(std::int64_t v) { return Time(v * 1000); }
  // Rounds to the nearest picosecond; throws TimeRangeError past the range (or NaN).
  static Time seconds(double s) {
    const double ps = s * 1e12;
    if (!(std::fabs(ps) < 9.2e18)) throw TimeRangeError();
    return Time(std::llround(ps));
  }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  [[nodiscard]] constexpr std::int64_t picoseconds() const { return ps_; }
  [[nodiscard]] constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(ps_, o.ps_, &sum)) throw TimeRangeError();
    return Time(sum);
  }
  constexpr Time operator-(Time o) const {
    std::int64_t diff = 0;
    if (__builtin_sub_overflow(ps_, o.ps_, &diff)) throw TimeRangeError();
    return Time(diff);
  }
  constexpr Time& operator+=(Time o) { return *this = *this + o; }

 private:
  constexpr explicit Time(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

}  // namespace parasim::sim
