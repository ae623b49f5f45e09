#include "report/run_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "report/metrics.hpp"
#include "topology/units.hpp"

namespace parasim::report {

namespace {

// The nodes the plan's devices fill.
int nodes_of(const scenario::Scenario& s) {
  const int per_node = std::max(1, s.cluster.gpus_per_node);
  return (s.plan.world() + per_node - 1) / per_node;
}

}  // namespace

StepEnergy step_energy(const scenario::Scenario& s, double step, double compute, double communication) {
  const scenario::JobSpec& j = s.job;
  StepEnergy e;
  e.compute = std::clamp(compute, 0.0, step);
  e.communication = std::clamp(communication, 0.0, step - e.compute);
  e.idle = step - e.compute - e.communication;
  if (!j.has_power()) return e;
  const double devices = s.plan.world();
  const double nodes = nodes_of(s);
  e.devices = devices * (e.compute * j.power_busy + e.communication * j.power_communication + e.idle * j.power_idle);
  e.nodes = nodes * j.node_power * step;
  e.facility = (j.pue - 1.0) * (e.devices + e.nodes);
  return e;
}

StepEnergy step_energy(const scenario::Scenario& s, const Trace& trace) {
  using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // Per rank that has spans: its compute time and its communication not under compute.
  std::vector<Intervals> compute(static_cast<std::size_t>(std::max(trace.world, 1)));
  std::vector<Intervals> comm(compute.size());
  for (const Span& sp : trace.spans) {
    if (sp.rank < 0 || static_cast<std::size_t>(sp.rank) >= compute.size() || sp.end <= sp.start) continue;
    if (sp.kind == program::OpKind::compute) {
      if (sp.stream == program::Stream::compute) compute[static_cast<std::size_t>(sp.rank)].emplace_back(sp.start, sp.end);
    } else if (sp.kind != program::OpKind::recv) {
      comm[static_cast<std::size_t>(sp.rank)].emplace_back(sp.start, sp.end);
    }
  }
  std::vector<double> busy(compute.size(), 0.0), talking(compute.size(), 0.0);
  for (std::size_t r = 0; r < compute.size(); ++r) {
    if (compute[r].empty() && comm[r].empty()) continue;
    busy[r] = static_cast<double>(union_length(compute[r])) * 1e-12;
    talking[r] = static_cast<double>(uncovered_length(comm[r], compute[r])) * 1e-12;
  }
  const int world = std::max(1, s.plan.world());
  double c = 0.0, m = 0.0;
  for (int r = 0; r < world; ++r) {
    const int from = r < trace.world ? trace.mirror(r) : 0;
    c += busy[static_cast<std::size_t>(from)];
    m += talking[static_cast<std::size_t>(from)];
  }
  return step_energy(s, trace.step_seconds(), c / world, m / world);
}

CheckpointCost checkpoint_cost(const scenario::Scenario& s) {
  const scenario::JobSpec& j = s.job;
  const scenario::TrainingSpec& t = s.training;
  CheckpointCost c;
  // Megatron-Core and PyTorch DCP save the 16-bit (or fp32) weights, and with the
  // optimizer its fp32 master weights and its state.
  const double weights = topology::dtype_bytes(topology::storage_dtype(t.precision));
  const bool master = t.master_weights && weights < 4;
  const double optimizer = j.save_optimizer ? (master ? 4.0 : 0.0) + scenario::optimizer_state_bytes(t.optimizer) : 0.0;
  c.bytes = s.model.parameter_count() * (weights + optimizer);
  const int world = std::max(1, s.plan.world());
  const int per_node = std::max(1, s.cluster.gpus_per_node);
  // Sharded: every rank writes an equal share. Otherwise one data-parallel replica's ranks
  // write theirs (its model-parallel shards), tp innermost: they fill whole nodes.
  c.writers = j.sharded ? world : std::max(1, world / std::max(1, s.plan.grad_ranks()));
  c.bytes_per_rank = c.bytes / c.writers;
  const int writer_nodes = std::clamp((c.writers + per_node - 1) / per_node, 1, std::max(1, s.cluster.nodes));
  c.bytes_per_node = c.bytes / writer_nodes;
  c.write = c.bytes / j.storage_bandwidth;
  if (j.node_storage_bandwidth > 0.0) c.write = std::max(c.write, c.bytes_per_node / j.node_storage_bandwidth);
  c.load = c.write;
  // The copy to host memory: each device's PCIe link, shared by the devices behind its
  // switch (cluster.host); not described: not counted.
  const topology::NodeHostSpec& h = s.cluster.host;
  if (h.link_bandwidth > 0.0) c.copy = c.bytes_per_rank * std::max(1, h.devices_per_link) / h.link_bandwidth;
  c.stall = j.checkpoint_mode == scenario::CheckpointMode::sync ? c.write : c.copy;
  return c;
}

double failure_rate(const scenario::Scenario& s) {
  return s.plan.world() / s.job.device_mtbf + nodes_of(s) / s.job.node_mtbf;
}

double young_interval(double delta, double mtbf) { return std::sqrt(2.0 * delta * mtbf); }

double daly_interval(double delta, double mtbf) {
  if (delta >= 2.0 * mtbf) return mtbf;
  const double x = delta / (2.0 * mtbf);
  return std::sqrt(2.0 * delta * mtbf) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta;
}

double expected_span(double lambda, double first, double retry, double restart) {
  // (1 - e^{-λa}) e^{λ(R + a')} / λ, with expm1 for small λa.
  return -std::expm1(-lambda * first) * std::exp(lambda * (restart + retry)) / lambda;
}

namespace {

// The spans of a run: `count` spans of `first` / `retry` seconds (see the header), in runs
// of equal spans.
struct SpanRun {
  long long count = 0;
  double first = 0.0;
  double retry = 0.0;
};

std::vector<SpanRun> spans_of(const RunEstimate& r, scenario::CheckpointMode mode) {
  const bool async = mode == scenario::CheckpointMode::async;
  if (r.steps <= 0) return {};
  const double s = r.checkpoint.stall;
  const double w = async ? r.checkpoint.write : 0.0;
  const long long n = (r.steps + r.interval_steps - 1) / r.interval_steps;
  const double tau = r.interval;
  const double last = static_cast<double>(r.steps - (n - 1) * static_cast<long long>(r.interval_steps)) * r.step;
  std::vector<SpanRun> out;
  // The first span waits for its own write (nothing was being written before it).
  const double first_tau = n == 1 ? last : tau;
  out.push_back({1, first_tau + s + w, first_tau + s + w});
  if (n > 2) out.push_back({n - 2, tau + s, tau + s + w});
  if (n > 1) out.push_back({1, last + s, last + s + w});
  return out;
}

}  // namespace

RunEstimate estimate_run(const scenario::Scenario& s, double step, const StepEnergy& energy) {
  const scenario::JobSpec& j = s.job;
  RunEstimate r;
  r.steps = s.training.total_steps;
  r.step = step;
  r.work = r.steps * step;
  r.tokens = s.model.kind == scenario::ModelKind::transformer
                 ? static_cast<double>(r.steps) * s.training.global_batch * s.model.seq_len
                 : 0.0;
  r.devices = s.plan.world();
  r.nodes = nodes_of(s);
  r.lambda = failure_rate(s);
  r.checkpoint = checkpoint_cost(s);
  r.mode = j.checkpoint_mode;
  const bool async = r.mode == scenario::CheckpointMode::async;
  r.young = young_interval(r.checkpoint.stall, r.mtbf());
  r.daly = daly_interval(r.checkpoint.stall, r.mtbf());
  r.auto_interval = j.checkpoint_steps == 0 && j.checkpoint_interval <= 0.0;
  const double wanted = j.checkpoint_steps > 0 ? j.checkpoint_steps * step
                        : j.checkpoint_interval > 0.0 ? j.checkpoint_interval
                                                      : r.daly;
  long long k = step > 0.0 ? std::llround(wanted / step) : 1;
  // Asynchronous: the write must end before the next checkpoint's copy begins.
  if (async && step > 0.0) {
    k = std::max<long long>(k, static_cast<long long>(std::ceil((r.checkpoint.write - r.checkpoint.stall) / step)));
  }
  r.interval_steps = static_cast<int>(std::clamp<long long>(k, 1, std::max(1, r.steps)));
  r.interval = r.interval_steps * step;
  r.restart = j.restart + r.checkpoint.load;

  const std::vector<SpanRun> spans = spans_of(r, r.mode);
  r.checkpoints = 0;
  for (const SpanRun& sp : spans) {
    const auto n = static_cast<double>(sp.count);
    r.checkpoints += static_cast<int>(sp.count);
    r.expected += n * expected_span(r.lambda, sp.first, sp.retry, r.restart);
    // Time in restarts: a span fails its first try with probability 1 - e^{-λa}, then
    // takes 1 / e^{-λa'} restart-and-retry cycles on average, each restart (itself cut
    // short by failures) (e^{λR} - 1) / λ long.
    r.restarting += n * -std::expm1(-r.lambda * sp.first) * std::exp(r.lambda * sp.retry) *
                    std::expm1(r.lambda * r.restart) / r.lambda;
  }
  r.checkpointing = r.checkpoints * r.checkpoint.stall;
  r.ideal = r.work + r.checkpointing + (async ? r.checkpoint.write : 0.0);
  r.interruptions = r.lambda * r.expected;
  r.lost = std::max(0.0, r.expected - r.ideal - r.restarting);
  r.goodput = r.expected > 0.0 ? r.work / r.expected : 0.0;

  r.device_hours = r.devices * r.expected / 3600.0;
  r.cost = r.device_hours * j.price;
  r.has_power = j.has_power();
  r.per_step = energy;
  if (r.has_power && step > 0.0) {
    // Steps done (the run's and those redone) at the step's energy; the stalls and
    // restarts with every device idle and the nodes' other parts on.
    const double steps_done = r.steps + r.lost / step;
    const double idle_watts = (r.devices * j.power_idle + r.nodes * j.node_power) * j.pue;
    r.energy = steps_done * energy.total() + (r.checkpointing + r.restarting) * idle_watts;
    r.tokens_per_kwh = r.energy > 0.0 ? r.tokens / (r.energy / 3.6e6) : 0.0;
  }
  return r;
}

RunEstimate estimate_run(const scenario::Scenario& s, const Trace& trace) {
  return estimate_run(s, trace.step_seconds(), step_energy(s, trace));
}

RunSamples sample_runs(const RunEstimate& r, int runs, std::uint64_t seed) {
  RunSamples out;
  out.runs = std::max(1, runs);
  // Each interruption is a draw: runs that expect over 10^8 of them in all (a job failing
  // faster than it restarts and reaches a checkpoint) are not played out.
  const double per_run = r.lambda * r.expected;
  if (!std::isfinite(per_run) || per_run * out.runs > 1e8) {
    throw std::domain_error(fmt::format(
        "not played out: {} runs would take {:.3g} interruptions each (the job is interrupted every {}, its restart "
        "takes {})",
        out.runs, per_run, units::format_span(r.mtbf()), units::format_span(r.restart)));
  }
  const std::vector<SpanRun> spans = spans_of(r, r.mode);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> next(r.lambda);
  double sum = 0.0, sum2 = 0.0, failures = 0.0;
  out.min = std::numeric_limits<double>::infinity();
  out.max = 0.0;
  for (int run = 0; run < out.runs; ++run) {
    double t = 0.0;
    long long count = 0;
    double f = next(rng);  // time to the next failure
    // Runs a stretch of `length` that a failure cuts short: true when it ends first (the
    // clock of the next failure moves on), false when a failure ends it (a new clock).
    auto survives = [&](double length) {
      if (f >= length) {
        t += length;
        f -= length;
        return true;
      }
      t += f;
      ++count;
      f = next(rng);
      return false;
    };
    for (const SpanRun& sp : spans) {
      long long left = sp.count;
      while (left > 0) {
        // Whole first tries that end before the next failure, at once.
        if (f >= sp.first) {
          const long long k = std::min<long long>(left, static_cast<long long>(f / sp.first));
          t += static_cast<double>(k) * sp.first;
          f -= static_cast<double>(k) * sp.first;
          left -= k;
          if (left == 0) break;
          if (f >= sp.first) continue;
        }
        // Interrupted: lose the try, then restart (itself interruptible) and retry until a
        // retry ends.
        survives(sp.first);
        do {
          while (!survives(r.restart)) {
          }
        } while (!survives(sp.retry));
        --left;
      }
    }
    sum += t;
    sum2 += t * t;
    failures += static_cast<double>(count);
    out.min = std::min(out.min, t);
    out.max = std::max(out.max, t);
  }
  const double n = out.runs;
  out.mean = sum / n;
  out.stddev = n > 1 ? std::sqrt(std::max(0.0, (sum2 - n * out.mean * out.mean) / (n - 1))) : 0.0;
  out.ci95 = 1.96 * out.stddev / std::sqrt(n);
  out.interruptions = failures / n;
  return out;
}

std::string describe_run(const RunEstimate& r, const scenario::Scenario& s, const RunSamples* samples) {
  namespace u = units;
  const scenario::JobSpec& j = s.job;
  std::string out;
  const std::string length = r.tokens > 0.0 ? fmt::format("{} tokens, {} steps", u::format_count(r.tokens), r.steps)
                                            : fmt::format("{} steps", r.steps);
  out += fmt::format("run ({}, {} device{} in {} node{})\n", length, r.devices, r.devices == 1 ? "" : "s", r.nodes,
                     r.nodes == 1 ? "" : "s");
  if (!std::isfinite(r.expected)) {
    out += fmt::format("  time to train    never: the job is interrupted every {} and a restart takes {}; it does not reach "
                       "its next checkpoint ({} without failures)\n",
                       u::format_span(r.mtbf()), u::format_span(r.restart), u::format_span(r.ideal));
  } else {
    out += fmt::format("  time to train    {} expected, {} without failures ({} of steps alone); goodput {:.1f} %\n",
                       u::format_span(r.expected), u::format_span(r.ideal), u::format_span(r.work), 100.0 * r.goodput);
  }
  out += fmt::format("  interruptions    {:.1f} expected, one every {} (each device {}, each node {})\n", r.interruptions,
                     u::format_span(r.mtbf()), u::format_span(j.device_mtbf), u::format_span(j.node_mtbf));
  const std::string how = r.auto_interval ? fmt::format("Daly's optimum; Young's {}", u::format_span(r.young))
                                          : std::string("as set");
  out += fmt::format("  checkpoints      every {} steps ({}, {}): {} each, {} {}, written in {}\n", r.interval_steps,
                     u::format_span(r.interval), how, u::format_bytes(r.checkpoint.bytes),
                     j.checkpoint_mode == scenario::CheckpointMode::sync ? "training stopped for" : "copied to host in",
                     u::format_span(r.checkpoint.stall), u::format_span(r.checkpoint.write));
  out += fmt::format("  time lost        {} checkpointing, {} restarting ({} each, the load included), {} of work redone\n",
                     u::format_span(r.checkpointing), u::format_span(r.restarting), u::format_span(r.restart),
                     u::format_span(r.lost));
  if (samples != nullptr) {
    out += fmt::format("  monte carlo      {} runs: {} ± {} (95 %), {:.1f} interruptions; closed form {}\n", samples->runs,
                       u::format_span(samples->mean), u::format_span(samples->ci95), samples->interruptions,
                       std::abs(samples->mean - r.expected) <= samples->ci95 ? "inside" : "outside");
  }
  if (r.has_power) {
    const double mwh = r.energy / 3.6e9;
    const StepEnergy& e = r.per_step;
    out += fmt::format("  energy           {:.4g} MWh (a step: {:.3g} kWh; devices computing {:.0f} %, communicating {:.0f} %, "
                       "idle {:.0f} % of the step), PUE {:.3g}",
                       mwh, e.total() / 3.6e6, r.step > 0 ? 100 * e.compute / r.step : 0.0,
                       r.step > 0 ? 100 * e.communication / r.step : 0.0, r.step > 0 ? 100 * e.idle / r.step : 0.0, j.pue);
    if (r.tokens_per_kwh > 0.0) out += fmt::format(", {} tokens per kWh", u::format_count(r.tokens_per_kwh));
    out += "\n";
  }
  out += fmt::format("  device-hours     {}", r.device_hours < 1000 ? fmt::format("{:.3g}", r.device_hours)
                                                                      : u::format_count(r.device_hours));
  if (r.cost > 0.0) out += fmt::format(", cost {} at {:.4g} per device-hour", u::format_count(r.cost), j.price);
  out += "\n";
  return out;
}

}  // namespace parasim::report
