// simulate(): executes a Program on the simulated cluster and returns the predicted Trace.
//
// Rank r runs on device r. Each op starts as the Program's execution rules allow
// (program.hpp): serial streams in order, pp ops independently, dependencies first,
// collectives when every member is ready. Compute ops last as the compute model says;
// send/recv pairs are network transfers; collectives run as flows by the algorithm the
// plan's `collective` setting resolves to for each call (collectives.hpp).
// The step ends when the last op does.
//
// With `counters`, the trace also carries each rank's memory over time (the stage's static
// memory from memory.hpp, plus a micro-batch's activations for a model chunk from its first
// forward op to its last backward op, plus the logits between the LM head's forward and
// backward) and the utilisation over time of the 16 busiest links.
#pragma once

#include <map>
#include <string>

#include "plan/program.hpp"
#include "report/trace.hpp"
#include "sim/compute_model.hpp"

namespace parasim::sim {

struct SimStats {
  std::uint64_t events = 0;
  std::uint64_t flows = 0;
  std::uint64_t ops = 0;
  std::map<std::string, std::uint64_t> algorithms;  // collective instances per algorithm run
};

report::Trace simulate(const plan::Scenario& s, const plan::Program& program, const DeviceProfile& profile,
                       SimStats* stats = nullptr, bool counters = false);
// With the scenario's profile (measured if given, else the datasheet default).
report::Trace simulate(const plan::Scenario& s, const plan::Program& program, SimStats* stats = nullptr,
                       bool counters = false);

}  // namespace parasim::sim
