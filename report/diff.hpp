// Two predictions side by side (`parasim diff A B`): what changed in the inputs (every
// resolved key of the two scenarios, as `check --json` writes them, that differs), the
// headline figures of each, and where the step's change comes from. A step splits, per
// rank and averaged over the ranks, into
//     compute + each communication kind's exposed time + pipeline bubble + the rest
// (the rest: host stalls, optimizer waits and what the slowest rank adds over the mean),
// so the parts' changes add up to the step's. For a hardware refresh or a scaling
// regression's postmortem: which part moved, by how much.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/metrics.hpp"
#include "scenario/scenario.hpp"
#include "workload/memory.hpp"

namespace parasim::report {

// One prediction as diff compares it.
struct DiffSide {
  const scenario::Scenario* scenario = nullptr;
  const StepFigures* figures = nullptr;
  const workload::MemoryReport* memory = nullptr;
  double time_to_train = 0.0;  // the whole run's expected time (0: no run length)
};

struct InputChange {
  std::string key;  // dotted: "plan.tp", "cluster.device.memory_bandwidth"
  std::string a;    // as JSON text; "-" where the side lacks the key
  std::string b;
};

struct FigureChange {
  std::string id;    // "step_time", "tp_exposed", ...
  std::string name;  // "step time", "tp exposed", ...
  std::string unit;  // "s", "tokens/s", "fraction", "bytes"
  double a = 0.0;
  double b = 0.0;
  [[nodiscard]] double delta() const { return b - a; }
  // (b - a) / a; NaN where a is 0.
  [[nodiscard]] double relative() const;
};

struct Diff {
  std::vector<InputChange> inputs;
  std::vector<FigureChange> figures;  // the headline figures, in a fixed order
  std::vector<FigureChange> parts;    // the step's parts, largest change first
  bool fits_a = true;
  bool fits_b = true;
};

// The keys of two JSON documents whose values differ, depth first, objects by key and
// arrays by index (an array of different length compared whole).
std::vector<InputChange> changed_keys(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

Diff diff(const DiffSide& a, const DiffSide& b);

// The diff as `parasim diff` prints it, and as its JSON.
std::string describe_diff(const Diff& d, const std::string& name_a, const std::string& name_b);
nlohmann::ordered_json diff_json(const Diff& d);

}  // namespace parasim::report
