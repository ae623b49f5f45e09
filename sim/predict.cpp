// predict(): a scenario's step simulated end to end, its data-parallel replicas folded onto
// one where that is exact (or approximate at scale, FoldMode), else every rank simulated.
#include "sim/simulate.hpp"

namespace parasim::sim {

std::string_view to_string(FoldMode m) {
  switch (m) {
    case FoldMode::automatic: return "auto";
    case FoldMode::always: return "always";
    case FoldMode::never: return "never";
  }
  return "?";
}

Prediction predict(const scenario::Scenario& s, const PredictOptions& options) {
  const DeviceProfile profile = profile_of(s);
  Prediction p;
  if (options.fold != FoldMode::never && s.plan.dp > 1) {
    const bool approximate = options.fold == FoldMode::always || s.plan.world() >= fold_approximate_from;
    try {
      p.program = program::compile(s, program::CompileOptions{true});
      p.trace = simulate(s, p.program, profile, &p.stats, SimOptions{options.counters, approximate, options.progress, options.spans});
      return p;
    } catch (const NotFoldable& e) {
      p.stats = SimStats{};
      p.not_folded = e.what();
    }
  }
  p.program = program::compile(s);
  p.trace = simulate(s, p.program, profile, &p.stats, SimOptions{options.counters, true, options.progress, options.spans});
  return p;
}

}  // namespace parasim::sim
