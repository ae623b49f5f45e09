// What the seed scenarios' tests share (scenarios_test.cpp, golden_test.cpp): a scenario of
// scenarios/ predicted with its figures and the simulator's counts, its golden text, its
// memory, and a dimension's exposed communication.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "report/metrics.hpp"
#include "scenario/load.hpp"
#include "sim/simulate.hpp"
#include "workload/memory.hpp"

namespace parasim::test {

namespace fs = std::filesystem;

inline const fs::path root = PARASIM_SOURCE_DIR;

struct Outcome {
  scenario::Scenario scenario;
  report::StepFigures figures;
  sim::SimStats stats;
};

inline Outcome run(const std::string& file, const std::vector<std::string>& sets = {}) {
  Outcome o{scenario::load((root / "scenarios" / file).string(), sets), {}, {}};
  sim::Prediction p = sim::predict(o.scenario);
  o.stats = p.stats;
  o.figures = report::step_figures(o.scenario, p.trace, topology::Cluster(o.scenario.cluster));
  return o;
}

inline std::string golden_text(const Outcome& o) {
  const auto& f = o.figures;
  const workload::MemoryReport mem = workload::memory_per_rank(o.scenario);
  std::string s = fmt::format("scenario {}\n", o.scenario.name);
  s += fmt::format("step_time_s {:.4g}\nsamples_per_s {:.4g}\ntokens_per_s {:.4g}\nmfu {:.4g}\nbubble {:.4g}\n",
                   f.step_time, f.samples_per_s, f.tokens_per_s, f.mfu, f.bubble_fraction);
  for (std::size_t d = 0; d < report::dimension_count; ++d) {  // cp's and ep's lines where the plan has them
    if (!report::dimension_shown(o.scenario, d)) continue;
    s += fmt::format("{}_comm_s {:.4g} exposed_s {:.4g}\n", report::dimension_names[d], f.comm_mean[d],
                     f.exposed_mean[d]);
  }
  for (const auto& b : mem.stages) {
    s += fmt::format("memory_stage{} {:.4g} GiB\n", b.stage, b.total() / (1ULL << 30));
    if (mem.host_capacity > 0.0) s += fmt::format("host_memory_stage{} {:.4g} GiB\n", b.stage, b.host / (1ULL << 30));
  }
  s += fmt::format("fits {}\nbottleneck {}\n", mem.fits() ? "yes" : "no", f.bottleneck);
  s += fmt::format("limit {} {:.3g}{}\n", f.limit.kind, f.limit.fraction,
                   f.limit.link.link >= 0 ? fmt::format(" {} {}", f.limit.link.name, f.limit.link.cls) : "");
  s += fmt::format("ops {} events {} flows {}\ncollectives", o.stats.ops, o.stats.events, o.stats.flows);
  for (const auto& [algorithm, n] : o.stats.algorithms) s += fmt::format(" {} {}", algorithm, n);
  s += "\n";
  if (!o.stats.protocols.empty()) {
    s += "protocols";
    for (const auto& [protocol, n] : o.stats.protocols) s += fmt::format(" {} {}", protocol, n);
    s += "\n";
  }
  if (o.stats.replicas > 1)
    s += fmt::format("folded {} replicas, {}\n", o.stats.replicas, o.stats.exact ? "exact" : "approximate");
  return s;
}

inline workload::MemoryReport memory(const std::string& file, const std::vector<std::string>& sets = {}) {
  return workload::memory_per_rank(scenario::load((root / "scenarios" / file).string(), sets));
}

inline double exposed(const Outcome& o, report::Dimension d) {
  return o.figures.exposed_mean[static_cast<std::size_t>(d)];
}

}  // namespace parasim::test
