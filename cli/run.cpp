// parasim run SCENARIO: train the plan for real on the executor and report what it measured.
// parasim validate SCENARIO: predict, run, and put the two side by side.
//
// A plan of N ranks runs as N MPI processes. Started outside MPI, the command starts
// `mpirun -np N` on itself (this host, one rank per core or GPU); under mpirun or srun it
// is one of the ranks and checks that the job has as many as the plan needs.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/emulated.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "cli/run.hpp"
#include "topology/host_memory.hpp"
#include "scenario/describe.hpp"
#include "scenario/limits.hpp"
#include "exec/backend.hpp"
#include "exec/shard.hpp"
#include "exec/watchdog.hpp"
#include "workload/memory.hpp"
#include "report/chrome_trace.hpp"
#include "report/compare.hpp"
#include "report/metrics.hpp"
#include "report/table.hpp"
#include "sim/simulate.hpp"
#include "topology/units.hpp"

#ifdef PARASIM_HAVE_CPU_BACKEND
#include "exec/devices.hpp"
#include "exec/execute.hpp"
#endif

namespace parasim::cli {

namespace u = units;

scenario::Scenario load_for_run(const RunArgs& a) {
  ScenarioArgs args = a.scenario;
  if (a.emulated) {
    for (const std::string& o : emulated_overrides(emulated_cluster_up())) args.overrides.push_back(o);
  }
  scenario::Scenario s = args.load();
  if (a.steps) s.run.steps = *a.steps;
  if (a.warmup) s.run.warmup = *a.warmup;
  if (s.run.steps < 1) throw UsageError("--steps must be at least 1");
  if (s.run.warmup < 0) throw UsageError("--warmup must not be negative");
  if (!a.backend.empty()) s.run.backend = a.backend == "cuda" ? scenario::Backend::cuda : scenario::Backend::cpu;
  // The executor's GPT trains without dropout (deterministic, comparable across plans):
  // what runs, and what validate predicts, is the model without it (no masks, no kernels).
  s.model.dropout = 0.0;
  return s;
}

std::vector<double> rank_tensor_memory(const scenario::Scenario& s, const workload::MemoryReport& mem) {
  std::vector<double> out;
  for (int r = 0; r < s.plan.world(); ++r) {
    const workload::MemoryBreakdown& b = mem.stages[static_cast<std::size_t>(scenario::coord_of(s.plan, r).pp)];
    out.push_back(b.tensors());
  }
  return out;
}

void precheck(const scenario::Scenario& s) {
  const exec::BackendStatus b = exec::backend_status(to_string(s.run.backend));
  if (!b.usable) throw UsageError(fmt::format("backend {} cannot run here: {}", b.name, b.detail));
#ifndef PARASIM_HAVE_CUDA_DEVICE
  if (s.run.backend == scenario::Backend::cuda)
    throw UsageError("this build has no CUDA executor; run with --backend cpu");
#endif
  if (const std::string why = exec::unsupported_reason(s); !why.empty()) throw UsageError(why);
  const workload::MemoryReport mem = workload::memory_per_rank(s);
  if (!mem.fits()) throw UsageError("the plan does not fit in memory: " + workload::describe_memory(mem));
  // CPU ranks share this host's memory, whatever the device preset declares: each its
  // tensors and its own runtime (heap, MPI's shared-memory segments, BLAS's buffers, the
  // libraries' relocated data), measured as a quickstart rank's private memory less its
  // tensors: 128.5 MiB private (smaps_rollup Private_Dirty) at 24.3 MiB of tensors
  // (2026-11-28, release build, docs/reliability.md); the libraries' code is shared.
  if (s.run.backend == scenario::Backend::cpu) {
    constexpr double rank_runtime = 104.0 * 1024 * 1024;
    const std::vector<double> ranks = rank_tensor_memory(s, mem);
    const double tensors = std::accumulate(ranks.begin(), ranks.end(), 0.0);
    const double need = tensors + rank_runtime * s.plan.world();
    const double available = topology::host_available_memory();
    if (available > 0.0 && need > available) {
      throw UsageError(fmt::format("the plan's {} CPU ranks need {} together ({} of tensors, {} of runtime each), "
                                   "and this host has {} available; use fewer ranks or a smaller model or batch",
                                   s.plan.world(), u::format_bytes(need), u::format_bytes(tensors),
                                   u::format_bytes(rank_runtime), u::format_bytes(available)));
    }
  }
}

#ifdef PARASIM_HAVE_CPU_BACKEND

namespace {

// Runs the plan on this rank (every rank of the job calls it). Rank 0 prints progress.
Job run_job(const scenario::Scenario& s, const RunArgs& a, bool quiet) {
  // The CPU backend holds the device preset's memory; a GPU its own (or the preset's, if less).
  const auto capacity = static_cast<std::size_t>(s.cluster.device.memory_bytes);
  exec::watchdog::start(a.stall);  // from here every phase is watched, MPI start-up included
  exec::watchdog::phase("start-up");
  std::unique_ptr<exec::Device> owned;
  try {
    owned = exec::make_device(s.run.backend, capacity);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << '\n';
    std::exit(exit_failure);
  }
  exec::Device& dev = *owned;
  if (dev.world() != s.plan.world()) {
    if (dev.rank() == 0) {
      std::cerr << fmt::format("error: the plan needs {} ranks (dp {} x tp {} x pp {}); the job has {}\n",
                               s.plan.world(), s.plan.dp, s.plan.tp, s.plan.pp, dev.world());
    }
    std::exit(exit_bad_input);
  }
  const bool root = dev.rank() == 0;
  if (root && !quiet) {
    fmt::print("running {}: {} rank{} ({}), backend {}, {}, {}, {} + {} warm-up steps\n", s.name, s.plan.world(),
               s.plan.world() == 1 ? "" : "s", scenario::layout_string(s.plan), to_string(s.run.backend),
               exec::model_description(s), topology::to_string(s.training.precision), s.run.steps, s.run.warmup);
  }
  exec::RunOptions o;
  o.steps = s.run.steps;
  o.warmup = s.run.warmup;
  o.stall_seconds = a.stall;
  // PARASIM_FAULT=RANK:STEP:raise|exit injects a fault (tests/cli/cli_test.sh).
  if (const char* f = std::getenv("PARASIM_FAULT"); f != nullptr) {
    char kind[16] = {};
    if (std::sscanf(f, "%d:%d:%15s", &o.fault_rank, &o.fault_step, kind) == 3) o.fault_kind = kind;
  }
  const int total = s.run.steps + s.run.warmup;
  const int every = total > 50 ? total / 25 : 1;
  // Tokens for a language model, samples (images) for a generic one.
  const double items = static_cast<double>(s.training.global_batch) * s.model.tokens_per_sample();
  const char* unit = s.model.kind == scenario::ModelKind::transformer ? "tokens/s" : "samples/s";
  const bool scheduled = s.training.warmup_steps > 0 || s.training.lr_decay != scenario::LrDecay::constant;
  o.on_step = [&, total, every, unit, scheduled](const exec::StepRecord& r) {
    // A diverging step is always told (on stderr, after its line), whatever the output.
    const auto warn = [&r] {
      if (!r.divergence.empty()) std::cerr << fmt::format("warning: training diverges: {}\n", r.divergence);
    };
    if (quiet || ((r.index + 1) % every != 0 && r.index + 1 != total && r.divergence.empty())) return warn();
    // A worker whose gradients stand out from its data-parallel peers' (5x their norm) is
    // named, finite or not.
    const bool outlier = r.largest_ratio >= 5.0;
    fmt::print("step {:>4}/{}{}  {:>10}  loss {:.4f}  |g| {:<8.4g}  {} {}  {}{}{}{}{}\n", r.index + 1, total,
               r.warmup ? " (warm-up)" : "          ", u::format_duration(r.seconds), r.loss, r.grad_norm,
               u::format_count(items / r.seconds), unit, u::format_flop_rate(r.flops / r.seconds / s.plan.world()),
               scheduled ? fmt::format("  lr {:.3g}", r.learning_rate) : "",
               r.clip < 1.0 ? fmt::format("  clipped x{:.3g}", r.clip) : "",
               r.skipped ? fmt::format("  skipped: gradients overflowed, loss scale now {:g}", r.loss_scale) : "",
               outlier ? fmt::format("  rank {}'s gradients {:.3g}x its data-parallel peers'", r.largest_rank,
                                     r.largest_ratio)
                       : "");
    std::fflush(stdout);
    warn();
  };
  Job job;
  try {
    for (int i = 0; i < a.repeat; ++i) {
      if (root && !quiet && a.repeat > 1) fmt::print("run {} of {}\n", i + 1, a.repeat);
      job.runs.push_back(exec::execute(s, dev, o));
    }
  } catch (const exec::OutOfMemory& e) {
    std::cerr << "error: " << e.what() << '\n';
    dev.abort_all(exit_failure);
  } catch (const exec::Diverged& e) {
    // Every rank stops at the same step, and ends with status 5: one says why.
    exec::watchdog::stop();
    throw ExitStatus(exit_diverged, root ? fmt::format("{} (run.on_divergence: stop)", e.what()) : std::string());
  } catch (const std::exception& e) {
    std::cerr << fmt::format("error: rank {}: {}\n", dev.rank(), e.what());
    dev.abort_all(exit_failure);
  }
  exec::watchdog::stop();
  job.root = root;
  std::vector<std::size_t> order(job.runs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return job.runs[x].median_seconds < job.runs[y].median_seconds;
  });
  job.median = order[order.size() / 2];
  return job;
}

void print_summary(const scenario::Scenario& s, const exec::Measurement& m) {
  const double tokens = static_cast<double>(s.training.global_batch) * s.model.tokens_per_sample();
  if (m.steps.empty()) {
    fmt::print("\nno step was measured\n");
    return;
  }
  const double first = m.steps.front().loss;
  const double last = m.steps.back().loss;
  fmt::print("\nmeasured over {} steps\n", s.run.steps);
  fmt::print("step time          {} median, {} mean\n", u::format_duration(m.median_seconds), u::format_duration(m.mean_seconds));
  if (s.model.kind == scenario::ModelKind::transformer) {
    fmt::print("throughput         {:.1f} samples/s, {} tokens/s\n", s.training.global_batch / m.median_seconds,
               u::format_count(tokens / m.median_seconds));
  } else {
    fmt::print("throughput         {:.1f} samples/s\n", s.training.global_batch / m.median_seconds);
  }
  fmt::print("model              {}\n", m.model_note);
  if (!m.kernel_paths.empty()) fmt::print("kernels            {}\n", m.kernel_paths);
  fmt::print("achieved           {} per rank (FLOPs executed: {:.4g} per step)\n",
             u::format_flop_rate(m.flops_per_step / m.median_seconds / s.plan.world()), m.flops_per_step);
  fmt::print("loss               {:.4f} -> {:.4f}\n", first, last);
  if (m.expert_load > 0.0) {
    fmt::print("expert load        the busiest rank's experts computed {:.2f} x the mean's rows (ep {})\n", m.expert_load,
               s.plan.ep);
  }
  if (s.training.precision == scenario::Dtype::fp16 && !s.training.loss_scaling) {
    fmt::print("loss scale         none (training.loss_scaling: none): small gradients underflow, large ones overflow unseen\n");
  } else if (s.training.precision == scenario::Dtype::fp16) {
    const auto skipped = std::count_if(m.steps.begin(), m.steps.end(), [](const exec::StepRecord& r) { return r.skipped; });
    fmt::print("loss scale         {:g} (from {:g}; {} step{} skipped for overflow)\n", m.steps.back().loss_scale,
               s.training.loss_scale, skipped, skipped == 1 ? "" : "s");
  }
  std::string peaks;
  for (std::size_t r = 0; r < m.peak_memory.size(); ++r) {
    peaks += fmt::format("{}{}: {}", r == 0 ? "" : ", ", r, u::format_bytes(m.peak_memory[r]));
    if (r == 7 && m.peak_memory.size() > 9) {
      peaks += fmt::format(", ... ({} ranks)", m.peak_memory.size());
      break;
    }
  }
  fmt::print("peak memory        {}\n", peaks);
}

}  // namespace

Job launch_and_run(const scenario::Scenario& s, const RunArgs& a) {
  if (!under_mpi()) {
    precheck(s);
    if (a.emulated) {
      relaunch_under_mpirun(s.plan.world(), a.stall, emulated_mpirun_args(emulated_cluster_up()) + " " + a.mpirun_args);
    }
    if (s.plan.world() > 1) relaunch_under_mpirun(s.plan.world(), a.stall, a.mpirun_args);
  }
  const StdoutToStderr json_alone(a.json.on_stdout());
  Job job = run_job(s, a, false);
  if (job.root) print_summary(s, job.measured());
  return job;
}

nlohmann::ordered_json steps_json(const exec::Measurement& m) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& r : m.steps) {
    steps.push_back({{"step", r.index + 1},  // from 1, as the terminal and run.inject count them
                     {"warmup", r.warmup},
                     {"seconds", r.seconds},
                     {"loss", r.loss},
                     {"flops", r.flops},
                     {"skipped", r.skipped},
                     {"loss_scale", r.loss_scale},
                     {"grad_norm", std::isfinite(r.grad_norm) ? nlohmann::ordered_json(r.grad_norm) : nlohmann::ordered_json(nullptr)},
                     {"clip", r.clip},
                     {"learning_rate", r.learning_rate},
                     {"largest_gradient_rank", r.largest_rank},
                     {"largest_gradient_ratio", r.largest_ratio},
                     {"divergence", r.divergence}});
  }
  return steps;
}

namespace {

void run_run(const RunArgs& a) {
  const scenario::Scenario s = load_for_run(a);
  const Job job = launch_and_run(s, a);
  if (!job.root) return;
  const exec::Measurement& m = job.measured();
  const topology::Cluster cluster(s.cluster);
  OutputSet out;
  if (!a.trace.empty()) out.add(a.trace, report::chrome_trace_file(m.trace, m.program, cluster, a.trace));
  if (a.json.wanted()) {
    nlohmann::ordered_json j{{"scenario", s.name},
                             {"ranks", s.plan.world()},
                             {"backend", to_string(s.run.backend)},
                             {"model", m.model_note},
                             {"kernel_paths", m.kernel_paths},
                             {"median_step_time", m.median_seconds},
                             {"mean_step_time", m.mean_seconds},
                             {"flops_per_step", m.flops_per_step},
                             {"expert_load", m.expert_load},
                             {"peak_memory", m.peak_memory},
                             {"steps", steps_json(m)}};
    out.add(a.json.path, stamped("run", j, 2).dump(2) + "\n");  // 2: steps counted from 1
  }
  out.commit();
}

}  // namespace

#else

namespace {
void run_run(const RunArgs& a) {
  precheck(load_for_run(a));  // names the missing backend
  throw UsageError(fmt::format("this build has no CPU executor: {}", exec::cpu_status().detail));
}
}  // namespace

#endif

void add_run_options(CLI::App& cmd, RunArgs& a) {
  a.scenario.add_to(cmd);
  cmd.add_option("--steps", a.steps, "Measured steps (default: the scenario's run.steps)")
      ->check(CLI::Range(1, scenario::limits::steps));
  cmd.add_option("--warmup", a.warmup, "Warm-up steps before measuring (default: run.warmup)")
      ->check(CLI::Range(0, scenario::limits::steps));
  cmd.add_option("--backend", a.backend, "Executor backend (default: run.backend)")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--mpirun-args", a.mpirun_args,
                 "Arguments for the mpirun that starts the ranks, e.g. '--hostfile hosts' (split at spaces)")
      ->type_name("ARGS");
  cmd.add_flag("--emulated", a.emulated,
               "Run on the emulated cluster (`parasim cluster up`): each node's ranks in its network namespace, "
               "nodes joined by the shaped links; the prediction's cluster is the emulated one");
  cmd.add_option("--stall-timeout", a.stall, "Seconds without progress after which a rank ends the job")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0.1 || v > 86400.0) {
              return fmt::format("expected seconds from 0.1 to 86400, got '{}'", text);
            }
            return {};
          },
          "SECONDS", "stall timeout"))
      ->capture_default_str();
}

void add_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Train the plan for real on the executor: step time, loss, throughput, memory");
  add_run_options(*cmd, *args);
  cmd->add_option("--trace", args->trace, "Write the measured step as Chrome-trace JSON to FILE")->type_name("FILE")
      ->check(output_file());
  args->json.add_to(*cmd, "The measurements");
  cmd->callback([args] { run_run(*args); });
}


}  // namespace parasim::cli
