#include "scenario/reader.hpp"

#include <cmath>
#include <limits>

#include "scenario/limits.hpp"
#include "topology/units.hpp"

namespace parasim::scenario {

Reader::Reader(const Value& section, std::string path, std::initializer_list<std::string_view> allowed,
               LocationMap* where)
    : section_(section), path_(std::move(path)), where_(where) {
  if (!section_.is_map()) {
    throw ScenarioError(section_.loc, path_, fmt::format("expected a section of keys, got {}", section_.kind_name()));
  }
  std::vector<std::string_view> names(allowed);
  for (const Entry& e : section_.entries) {
    bool known = false;
    for (std::string_view a : names) known = known || a == e.key;
    if (!known) {
      throw ScenarioError(e.key_loc, key_path(e.key),
                          fmt::format("unknown key '{}' in {}{}; allowed keys: {}", e.key,
                                      path_.empty() ? "the scenario" : path_, suggestion(e.key, names),
                                      fmt::join(names, ", ")));
    }
  }
  if (where_ != nullptr && !path_.empty()) (*where_)[path_] = section_.loc;
}

std::string Reader::suggestion(std::string_view word, std::span<const std::string_view> candidates) {
  std::string near = nearest(word, candidates);
  return near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", near);
}

const Value* Reader::get(std::string_view key) const {
  record(key);
  const Entry* e = section_.find(key);
  return e == nullptr ? nullptr : &e->value;
}

std::string Reader::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

Location Reader::location_of(std::string_view key) const {
  const Entry* e = section_.find(key);
  return e == nullptr ? section_.loc : e->value.loc;
}

void Reader::record(std::string_view key) const {
  if (where_ != nullptr) (*where_)[key_path(key)] = location_of(key);
}

void Reader::fail(std::string_view key, const std::string& message) const {
  throw ScenarioError(location_of(key), key_path(key), message);
}

void Reader::fail_value(std::string_view key, const Value& v, const std::string& message) const {
  throw ScenarioError(v.loc, key_path(key), message);
}

const Value* Reader::scalar_or_default(std::string_view key, bool has_default) const {
  const Value* v = get(key);
  if (v == nullptr) {
    if (has_default) return nullptr;
    fail(key, fmt::format("missing required key '{}' in {}", key, path_.empty() ? "the scenario" : path_));
  }
  // A key written with nothing after it is a mistake, not a request for the default.
  if (v->kind == Value::Kind::null) {
    throw ScenarioError(section_.find(key)->key_loc, key_path(key), "a value is required here (remove the key for its default)");
  }
  if (!v->is_scalar()) fail_value(key, *v, fmt::format("expected a single value, got {}", v->kind_name()));
  return v;
}

namespace {

template <typename Parse>
double parsed(const Reader& r, std::string_view key, const Value* v, Parse parse) {
  units::Parsed p = parse(v->scalar);
  if (!p.ok()) r.fail_value(key, *v, p.error);
  // A finite number times its unit can still overflow (1e308 TB/s).
  if (!std::isfinite(p.value)) r.fail_value(key, *v, fmt::format("'{}' is too large to represent", v->scalar));
  return p.value;
}

}  // namespace

int Reader::integer(std::string_view key, std::optional<int> fallback, int min, int max) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  // A positive integer past 2^30 is named by its limit, not called not positive.
  const std::string range = min == 1 && max == (1 << 30) ? "a positive integer of at most 1,073,741,824"
                            : max == (1 << 30)          ? fmt::format("an integer from {} to 1,073,741,824", min)
                                                        : fmt::format("an integer from {} to {}", min, max);
  const units::Parsed p = units::parse_count(v->scalar);
  if (!p.ok() || p.value != std::floor(p.value) || p.value < min || p.value > max) {
    fail_value(key, *v, fmt::format("expected {}, got '{}'", range, v->scalar));
  }
  const double x = p.value;
  return static_cast<int>(x);
}

double Reader::count(std::string_view key, std::optional<double> fallback, double min, double max) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_count);
  if (x < min) fail_value(key, *v, fmt::format("expected a number of at least {}, got '{}'", min, v->scalar));
  if (x > max) {
    fail_value(key, *v, fmt::format("expected a number of at most {:g} (the limit), got '{}'", max, v->scalar));
  }
  return x;
}

double Reader::number(std::string_view key, std::optional<double> fallback, double min, double max) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_count);
  if (x < min || x > max) fail_value(key, *v, fmt::format("expected a number from {} to {}, got '{}'", min, max, v->scalar));
  return x;
}

double Reader::fraction(std::string_view key, std::optional<double> fallback, double max) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_fraction);
  if (x > max)
    fail_value(key, *v,
               fmt::format("expected a fraction from 0 to {:g} (or 0% to {:g}%), got '{}'", max, 100 * max, v->scalar));
  return x;
}

double Reader::bytes(std::string_view key, std::optional<double> fallback, bool allow_zero) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_bytes);
  if (x == 0.0 && !allow_zero) fail_value(key, *v, fmt::format("expected a size above zero, got '{}'", v->scalar));
  if (x > limits::bytes) fail_value(key, *v, fmt::format("expected a size of at most 1 EiB, got '{}'", v->scalar));
  return x;
}

double Reader::bandwidth(std::string_view key, std::optional<double> fallback) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_bandwidth);
  if (x < limits::min_bandwidth || x > limits::max_bandwidth) {
    fail_value(key, *v, fmt::format("expected a bandwidth from 1 KB/s to 1 EB/s, got '{}'", v->scalar));
  }
  return x;
}

double Reader::duration(std::string_view key, std::optional<double> fallback, double max) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_duration);
  if (x > max) {
    fail_value(key, *v, fmt::format("expected a duration of at most {}, got '{}'", units::format_span(max), v->scalar));
  }
  return x;
}

double Reader::flop_rate(std::string_view key, std::optional<double> fallback) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_flop_rate);
  if (x != 0.0 && (x < limits::min_flop_rate || x > limits::max_flop_rate)) {
    fail_value(key, *v, fmt::format("expected a FLOP rate from 1 MFLOPS to 1 EFLOPS (or 0: not supported), got '{}'",
                                    v->scalar));
  }
  return x;
}

double Reader::power(std::string_view key, std::optional<double> fallback) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  const double x = parsed(*this, key, v, units::parse_power);
  if (x < 1.0 || x > 1e6) fail_value(key, *v, fmt::format("expected a power from 1 W to 1 MW, got '{}'", v->scalar));
  return x;
}

bool Reader::boolean(std::string_view key, std::optional<bool> fallback) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  for (std::string_view t : {"true", "yes", "on"}) {
    if (v->scalar == t) return true;
  }
  for (std::string_view f : {"false", "no", "off"}) {
    if (v->scalar == f) return false;
  }
  fail_value(key, *v, fmt::format("expected true or false, got '{}'", v->scalar));
}

std::string Reader::string(std::string_view key, std::optional<std::string> fallback) const {
  const Value* v = scalar_or_default(key, fallback.has_value());
  if (v == nullptr) return *fallback;
  return v->scalar;
}

}  // namespace parasim::scenario
