// Prediction against measurement: the figures `parasim validate` prints side by side, each
// computed the same way from the predicted and the measured Trace (metrics.hpp), with the
// prediction's error relative to the measurement.
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.hpp"
#include "report/metrics.hpp"
#include "report/trace.hpp"

namespace parasim::report {

struct ComparisonRow {
  std::string name;    // "step time", "forward", "tp communication", ...
  std::string unit;    // "s", "fraction", "bytes", "ratio"
  double predicted = 0.0;
  double measured = 0.0;
  // (predicted - measured) / measured; NaN when the measurement is zero. Fractions (the
  // bubble) differ in points instead: predicted - measured.
  [[nodiscard]] double error() const;
};

// A row's value and error as `parasim validate` prints them: a duration, bytes or a
// percentage; the error in percent, in points for fractions, "-" when undefined.
std::string format_value(const ComparisonRow& row, double value);
std::string format_error(const ComparisonRow& row);

// Mean over ranks of the busy time (union of spans) of each op category.
std::vector<double> category_seconds(const Trace& t);

// Step time, MFU, forward, backward, recompute, optimizer, tp / pp / dp communication and their
// exposed parts, bubble fraction, then the peak of the model's tensors per rank (predicted
// by the memory model without the runtime's workspace, measured by the executor's
// allocator).
std::vector<ComparisonRow> compare(const StepFigures& predicted, const Trace& predicted_trace,
                                   const StepFigures& measured, const Trace& measured_trace,
                                   const std::vector<double>& predicted_memory, const std::vector<double>& measured_memory);

}  // namespace parasim::report
