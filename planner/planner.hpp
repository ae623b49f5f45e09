// The planner: every valid plan of a scenario's model and batch on a number of devices
// (planner/search.hpp), those that do not fit in memory rejected with the reason, the rest
// scored by the analytical tier (estimate.hpp) and ranked by throughput; the best are
// scored again by the event simulator, and so is any further plan whose estimate beats the
// best simulated throughput (so an optimistic estimate cannot hide a better plan). Each
// row says which tier its figures come from.
//
// Scoring runs on `threads` threads (0: every core), each with its own Estimator; the
// ranking does not depend on how the candidates were split (ties go to the order of
// enumeration), so any split gives the same result, bit for bit.
#pragma once

#include <cstddef>
#include <map>
#include <string_view>
#include <stdexcept>
#include <functional>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "workload/memory.hpp"
#include "report/run_model.hpp"
#include "scenario/scenario.hpp"
#include "planner/search.hpp"

namespace parasim::planner {

struct PlanScore {
  std::size_t index = 0;  // in enumeration order
  planner::Candidate candidate;
  double step_time = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;
  double memory = 0.0;  // the busiest stage's bytes per rank
  std::string bottleneck;
  bool simulated = false;     // figures from the event simulator (else the estimate)
  double estimate = 0.0;      // the analytical step time, kept when simulated
  // Mean seconds per device in the step computing, and communicating but not computing
  // (the energy's states: report::step_energy).
  double compute = 0.0;
  double communication = 0.0;
  // The whole run (rank_by: an objective beyond the step).
  std::optional<report::RunEstimate> run;
};

// What plan ranks by: the step's throughput, or the whole run's expected time to train,
// cost (device-hours where job.price is not set) or energy (report/run_model.hpp).
enum class Objective : std::uint8_t { step, time_to_train, cost, energy };
std::string_view to_string(Objective o);
// The figure an objective ranks by, lower first (step: the step time).
double objective_value(const PlanScore& p, Objective o);

// How far a long search is: `phase` ("scoring plans", "simulating the best plans"),
// `done` of `total` in it. Called from the workers (a phase's calls may come from several
// threads at once, with done rising); what it does must be thread-safe.
using ProgressFn = std::function<void(std::string_view phase, std::size_t done, std::size_t total)>;

// Thrown by the search when its cancel flag was set.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};

struct PlanOptions {
  int devices = 0;      // <= 0: the cluster's
  int resimulate = 20;  // best plans scored again by the simulator
  int threads = 0;      // <= 0: every core
  ProgressFn progress;  // optional
  const std::atomic<bool>* cancel = nullptr;  // optional: set, the search stops (Cancelled)
  // Optional: past it, the search stops (Cancelled), checked every 256 plans scored and
  // before each simulation.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct PlanReport {
  int devices = 0;
  double capacity = 0.0;  // bytes per device
  std::size_t candidates = 0;
  std::vector<PlanScore> ranked;  // plans that fit, best first
  std::map<std::string, std::size_t> rejected;  // reason -> plans
  std::size_t simulated = 0;                    // best plans re-scored by the simulator
  double score_seconds = 0.0;
  double resimulate_seconds = 0.0;
};

// Scores candidates [begin, end) of `all` (those that fit) and counts the rejected, on
// `threads` threads (<= 0: every core), each over its own slice.
void score_range(const scenario::Scenario& base, const std::vector<planner::Candidate>& all, std::size_t begin,
                 std::size_t end, std::vector<PlanScore>& fits, std::map<std::string, std::size_t>& rejected,
                 int threads = 1, const PlanOptions* watch = nullptr);
// Best first: by tokens/s, then by enumeration order.
void rank(std::vector<PlanScore>& scores);
// Replaces the first `count` rows' figures by the simulator's (on `threads` threads, <= 0:
// every core); then, while the next row's estimate beats the best simulated throughput
// (it could still be the best plan), simulates it too, up to 4 x count rows in all.
// Ranks the simulated rows among themselves; returns how many there are.
std::size_t resimulate(const scenario::Scenario& base, std::vector<PlanScore>& ranked, int count, int threads = 1,
                       const PlanOptions* watch = nullptr);

PlanReport plan_search(const scenario::Scenario& s, const PlanOptions& options = {});

// Estimates every ranked plan's whole run (the scenario's training.tokens or
// training.steps, job:) and ranks them by `o`, ties by throughput then enumeration order.
// `s` is the scenario searched (its devices: report.devices). Throws std::invalid_argument
// when the scenario gives no run length, or `o` is energy and the device's power is unknown.
void rank_by(const scenario::Scenario& s, PlanReport& report, Objective o);

// The search on the cluster's devices and on smaller clusters (halving it `halvings` times,
// whole nodes, while a plan fits), each ranked by `o`: for an objective beyond the step a
// smaller cluster can win, its failures rarer. Sizes where nothing fits are left out.
// Half of `devices` in whole nodes of `per_node` (any half of a single node), or 0 when it
// does not split so.
int half_cluster(int devices, int per_node);
struct SizeResult {
  int devices = 0;
  PlanReport report;
};
std::vector<SizeResult> plan_sizes(const scenario::Scenario& s, const PlanOptions& options, Objective o, int halvings);

// A share of the search for one of several processes (`part` of `parts`, as MPI ranks):
// the candidates of its slice scored, as bytes to gather; and the whole search put back
// together from every part's bytes (in part order), ranked and re-simulated as
// plan_search() does, with the same result.
std::string score_part(const scenario::Scenario& s, const PlanOptions& options, int part, int parts);
PlanReport merge_parts(const scenario::Scenario& s, const PlanOptions& options, const std::vector<std::string>& parts);

// The smallest device count above `devices` on which some plan of the scenario fits in
// memory, trying 2^i and 3·2^i devices (whole nodes of the cluster's size, as on_devices
// grows it) up to the documented limit; 0 when none does. Memory only: nothing is scored.
// offload false: plans that offload to host memory do not count.
int smallest_fitting_devices(const scenario::Scenario& s, int devices, bool offload = true);

// Why a plan does not fit, as counted: "model state exceeds memory" when weights,
// gradients and optimizer state alone do not fit, else "activations exceed memory".
std::string memory_reason(const workload::MemoryReport& r);
// A rejection reason's identifier for scripts: its words in lower case joined by '_'
// ("model state exceeds memory" -> "model_state_exceeds_memory").
std::string reason_id(std::string_view reason);

}  // namespace parasim::planner
