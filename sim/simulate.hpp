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

#include <functional>
#include <map>
#include <span>
#include <string>

#include "program/program.hpp"
#include "report/trace.hpp"
#include "sim/compute_model.hpp"
#include "sim/network.hpp"

namespace parasim::sim {

struct SimStats {
  std::uint64_t events = 0;
  std::uint64_t flows = 0;
  std::uint64_t ops = 0;
  std::map<std::string, std::uint64_t> algorithms;  // collective instances per algorithm run
  std::map<std::string, std::uint64_t> protocols;   // and per NCCL protocol (under NCCL)
  int replicas = 1;    // data-parallel replicas each simulated rank stood for
  bool exact = true;   // folded exactly (network.hpp), or no folding
};

// Told, every few thousand ops, how many of the Program's ops have run (done, total).
using SimProgress = std::function<void(std::size_t, std::size_t)>;

// Handed the trace's spans while the simulation runs: each block as its spans end (in the
// order of Trace::spans), the last with `last` when the step has ended. The spans are the
// caller's to copy; the Program is the one simulated (report::ChromeTraceStream).
using SpanSink = std::function<void(const program::Program&, std::span<const report::Span>, bool last)>;

struct SimOptions {
  bool counters = false;
  // For a one-replica Program: accept a folding that is only a mean-field approximation
  // (network.hpp); when false, simulate() throws NotFoldable unless it is exact.
  bool approximate = true;
  SimProgress progress{};  // may be empty
  SpanSink spans{};        // may be empty
};

// A one-replica Program (program::CompileOptions) is simulated folded: replica 0's ops run,
// the network counts every other replica's copies of its flows, and the trace holds
// replica 0's spans with mirror_of saying which rank each other rank mirrors. Throws
// NotFoldable when that cannot be done (a data-parallel collective whose flows are not
// the same in every replica, such as the tree).
report::Trace simulate(const scenario::Scenario& s, const program::Program& program, const DeviceProfile& profile,
                       SimStats* stats, const SimOptions& options);
report::Trace simulate(const scenario::Scenario& s, const program::Program& program, const DeviceProfile& profile,
                       SimStats* stats = nullptr, bool counters = false);
// With the scenario's profile (measured if given, else the datasheet default).
report::Trace simulate(const scenario::Scenario& s, const program::Program& program, SimStats* stats = nullptr,
                       bool counters = false);
DeviceProfile profile_of(const scenario::Scenario& s);

// How predict() treats data-parallel replicas:
//   automatic  fold when the folding is exact, or approximate from fold_approximate_from
//              ranks up; else simulate every rank
//   always     fold whenever it can be done (exactly or approximately)
//   never      simulate every rank
enum class FoldMode { automatic, always, never };
std::string_view to_string(FoldMode m);
inline constexpr int fold_approximate_from = 256;

struct PredictOptions {
  bool counters = false;
  FoldMode fold = FoldMode::automatic;
  SimProgress progress{};  // may be empty
  SpanSink spans{};        // may be empty; a folding that fails does so before any span
};

struct Prediction {
  program::Program program;
  report::Trace trace;
  SimStats stats;
  std::string not_folded;  // why a folding that was tried was not used

  // Ranks whose ops were simulated: one replica's when folded, else all.
  [[nodiscard]] int simulated_ranks() const { return program.world / (program.one_replica() ? stats.replicas : 1); }
};

// Compiles and simulates the scenario's step, folded as `options` says.
Prediction predict(const scenario::Scenario& s, const PredictOptions& options = {});

}  // namespace parasim::sim
