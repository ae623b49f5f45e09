// The whole training run from one predicted step (training.tokens or training.steps, job:):
// how long it takes once failures, restarts and checkpoints count, how much of that is
// useful work, the energy it draws and what it costs.
//
// Failures: every device and every node fails after an exponentially distributed time
// (job.failures), so the job is interrupted at rate λ = devices / device_mtbf + nodes /
// node_mtbf, its mean time between failures M = 1 / λ. After each interruption the job
// restarts (R: job.failures.restart plus loading the checkpoint, itself liable to be
// interrupted) and redoes the work since the last durable checkpoint.
//
// Checkpoints split the run's W seconds of steps into spans of τ seconds (whole steps).
// Synchronous: each span is followed by the write, δ, training stopped. Asynchronous
// (Megatron-Core's async save, PyTorch DCP's async_save): training stops only for the copy
// to host memory, s, and the write (w) runs under the next span; a checkpoint is durable
// only once written, so a failure before then rolls back one span further.
//
// The expected time of a span that needs a failure-free stretch of `a` on its first try
// and of `a'` on every try after a failure (each after a restart R) is, by the
// memorylessness of the exponential (derivation in docs/run-model.md):
//     T(a, a') = (1 - e^{-λa}) · e^{λ(R + a')} / λ
// With a = a' = τ + δ (synchronous) this is Daly's complete model (Daly 2006, "A higher
// order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3)):
//     T = M · e^{R/M} · (e^{(τ+δ)/M} - 1).
// Asynchronous: a = τ + s (the first span: τ + s + w), a' = τ + s + w. The expected time to
// train is the sum over the spans; the expected count of interruptions λ times it (the
// failures are a Poisson process in wall time).
//
// The interval, unless given: Daly's higher-order optimum (δ < 2M),
//     τ = sqrt(2δM) · (1 + sqrt(δ/(2M))/3 + δ/(18M)) - δ,
// which extends Young's sqrt(2δM) (Young 1974, CACM 17(9)); δ is the time a checkpoint
// stops training (the copy, asynchronous: no shorter than the write, which must end before
// the next one starts). Rounded to whole steps, at least one.
//
// Energy: each device's time in the step computing, communicating only and idle (from
// the trace), at job.power's busy, communication and idle powers; the nodes' other parts
// at job.power.node; all times the facility's PUE. Restarts and checkpoint stalls at the
// idle powers; redone work at the step's.
#pragma once

#include <cstdint>
#include <string>

#include "report/trace.hpp"
#include "scenario/scenario.hpp"

namespace parasim::report {

// One step's energy: each device's mean time in each state, and joules for the job.
struct StepEnergy {
  double compute = 0.0;        // seconds per device computing (mean over the devices)
  double communication = 0.0;  // communicating, not computing
  double idle = 0.0;           // neither
  double devices = 0.0;        // joules, every device
  double nodes = 0.0;          // joules, the nodes' other parts
  double facility = 0.0;       // joules, cooling and power delivery: (PUE - 1) x the two above
  [[nodiscard]] double total() const { return devices + nodes + facility; }
};

// From the states' mean times per device over a step of `step` seconds.
StepEnergy step_energy(const scenario::Scenario& s, double step, double compute, double communication);
// From a trace: each rank's compute spans, its communication spans not under compute
// (a receive's span is its wait: idle), the rest idle; a folded trace's mirrored ranks
// count as the rank they mirror.
StepEnergy step_energy(const scenario::Scenario& s, const Trace& trace);

// What one checkpoint writes and what it costs.
struct CheckpointCost {
  double bytes = 0.0;           // the whole checkpoint
  double bytes_per_rank = 0.0;  // the largest share one rank writes
  double bytes_per_node = 0.0;  // and one node
  int writers = 0;              // ranks that write
  double write = 0.0;           // seconds to write it to storage
  double copy = 0.0;            // seconds to copy a rank's share to host memory (async)
  double stall = 0.0;           // seconds training stops for it: the write (sync) or the copy (async)
  double load = 0.0;            // seconds to read it back at a restart
};
CheckpointCost checkpoint_cost(const scenario::Scenario& s);

// The job's interruption rate, per second: devices / device_mtbf + nodes / node_mtbf.
double failure_rate(const scenario::Scenario& s);
// Young's and Daly's optimum intervals (seconds of training) for a checkpoint costing
// `delta` seconds and a mean time between failures `mtbf`.
double young_interval(double delta, double mtbf);
double daly_interval(double delta, double mtbf);
// The expected time of a span: a failure-free `first` seconds on the first try, `retry`
// on each try after a failure, each after a `restart` (see the header).
double expected_span(double lambda, double first, double retry, double restart);

struct RunEstimate {
  int steps = 0;
  double tokens = 0.0;  // steps x global batch x sequence (0 for a generic model)
  double step = 0.0;    // seconds per step
  double work = 0.0;    // steps x step: the time to train without failures or checkpoints
  int devices = 0;
  int nodes = 0;
  double lambda = 0.0;  // interruptions per second
  CheckpointCost checkpoint;
  scenario::CheckpointMode mode = scenario::CheckpointMode::sync;
  bool auto_interval = true;
  double young = 0.0;  // seconds of training between checkpoints, Young's estimate
  double daly = 0.0;   // and Daly's
  int interval_steps = 1;
  double interval = 0.0;  // the interval used: interval_steps x step
  int checkpoints = 0;
  double restart = 0.0;  // per interruption: job.failures.restart + the checkpoint's load
  double ideal = 0.0;    // work + checkpoint stalls (+ the last write, async): no failures
  double expected = 0.0;  // the expected time to train
  double interruptions = 0.0;
  double checkpointing = 0.0;  // seconds of checkpoint stalls, all told
  double restarting = 0.0;     // seconds in restarts, those cut short by a failure included
  double lost = 0.0;           // seconds of work redone
  double goodput = 0.0;        // work / expected
  // Energy and cost (has_power false: the device's power is not known).
  bool has_power = false;
  StepEnergy per_step;
  double energy = 0.0;          // joules, the whole run, facility included
  double tokens_per_kwh = 0.0;
  double device_hours = 0.0;    // devices x expected
  double cost = 0.0;            // device_hours x job.price (0: not priced)

  [[nodiscard]] double mtbf() const { return 1.0 / lambda; }
};

// The run of scenario `s` at `step` seconds per step; `energy` the step's (step_energy).
// Requires s.training.total_steps > 0.
RunEstimate estimate_run(const scenario::Scenario& s, double step, const StepEnergy& energy);
// The same from the step's predicted trace: its step time and its energy (step_energy).
RunEstimate estimate_run(const scenario::Scenario& s, const Trace& trace);

// The failure process played out `runs` times (seed: the same runs, bit for bit): the
// same spans, restarts and rollbacks as the closed form, failures drawn from the
// exponential. The closed form's expected time must lie inside its confidence interval.
struct RunSamples {
  int runs = 0;
  double mean = 0.0;  // seconds to train
  double stddev = 0.0;
  double ci95 = 0.0;  // half-width of the 95 % confidence interval of the mean
  double interruptions = 0.0;  // mean count
  double min = 0.0;
  double max = 0.0;
};
// Throws std::domain_error when the runs would draw over 10^8 interruptions in all (a job
// interrupted faster than it restarts and reaches a checkpoint: its expected time is
// astronomically long or infinite).
RunSamples sample_runs(const RunEstimate& r, int runs, std::uint64_t seed);

// The run block of `simulate` (text).
std::string describe_run(const RunEstimate& r, const scenario::Scenario& s, const RunSamples* samples);

}  // namespace parasim::report
