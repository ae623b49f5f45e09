// Typed, checked access to one section (map) of a scenario. A reader is created with the
// keys its section allows; any other key is an error that suggests the nearest allowed
// one. Each getter checks type, unit and range and reports problems at the value's
// location with the dotted key. Every key read (or defaulted) is recorded with its
// location, so later semantic checks can point at the line that set a value.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "scenario/value.hpp"

namespace parasim::scenario {

// Where each dotted key of a loaded scenario was set (or, when defaulted, its section).
using LocationMap = std::map<std::string, Location>;

class Reader {
 public:
  Reader(const Value& section, std::string path, std::initializer_list<std::string_view> allowed,
         LocationMap* where);

  [[nodiscard]] bool has(std::string_view key) const { return section_.find(key) != nullptr; }
  [[nodiscard]] const Value* get(std::string_view key) const;
  [[nodiscard]] std::string key_path(std::string_view key) const;
  [[nodiscard]] Location location_of(std::string_view key) const;
  [[nodiscard]] const Location& section_location() const { return section_.loc; }

  // Integers: whole numbers within [min, max]; "1.5K" style suffixes allowed.
  int integer(std::string_view key, std::optional<int> fallback, int min = 1, int max = 1 << 30) const;
  double count(std::string_view key, std::optional<double> fallback, double min = 0.0,
               double max = 1e18) const;
  double number(std::string_view key, std::optional<double> fallback, double min, double max) const;
  // "0.05" or "5%", within [0, max].
  double fraction(std::string_view key, std::optional<double> fallback, double max = 1.0) const;
  double bytes(std::string_view key, std::optional<double> fallback, bool allow_zero = false) const;
  double bandwidth(std::string_view key, std::optional<double> fallback) const;
  // A duration of at most `max` seconds (a latency or a per-call cost: a minute).
  double duration(std::string_view key, std::optional<double> fallback, double max = 60.0) const;
  double flop_rate(std::string_view key, std::optional<double> fallback) const;
  double power(std::string_view key, std::optional<double> fallback) const;  // watts, 1 W to 1 MW
  bool boolean(std::string_view key, std::optional<bool> fallback) const;
  std::string string(std::string_view key, std::optional<std::string> fallback) const;

  template <typename Enum>
  Enum choice(std::string_view key, std::optional<Enum> fallback,
              std::initializer_list<std::pair<std::string_view, Enum>> options) const {
    const Value* v = scalar_or_default(key, fallback.has_value());
    if (v == nullptr) return *fallback;
    std::vector<std::string_view> names;
    for (const auto& [name, e] : options) {
      if (v->scalar == name) return e;
      names.push_back(name);
    }
    fail_value(key, *v, fmt::format("expected one of {}, got '{}'{}", fmt::join(names, ", "), v->scalar,
                                    suggestion(v->scalar, names)));
  }

  [[noreturn]] void fail(std::string_view key, const std::string& message) const;
  [[noreturn]] void fail_value(std::string_view key, const Value& v, const std::string& message) const;

  static std::string suggestion(std::string_view word, std::span<const std::string_view> candidates);

 private:
  // The scalar at key, or nullptr when it is absent and a default exists.
  const Value* scalar_or_default(std::string_view key, bool has_default) const;
  void record(std::string_view key) const;

  const Value& section_;
  std::string path_;
  LocationMap* where_;
};

}  // namespace parasim::scenario
