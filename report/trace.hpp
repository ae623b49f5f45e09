// The result both engines produce: one span per executed op (rank, stream, op, category,
// micro-batch, start, end in integer picoseconds) plus per-link byte counts and, when
// asked for, counters over time (memory per rank, utilisation of the busiest links). The
// simulator fills it with predictions, the executor with measurements; writers and the
// dashboard read it the same way.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "program/program.hpp"

namespace parasim::report {

// Kinds of communication traffic: tp, pp, dp, cp, ep, offload, syncbn (metrics.hpp's
// dimensions).
inline constexpr std::size_t traffic_kinds = 7;

struct Span {
  std::int32_t rank = 0;
  program::Stream stream = program::Stream::compute;
  program::Category category = program::Category::forward;
  program::OpKind kind = program::OpKind::compute;  // a recv span covers its waiting, not a transfer
  std::int32_t micro_batch = -1;
  std::int64_t op = -1;  // Program op id
  std::int64_t start = 0;  // picoseconds from the start of the step
  std::int64_t end = 0;

  [[nodiscard]] double seconds() const { return static_cast<double>(end - start) * 1e-12; }
};

struct LinkUse {
  int link = -1;
  double bytes = 0.0;
  std::array<double, traffic_kinds> by_dimension{};  // of which tp, pp, dp, cp, ep, offload and syncbn traffic
};

// A quantity over time, as a step function: each sample holds until the next.
struct Counter {
  std::string name;      // "memory", or the link's name
  std::int32_t rank = -1;  // the rank it belongs to; -1 for a link
  int link = -1;
  std::vector<std::pair<std::int64_t, double>> samples;  // (picoseconds, value)
  [[nodiscard]] double peak() const {
    double m = 0.0;
    for (const auto& [t, v] : samples) m = std::max(m, v);
    return m;
  }
};

struct Trace {
  std::string kind;  // "predicted" or "measured"
  std::string model;  // what ran, when it was not the model itself (GEMM equivalents)
  int world = 0;
  std::vector<Span> spans;
  std::vector<LinkUse> links;  // links that carried traffic
  std::int64_t step_end = 0;   // picoseconds
  // Optional: memory per rank in bytes, and utilisation (0..1) of the busiest links.
  std::vector<Counter> counters;
  // A folded simulation (one data-parallel replica) holds the spans of replica 0 only;
  // mirror_of[r] is the rank whose spans rank r's equal. Empty: every rank has its own.
  std::vector<std::int32_t> mirror_of;

  [[nodiscard]] bool folded() const { return !mirror_of.empty(); }
  [[nodiscard]] int mirror(int rank) const { return folded() ? mirror_of[static_cast<std::size_t>(rank)] : rank; }

  [[nodiscard]] double step_seconds() const { return static_cast<double>(step_end) * 1e-12; }
};

}  // namespace parasim::report
