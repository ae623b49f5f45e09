// The result both engines produce: one span per executed op (rank, stream, op, category,
// micro-batch, start, end in integer picoseconds) plus per-link byte counts. The
// simulator fills it with predictions, the executor with measurements; writers and the
// dashboard read it the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/program.hpp"

namespace parasim::report {

struct Span {
  std::int32_t rank = 0;
  plan::Stream stream = plan::Stream::compute;
  plan::Category category = plan::Category::forward;
  plan::OpKind kind = plan::OpKind::compute;  // a recv span covers its waiting, not a transfer
  std::int32_t micro_batch = -1;
  std::int64_t op = -1;  // Program op id
  std::int64_t start = 0;  // picoseconds from the start of the step
  std::int64_t end = 0;

  [[nodiscard]] double seconds() const { return static_cast<double>(end - start) * 1e-12; }
};

struct LinkUse {
  int link = -1;
  double bytes = 0.0;
};

struct Trace {
  std::string kind;  // "predicted" or "measured"
  int world = 0;
  std::vector<Span> spans;
  std::vector<LinkUse> links;  // links that carried traffic
  std::int64_t step_end = 0;   // picoseconds

  [[nodiscard]] double step_seconds() const { return static_cast<double>(step_end) * 1e-12; }
};

}  // namespace parasim::report
