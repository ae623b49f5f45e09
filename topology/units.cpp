#include "topology/units.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <span>

#include <fmt/format.h>

namespace parasim::units {
namespace {

struct Split {
  double number = 0.0;
  std::string unit;  // whitespace removed
  bool has_number = false;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "400 Gbps" -> {400, "Gbps"}; "1.5e3ms" -> {1500, "ms"}.
Split split(std::string_view text) {
  Split out;
  text = trim(text);
  const char* begin = text.data();
  const char* end = begin + text.size();
  double v = 0.0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc{} || ptr == begin) return out;
  out.number = v;
  out.has_number = true;
  for (const char* p = ptr; p != end; ++p) {
    if (!std::isspace(static_cast<unsigned char>(*p))) out.unit.push_back(*p);
  }
  return out;
}

// Multiplier of a prefix at the start of `unit`; consumes it. Binary when "i" follows.
std::optional<double> take_prefix(std::string& unit) {
  static constexpr std::array<std::pair<char, int>, 6> prefixes{
      {{'K', 1}, {'k', 1}, {'M', 2}, {'G', 3}, {'T', 4}, {'P', 5}}};
  if (unit.empty()) return 1.0;
  for (auto [c, power] : prefixes) {
    if (unit.front() != c) continue;
    if (unit.size() >= 2 && unit[1] == 'i') {
      unit.erase(0, 2);
      return std::pow(1024.0, power);
    }
    unit.erase(0, 1);
    return std::pow(1000.0, power);
  }
  return 1.0;
}

Parsed fail(std::string msg) { return Parsed{0.0, std::move(msg)}; }

Parsed with_number(std::string_view text, const Split& s, std::string_view what) {
  if (!s.has_number) return fail(fmt::format("expected {}, got '{}'", what, text));
  if (!std::isfinite(s.number)) return fail(fmt::format("expected {}, got '{}' (not a finite number)", what, text));
  if (s.number < 0) return fail(fmt::format("expected {}, non-negative; got '{}'", what, text));
  return Parsed{s.number, {}};
}

std::string format_scaled(double v, double base, std::span<const char* const> names, int digits) {
  std::size_t i = 0;
  while (i + 1 < names.size() && std::fabs(v) >= base) {
    v /= base;
    ++i;
  }
  return fmt::format("{:.{}f} {}", v, std::fabs(v) >= 100 || v == std::floor(v) ? 0 : digits, names[i]);
}

// A quantity written as NUMBER [PREFIX]UNIT, where UNIT is one of `base` (each with its
// factor to SI) and PREFIX a decimal or binary multiplier. The unit is required.
struct PrefixedUnit {
  std::string_view what;           // "a size with a unit such as ..."
  std::string_view needs_unit;     // "write e.g. 80GiB, 25MB or 512B"
  std::string_view known;          // "B, KB, MB, ..."
  std::string_view kind;           // "size"
  std::initializer_list<std::pair<std::string_view, double>> base;
};

Parsed parse_prefixed(std::string_view text, const PrefixedUnit& u) {
  Split s = split(text);
  if (Parsed p = with_number(text, s, u.what); !p.ok()) return p;
  if (s.unit.empty()) return fail(fmt::format("'{}' needs a unit: {}", text, u.needs_unit));
  std::string unit = s.unit;
  const double mult = *take_prefix(unit);
  for (const auto& [name, factor] : u.base) {
    if (unit == name) return Parsed{s.number * mult * factor, {}};
  }
  return fail(fmt::format("unknown {} unit '{}' in '{}': expected {}", u.kind, s.unit, text, u.known));
}

}  // namespace

Parsed parse_bytes(std::string_view text) {
  return parse_prefixed(text, {"a size with a unit such as 80GiB, 25MB or 512B", "write e.g. 80GiB, 25MB or 512B",
                               "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", "size",
                               {{"B", 1.0}, {"byte", 1.0}, {"bytes", 1.0}}});
}

Parsed parse_bandwidth(std::string_view text) {
  return parse_prefixed(text, {"a bandwidth such as 400Gbps or 50 GB/s",
                               "bits or bytes per second? write e.g. 400Gbps or 50GB/s",
                               "bps, Gbps, Gb/s, B/s, GB/s, GBps or GiB/s", "bandwidth",
                               {{"bps", 0.125}, {"b/s", 0.125}, {"bit/s", 0.125},
                                {"Bps", 1.0}, {"B/s", 1.0}, {"byte/s", 1.0}}});
}

Parsed parse_duration(std::string_view text) {
  constexpr std::string_view what = "a duration such as 2us, 1.5 ms or 10ns";
  Split s = split(text);
  if (Parsed p = with_number(text, s, what); !p.ok()) return p;
  if (s.unit.empty() && s.number != 0.0) {
    return fail(fmt::format("'{}' needs a unit: write e.g. 2us, 1.5ms or 10ns", text));
  }
  static constexpr std::array<std::pair<std::string_view, double>, 14> table{{{"", 1.0},
                                                                               {"s", 1.0},
                                                                               {"ms", 1e-3},
                                                                               {"us", 1e-6},
                                                                               {"\xC2\xB5s", 1e-6},
                                                                               {"ns", 1e-9},
                                                                               {"ps", 1e-12},
                                                                               {"min", 60.0},
                                                                               {"h", 3600.0},
                                                                               {"hour", 3600.0},
                                                                               {"hours", 3600.0},
                                                                               {"d", 86400.0},
                                                                               {"day", 86400.0},
                                                                               {"days", 86400.0}}};
  for (auto [name, mult] : table) {
    if (s.unit == name) return Parsed{s.number * mult, {}};
  }
  return fail(fmt::format("unknown time unit '{}' in '{}': expected s, ms, us, ns, ps, min, h or d", s.unit, text));
}

Parsed parse_flop_rate(std::string_view text) {
  return parse_prefixed(text, {"a FLOP rate such as 989 TFLOPS or 19.5TFLOP/s", "write e.g. 989TFLOPS or 96 GFLOP/s",
                               "FLOPS or FLOP/s with a prefix (TFLOPS)", "FLOP-rate",
                               {{"FLOPS", 1.0}, {"FLOP/s", 1.0}, {"flops", 1.0}, {"flop/s", 1.0}}});
}

Parsed parse_power(std::string_view text) {
  return parse_prefixed(text, {"a power such as 700W or 0.5 kW", "write e.g. 700W", "W with a prefix (kW)", "power",
                               {{"W", 1.0}}});
}

Parsed parse_count(std::string_view text) {
  constexpr std::string_view what = "a number such as 4096, 1.5e9 or 175B";
  Split s = split(text);
  if (Parsed p = with_number(text, s, what); !p.ok()) return p;
  static constexpr std::array<std::pair<std::string_view, double>, 5> table{
      {{"", 1.0}, {"K", 1e3}, {"M", 1e6}, {"B", 1e9}, {"T", 1e12}}};
  for (auto [name, mult] : table) {
    if (s.unit == name) return Parsed{s.number * mult, {}};
  }
  return fail(fmt::format("expected {}, got '{}'", what, text));
}

Parsed parse_fraction(std::string_view text) {
  Split s = split(text);
  if (Parsed p = with_number(text, s, "a fraction such as 0.8 or 80%"); !p.ok()) return p;
  double v = s.number;
  if (s.unit == "%") {
    v /= 100.0;
  } else if (!s.unit.empty()) {
    return fail(fmt::format("expected a fraction such as 0.8 or 80%, got '{}'", text));
  }
  if (v > 1.0) return fail(fmt::format("expected a fraction between 0 and 1 (or 0% to 100%), got '{}'", text));
  return Parsed{v, {}};
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> names{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return format_scaled(bytes, 1024.0, names, 1);
}

std::string format_bandwidth(double bytes_per_s) {
  static constexpr std::array<const char*, 6> names{"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return format_scaled(bytes_per_s, 1000.0, names, 1);
}

std::string format_flop_rate(double flop_per_s) {
  static constexpr std::array<const char*, 6> names{"FLOP/s", "KFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
  return format_scaled(flop_per_s, 1000.0, names, 1);
}

std::string format_count(double n) {
  static constexpr std::array<const char*, 5> names{"", "K", "M", "B", "T"};
  std::string s = format_scaled(n, 1000.0, names, 1);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

std::string format_duration(double seconds) {
  const double a = std::fabs(seconds);
  if (a == 0.0) return "0 s";
  if (a < 1e-6) return fmt::format("{:.0f} ns", seconds * 1e9);
  if (a < 1e-3) return fmt::format("{:.3g} us", seconds * 1e6);
  if (a < 1.0) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} s", seconds);
}

std::string format_span(double seconds) {
  const double a = std::fabs(seconds);
  if (a < 60.0) return format_duration(seconds);
  if (a < 3600.0) return fmt::format("{:.3g} min", seconds / 60.0);
  if (a < 2.0 * 86400.0) return fmt::format("{:.3g} h", seconds / 3600.0);
  if (a < 1000.0 * 86400.0) return fmt::format("{:.3g} d", seconds / 86400.0);
  return fmt::format("{:.3g} years", seconds / (365.25 * 86400.0));
}

}  // namespace parasim::units
