// libFuzzer target: any bytes as a scenario, through load, check, the memory model, the
// Program and the event simulator. A ScenarioError (bad input, exit 2) and a step past the
// simulated clock's range are answers; anything else escaping, a sanitizer report, a
// timeout or a memory blow-up is a bug. Built with clang (preset asan, scripts/fuzz.sh);
// the same function replays the saved corpus in every test build (fuzz/replay.cpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"
#include "workload/memory.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"
#include "sim/time.hpp"
#include "topology/cluster.hpp"

namespace {

// Per-input budget: inputs this large are accepted by parasim but cost seconds each to
// simulate, which would spend the fuzzing time on a few inputs. Loading, checking and the
// memory model still run on them.
constexpr int max_simulated_ranks = 64;
constexpr int max_simulated_micro_batches = 64;
constexpr long long max_simulated_layers = 256;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace parasim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const scenario::Scenario s = scenario::load_text(text, "fuzz.yaml", {}, PARASIM_FUZZ_BASE_DIR);
    const workload::MemoryReport mem = workload::memory_per_rank(s);
    (void)mem.fits();
    if (s.cluster.total_gpus() > max_simulated_ranks || s.micro_batches() > max_simulated_micro_batches ||
        s.model.layer_count() > max_simulated_layers) {
      return 0;
    }
    const sim::Prediction p = sim::predict(s);
    const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
    if (!(f.step_time > 0.0)) __builtin_trap();  // a valid plan's step takes time
  } catch (const scenario::ScenarioError&) {
  } catch (const sim::TimeRangeError&) {
  }
  return 0;
}
