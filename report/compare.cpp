#include "report/compare.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "topology/units.hpp"

namespace parasim::report {

double ComparisonRow::error() const {
  if (unit == "fraction") return predicted - measured;
  if (measured == 0.0) return std::numeric_limits<double>::quiet_NaN();
  return (predicted - measured) / measured;
}

std::string format_value(const ComparisonRow& row, double value) {
  if (row.unit == "bytes") return units::format_bytes(value);
  if (row.unit == "fraction") return fmt::format("{:.1f} %", 100 * value);
  if (row.unit == "ratio") return fmt::format("{:.2f} x", value);
  return units::format_duration(value);
}

std::string format_error(const ComparisonRow& row) {
  const double e = row.error();
  if (std::isnan(e)) return "-";
  return row.unit == "fraction" ? fmt::format("{:+.1f} pt", 100 * e) : fmt::format("{:+.1f} %", 100 * e);
}

std::vector<double> category_seconds(const Trace& t) {
  constexpr std::size_t categories = program::category_count;
  std::vector<double> out(categories, 0.0);
  if (t.world == 0) return out;
  // Intervals per (rank with spans, category), gathered in one pass.
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> by(static_cast<std::size_t>(t.world) * categories);
  for (const Span& s : t.spans) {
    by[static_cast<std::size_t>(s.rank) * categories + static_cast<std::size_t>(s.category)].emplace_back(s.start, s.end);
  }
  std::vector<double> busy(by.size(), 0.0);
  for (std::size_t i = 0; i < by.size(); ++i) busy[i] = static_cast<double>(union_length(std::move(by[i]))) * 1e-12;
  for (int r = 0; r < t.world; ++r) {
    const auto src = static_cast<std::size_t>(t.mirror(r));
    for (std::size_t c = 0; c < categories; ++c) out[c] += busy[src * categories + c];
  }
  for (double& v : out) v /= t.world;
  return out;
}

std::vector<ComparisonRow> compare(const StepFigures& predicted, const Trace& predicted_trace,
                                   const StepFigures& measured, const Trace& measured_trace,
                                   const std::vector<double>& predicted_memory, const std::vector<double>& measured_memory) {
  std::vector<ComparisonRow> rows;
  rows.push_back({"step time", "s", predicted.step_time, measured.step_time});
  // The model's FLOPs over each step time and the devices' dense peak in the precision: the
  // same FLOPs, so the two differ as the step times do, shown in points.
  rows.push_back({"MFU", "fraction", predicted.mfu, measured.mfu});
  const std::vector<double> p = category_seconds(predicted_trace);
  const std::vector<double> m = category_seconds(measured_trace);
  const char* names[] = {"forward", "backward", "recompute", "optimizer"};
  for (std::size_t c = 0; c < 4; ++c) {
    if (p[c] == 0.0 && m[c] == 0.0) continue;
    rows.push_back({names[c], "s", p[c], m[c]});
  }
  for (std::size_t d = 0; d < dimension_count; ++d) {
    if (predicted.comm_mean[d] == 0.0 && measured.comm_mean[d] == 0.0) continue;
    rows.push_back({fmt::format("{} communication", dimension_names[d]), "s", predicted.comm_mean[d], measured.comm_mean[d]});
    rows.push_back({fmt::format("{} exposed", dimension_names[d]), "s", predicted.exposed_mean[d], measured.exposed_mean[d]});
  }
  rows.push_back({"bubble fraction", "fraction", predicted.bubble_fraction, measured.bubble_fraction});
  for (std::size_t r = 0; r < std::min(predicted_memory.size(), measured_memory.size()); ++r) {
    rows.push_back({fmt::format("tensors rank {} (peak)", r), "bytes", predicted_memory[r], measured_memory[r]});
  }
  return rows;
}

}  // namespace parasim::report
