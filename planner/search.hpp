// The planner's search space: every valid plan for a scenario's model and training batch on
// a number of devices. A candidate sets dp, tp, pp, virtual stages, schedule, micro-batch
// size, recompute, ZeRO, sequence parallelism (with or without tp communication overlap)
// and placement; the rest of the scenario
// (cluster, model, global batch, precision, bucket size, collective) stays. Valid means
// what `parasim check` accepts (check.hpp); whether it fits in memory is the planner's
// next question (memory.hpp).
//
// Enumerated: tp and pp over the divisors of the device count with dp = devices / (tp pp);
// micro-batches dividing the batch per replica; 1F1B, GPipe (when it differs: several
// stages and micro-batches), and interleaved 1F1B with every virtual stage count that
// divides the layers per stage; recompute none, selective
// (transformers) and full; ZeRO 0 and 1 (dp > 1); sequence parallelism off, on, and on with
// tp communication overlap (tp > 1); where the cluster's hosts are on the graph and a plan
// does not fit, the same plan with the optimizer offloaded, with the parameters too, and
// without recompute with its activations offloaded, alone or with both;
// placements that map ranks differently (orders of the dimensions larger than 1).
#pragma once

#include <string>
#include <functional>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::planner {

struct Candidate {
  scenario::ParallelPlan plan;
  int micro_batch = 1;
  scenario::Recompute recompute = scenario::Recompute::none;
};

// The scenario with the candidate's choices.
scenario::Scenario with_candidate(const scenario::Scenario& base, const Candidate& c);
// The scenario grown (or shrunk) to `devices`: whole nodes, the last possibly partial
// (gpus_per_node kept, nodes = ceil(devices / gpus_per_node)). devices <= 0: unchanged.
scenario::Scenario on_devices(const scenario::Scenario& base, int devices);

// Every valid candidate using exactly `devices` devices (<= 0: all of the cluster's), in a
// fixed order (the order of the loops above). `poll`, if given, is called before each
// candidate is checked; what it throws ends the enumeration.
std::vector<Candidate> enumerate_plans(const scenario::Scenario& base, int devices = 0,
                                       const std::function<void()>& poll = {});

// The plan's ZeRO stage with its shard group and offloading, for a table's column:
// "1", "3 /8" (hybrid, shard groups of 8), "2 +off(o)" (optimizer offloaded), "3 +off(o,p)"
// (and the parameters), "+off(a)" (activations), "+off(o,p,a)".
std::string sharding_string(const scenario::ParallelPlan& p);
// "dp 8 tp 4 pp 2 x2 interleaved-1f1b mb 2 recompute selective zero 1 sp placement tp,dp,pp"
std::string describe(const Candidate& c);
// The --set overrides that turn the base scenario into this candidate.
std::vector<std::string> overrides_of(const Candidate& c);

}  // namespace parasim::planner
