// parasim simulate SCENARIO: predict one training step and say where the time goes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "scenario/describe.hpp"
#include "workload/memory.hpp"
#include "program/program.hpp"
#include "report/chrome_trace.hpp"
#include "report/gzip.hpp"
#include "report/metrics.hpp"
#include "report/run_model.hpp"
#include "report/table.hpp"
#include "sim/simulate.hpp"
#include "topology/units.hpp"

namespace parasim::cli {
namespace {

struct SimulateArgs {
  ScenarioArgs scenario;
  JsonOption json;
  bool require_fit = false;
  std::string trace;
  std::string fold = "auto";
  int runs = 0;  // Monte-Carlo runs of the failure process (0: the closed form only)
};

sim::FoldMode fold_mode(const std::string& s) {
  if (s == "always") return sim::FoldMode::always;
  if (s == "never") return sim::FoldMode::never;
  return sim::FoldMode::automatic;
}

// "64 of 1,024 (16 data-parallel replicas folded, exact)"
std::string ranks_line(const scenario::Scenario& s, const sim::Prediction& p) {
  if (!p.program.one_replica()) return fmt::format("all {}", s.plan.world());
  return fmt::format("{} of {} ({} data-parallel replicas folded, {})", p.simulated_ranks(), s.plan.world(),
                     s.plan.dp, p.stats.exact ? "exact" : "approximate");
}

nlohmann::ordered_json figures_json(const report::StepFigures& f, const workload::MemoryReport& mem) {
  nlohmann::ordered_json comm = nlohmann::ordered_json::object();
  for (std::size_t d = 0; d < report::dimension_count; ++d) {
    comm[report::dimension_names[static_cast<std::size_t>(d)]] = {{"time", f.comm_mean[static_cast<std::size_t>(d)]},
                                                                   {"exposed", f.exposed_mean[static_cast<std::size_t>(d)]}};
  }
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const auto& r : f.ranks) {
    ranks.push_back({{"rank", r.rank}, {"compute", r.compute}, {"tp", r.comm[0]}, {"pp", r.comm[1]}, {"dp", r.comm[2]},
                     {"cp", r.comm[3]}, {"ep", r.comm[4]}, {"offload", r.comm[5]}, {"syncbn", r.comm[6]}, {"tp_exposed", r.exposed[0]}, {"pp_exposed", r.exposed[1]},
                     {"dp_exposed", r.exposed[2]}, {"cp_exposed", r.exposed[3]}, {"ep_exposed", r.exposed[4]}, {"offload_exposed", r.exposed[5]}, {"syncbn_exposed", r.exposed[6]},
                     {"bubble", r.bubble * f.step_time}, {"bubble_fraction", r.bubble}});
  }
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const auto& l : f.busiest_links) {
    links.push_back({{"link", l.name}, {"class", l.cls}, {"bytes", l.bytes}, {"utilisation", l.utilisation}});
  }
  nlohmann::ordered_json limit{{"kind", f.limit.kind}, {"fraction", f.limit.fraction}};
  if (f.limit.link.link >= 0) {
    limit["link"] = {{"name", f.limit.link.name}, {"class", f.limit.link.cls}, {"utilisation", f.limit.link.utilisation}};
  }
  return {{"step_time", f.step_time},
          {"samples_per_s", f.samples_per_s},
          {"tokens_per_s", f.tokens_per_s},
          {"model_flops_per_step", f.model_flops},
          {"flops_per_device", f.flops_per_device},
          {"mfu", f.mfu},
          {"bubble_fraction", f.bubble_fraction},
          {"communication", comm},
          {"memory", memory_json(mem)},
          {"busiest_links", links},
          {"bottleneck", f.bottleneck},
          {"limit", limit},
          {"ranks", ranks}};
}

// Communication per rank (each rank up to 16, else the mean of each pipeline stage's ranks).
report::Table per_rank_table(const scenario::Scenario& s, const report::StepFigures& f) {
  namespace u = units;
  using A = report::Table::Align;
  const bool each = f.ranks.size() <= 16;
  // The cp and ep columns only where the plan has them.
  std::vector<std::size_t> dims;
  std::vector<std::string> head{each ? "rank" : "stage", "compute"};
  for (std::size_t d = 0; d < report::dimension_count; ++d) {
    if (!report::dimension_shown(s, d)) continue;
    dims.push_back(d);
    head.push_back(fmt::format("{} (exposed)", report::dimension_names[d]));
  }
  head.emplace_back("bubble");
  report::Table t(head, std::vector<A>(head.size(), A::right));
  const int rows = each ? static_cast<int>(f.ranks.size()) : s.plan.pp;
  for (int row = 0; row < rows; ++row) {
    report::RankFigures sum;
    int n = 0;
    for (const auto& r : f.ranks) {
      if (each ? r.rank != row : scenario::coord_of(s.plan, r.rank).pp != row) continue;
      ++n;
      sum.compute += r.compute;
      sum.bubble += r.bubble;
      for (std::size_t d : dims) {
        sum.comm[d] += r.comm[d];
        sum.exposed[d] += r.exposed[d];
      }
    }
    if (n == 0) continue;
    std::vector<std::string> cells{std::to_string(row), u::format_duration(sum.compute / n)};
    for (std::size_t d : dims) {
      cells.push_back(fmt::format("{} ({})", u::format_duration(sum.comm[d] / n), u::format_duration(sum.exposed[d] / n)));
    }
    // RankFigures::bubble is a fraction of the step: shown as the time it stands for.
    cells.push_back(fmt::format("{} ({:.1f} %)", u::format_duration(sum.bubble / n * f.step_time), 100.0 * sum.bubble / n));
    t.add_row(cells);
  }
  return t;
}

// fp16's dynamic loss scaling in its steady state: the scale doubles after
// loss_scale_window overflow-free steps until the gradients overflow, and that step is
// skipped (the scale halved): one step in window + 1 does no training.
double fp16_skipped_fraction(const scenario::Scenario& s) {
  return 1.0 / (s.training.loss_scale_window + 1.0);
}

// On a cluster with degraded parts or jitter: the same plan on the uniform cluster, and
// what the degraded links carried.
struct Heterogeneity {
  double uniform_step = 0.0;
  struct DegradedLinks {
    std::string name;
    double factor = 1.0;
    int links = 0;
    double busiest = 0.0;  // the highest utilisation among them, of the degraded bandwidth
  };
  std::vector<DegradedLinks> links;
};

Heterogeneity heterogeneity(const scenario::Scenario& s, const report::Trace& trace, const topology::Cluster& cluster,
                            sim::FoldMode fold) {
  Heterogeneity h;
  scenario::Scenario uniform = s;
  uniform.cluster.degraded.clear();
  uniform.cluster.jitter = {};
  h.uniform_step = sim::predict(uniform, {false, fold, {}, {}}).trace.step_seconds();
  for (const topology::Degraded& d : s.cluster.degraded) {
    if (d.link.empty()) continue;
    Heterogeneity::DegradedLinks l{d.link, d.factor, 0, 0.0};
    for (int id : cluster.links_named(d.link)) {
      ++l.links;
      for (const report::LinkUse& u : trace.links) {
        if (u.link == id && trace.step_end > 0) {
          l.busiest = std::max(l.busiest, u.bytes / (cluster.link(id).bandwidth * trace.step_seconds()));
        }
      }
    }
    h.links.push_back(l);
  }
  return h;
}

nlohmann::ordered_json heterogeneity_json(const Heterogeneity& h, const report::StepFigures& f) {
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const auto& l : h.links) {
    links.push_back({{"link", l.name}, {"factor", l.factor}, {"links", l.links}, {"busiest_utilisation", l.busiest}});
  }
  return {{"uniform_step_time", h.uniform_step},
          {"lost", f.step_time - h.uniform_step},
          {"slowest_rank", f.slowest_rank},
          {"slowest_compute", f.slowest_compute},
          {"median_compute", f.median_compute},
          {"degraded_links", links}};
}

void print_heterogeneity(const scenario::Scenario& s, const Heterogeneity& h, const report::StepFigures& f) {
  namespace u = units;
  const double lost = f.step_time - h.uniform_step;
  fmt::print("non-uniform cluster  step {} against {} with every device and link at its rate: {} {} ({:+.1f} %)\n",
             u::format_duration(f.step_time), u::format_duration(h.uniform_step), u::format_duration(std::abs(lost)),
             lost >= 0 ? "lost" : "gained", h.uniform_step > 0 ? 100 * lost / h.uniform_step : 0.0);
  const double speed = s.cluster.compute_factor(f.slowest_rank);
  fmt::print("  slowest rank {}: {} of compute against the median rank's {}{}\n", f.slowest_rank,
             u::format_duration(f.slowest_compute), u::format_duration(f.median_compute),
             speed < 1.0 ? fmt::format(" (computes at {:.2g}x its speed)", speed) : "");
  if (s.cluster.jitter.sigma > 0.0) {
    fmt::print("  jitter: each compute op's time x exp(sigma z - sigma^2/2), sigma {:.3g}, seed {}\n", s.cluster.jitter.sigma,
               s.cluster.jitter.seed);
  }
  for (const auto& l : h.links) {
    fmt::print("  degraded link {} ({} link{} at {:.0f} % of their bandwidth): busiest at {:.1f} % of what is left\n", l.name,
               l.links, l.links == 1 ? "" : "s", 100 * l.factor, 100 * l.busiest);
  }
  fmt::print("\n");
}

// SyncBN: the same plan with each rank's own BatchNorm statistics, and what the step pays
// for synchronising them: its collectives (the syncbn dimension) and, beyond them, the
// host's lost lead (each forward gather stops it).
struct SyncBnCost {
  double local_step = 0.0;
  double collectives = 0.0;  // exposed, per rank
};

SyncBnCost syncbn_cost(const scenario::Scenario& s, const report::StepFigures& f, sim::FoldMode fold) {
  scenario::Scenario local = s;
  local.training.sync_batch_norm = false;
  return {sim::predict(local, {false, fold, {}, {}}).trace.step_seconds(),
          f.exposed_mean[static_cast<std::size_t>(report::Dimension::syncbn)]};
}

void print_syncbn(const SyncBnCost& c, const report::StepFigures& f) {
  namespace u = units;
  const double cost = f.step_time - c.local_step;
  fmt::print("SyncBN             step {} against {} with each rank's own statistics: {} ({:+.1f} %), of which {} in its "
             "collectives and {} the host's stalls after each forward gather\n\n",
             u::format_duration(f.step_time), u::format_duration(c.local_step), u::format_duration(cost),
             c.local_step > 0 ? 100 * cost / c.local_step : 0.0, u::format_duration(c.collectives),
             u::format_duration(std::max(0.0, cost - c.collectives)));
}

nlohmann::ordered_json run_json(const report::RunEstimate& r, const report::RunSamples* mc) {
  nlohmann::ordered_json j{{"steps", r.steps},
                           {"tokens", r.tokens},
                           {"step_time", r.step},
                           {"devices", r.devices},
                           {"nodes", r.nodes},
                           {"work", r.work},
                           {"ideal", r.ideal},
                           {"expected", r.expected},
                           {"goodput", r.goodput},
                           {"interruptions", r.interruptions},
                           {"mtbf", r.mtbf()},
                           {"checkpoint",
                            {{"mode", scenario::to_string(r.mode)},
                             {"interval", r.interval},
                             {"interval_steps", r.interval_steps},
                             {"interval_auto", r.auto_interval},
                             {"young", r.young},
                             {"daly", r.daly},
                             {"count", r.checkpoints},
                             {"bytes", r.checkpoint.bytes},
                             {"bytes_per_rank", r.checkpoint.bytes_per_rank},
                             {"writers", r.checkpoint.writers},
                             {"write", r.checkpoint.write},
                             {"stall", r.checkpoint.stall},
                             {"load", r.checkpoint.load}}},
                           {"restart", r.restart},
                           {"checkpointing", r.checkpointing},
                           {"restarting", r.restarting},
                           {"lost", r.lost},
                           {"device_hours", r.device_hours},
                           {"cost", r.cost}};
  if (r.has_power) {
    j["energy"] = {{"joules", r.energy},
                   {"mwh", r.energy / 3.6e9},
                   {"tokens_per_kwh", r.tokens_per_kwh},
                   {"step_joules", r.per_step.total()},
                   {"step_devices_joules", r.per_step.devices},
                   {"step_nodes_joules", r.per_step.nodes},
                   {"step_facility_joules", r.per_step.facility},
                   {"device_compute", r.per_step.compute},
                   {"device_communication", r.per_step.communication},
                   {"device_idle", r.per_step.idle}};
  }
  if (mc != nullptr) {
    j["monte_carlo"] = {{"runs", mc->runs},           {"mean", mc->mean}, {"stddev", mc->stddev}, {"ci95", mc->ci95},
                        {"interruptions", mc->interruptions}, {"min", mc->min},   {"max", mc->max}};
  }
  return j;
}

void run_simulate(const SimulateArgs& a) {
  namespace u = units;
  const scenario::Scenario s = a.scenario.load();
  if (a.runs > 0 && s.training.total_steps == 0) {
    throw UsageError("--runs plays the whole run's failures out: the scenario needs training.tokens or training.steps");
  }
  const topology::Cluster cluster(s.cluster);
  // A large unfolded step takes a while: its progress on a terminal.
  Progress progress(a.json.on_stdout());
  sim::PredictOptions po{!a.trace.empty(), fold_mode(a.fold), {}, {}};
  if (progress.shown()) {
    po.progress = [&progress](std::size_t done, std::size_t total) { progress.update("simulating the step", done, total); };
  }
  // A Chrome trace is written beside the simulation, on another core.
  std::optional<report::ChromeTraceStream> stream;
  if (!a.trace.empty() && report::chrome_trace_streamed(a.trace)) {
    stream.emplace(report::gzip_name(a.trace));
    po.spans = [&stream](const program::Program& p, std::span<const report::Span> spans, bool last) {
      stream->add(p, spans, last);
    };
  }
  const sim::Prediction prediction = sim::predict(s, po);
  const program::Program& program = prediction.program;
  const sim::SimStats& stats = prediction.stats;
  const report::Trace& trace = prediction.trace;
  const report::StepFigures f = report::step_figures(s, trace, cluster);
  const workload::MemoryReport mem = workload::memory_per_rank(s);
  std::optional<Heterogeneity> hetero;
  if (!s.cluster.uniform()) {
    if (progress.shown()) progress.update("simulating the uniform cluster", 0, 1);
    hetero = heterogeneity(s, trace, cluster, fold_mode(a.fold));
  }
  std::optional<SyncBnCost> syncbn;
  if (s.syncs_batch_norm()) {
    if (progress.shown()) progress.update("simulating per-rank BatchNorm", 0, 1);
    syncbn = syncbn_cost(s, f, fold_mode(a.fold));
  }
  // The whole run, where the scenario gives its length.
  std::optional<report::RunEstimate> run;
  std::optional<report::RunSamples> samples;
  std::string mc_note;  // why the Monte Carlo was not played out
  if (s.training.total_steps > 0) {
    run = report::estimate_run(s, trace);
    if (a.runs > 0) {
      if (progress.shown()) progress.update("playing the run's failures out", 0, 1);
      try {
        samples = report::sample_runs(*run, a.runs, s.run.seed);
      } catch (const std::domain_error& e) {
        mc_note = e.what();
      }
    }
  }
  std::string trace_text;
  if (!a.trace.empty()) {
    progress.update("writing the trace", 0, 1);
    trace_text = stream ? stream->finish(trace, cluster) : report::chrome_trace_file(trace, program, cluster, a.trace);
  }
  progress.clear();

  OutputSet out;
  if (!a.trace.empty()) out.add(a.trace, std::move(trace_text));
  if (a.json.wanted()) {
    auto j = figures_json(f, mem);
    j["scenario"] = s.name;
    {
      // The plan and training setup predicted, resolved (as check --json writes them).
      const nlohmann::ordered_json resolved = scenario::to_json(s);
      j["plan"] = resolved.at("plan");
      j["training"] = resolved.at("training");
    }
    j["profile"] = s.hardware.profile.empty() ? nlohmann::ordered_json("datasheet") : nlohmann::ordered_json(s.hardware.profile);
    j["simulator"] = {{"ops", stats.ops},
                      {"events", stats.events},
                      {"flows", stats.flows},
                      {"collective_algorithms", stats.algorithms},
                      {"simulated_ranks", prediction.simulated_ranks()},
                      {"folded_replicas", stats.replicas},
                      {"folding", program.one_replica() ? (stats.exact ? "exact" : "approximate") : "none"}};
    if (hetero) j["heterogeneity"] = heterogeneity_json(*hetero, f);
    if (syncbn) {
      j["syncbn"] = {{"local_step_time", syncbn->local_step},
                     {"cost", f.step_time - syncbn->local_step},
                     {"collectives", syncbn->collectives}};
    }
    if (s.training.precision == topology::Dtype::fp16 && s.training.loss_scaling) {
      j["fp16"] = {{"skipped_fraction", fp16_skipped_fraction(s)},
                   {"effective_tokens_per_s", f.tokens_per_s * (1 - fp16_skipped_fraction(s))}};
    }
    if (run) {
      j["run"] = run_json(*run, samples ? &*samples : nullptr);
      if (!mc_note.empty()) j["run"]["monte_carlo"] = {{"skipped", mc_note}};
      if (!std::isfinite(run->expected)) j["run"]["expected"] = nullptr;  // never: JSON has no infinity
    }
    out.add(a.json.path, stamped("simulate", j).dump(2) + "\n");
  }
  if (!a.json.on_stdout()) {
    // Colour on a terminal, unless NO_COLOR is set (https://no-color.org).
    const char* no_colour = std::getenv("NO_COLOR");
    const bool colour = ::isatty(STDOUT_FILENO) != 0 && (no_colour == nullptr || *no_colour == '\0');
    fmt::print("scenario {}: {} devices, {}, {} {}\n\n", s.name, s.plan.world(), scenario::layout_string(s.plan),
               to_string(s.plan.schedule), topology::to_string(s.training.precision));
    fmt::print("device profile     {}\n", s.hardware.profile.empty()
                                               ? s.cluster.device.name + " datasheet figures (not calibrated)"
                                               : s.hardware.profile + " (measured)");
    // A plan past the memory says so before its figures, which it could not reach.
    if (!mem.fits()) {
      fmt::print("{}\n", colour ? "\x1b[31mDOES NOT FIT\x1b[0m: the figures below are for a step that cannot run"
                                : "DOES NOT FIT: the figures below are for a step that cannot run");
    }
    fmt::print("step time          {}\n", u::format_duration(f.step_time));
    if (s.model.kind == scenario::ModelKind::transformer) {
      fmt::print("throughput         {:.1f} samples/s, {} tokens/s\n", f.samples_per_s, u::format_count(f.tokens_per_s));
    } else {
      fmt::print("throughput         {:.1f} samples/s\n", f.samples_per_s);  // a generic model has no tokens
    }
    fmt::print("per device         {} (model FLOPs), MFU {:.1f} %\n", u::format_flop_rate(f.flops_per_device), 100 * f.mfu);
    // Without a pipeline the waits are not a bubble: the device idles for the host or its peers.
    fmt::print("{}{:.1f} % of the step\n", s.plan.pp > 1 ? "pipeline bubble    " : "idle (no pipeline) ", 100 * f.bubble_fraction);
    if (s.training.precision == topology::Dtype::fp16 && s.training.loss_scaling) {
      const double skipped = fp16_skipped_fraction(s);
      fmt::print("fp16 loss scaling  1 step in {} skipped ({:.2f} %): the scale doubles after {} clean steps and halves at the "
                 "overflow that follows; {} tokens/s of training that counts\n",
                 s.training.loss_scale_window + 1, 100 * skipped, s.training.loss_scale_window,
                 u::format_count(f.tokens_per_s * (1 - skipped)));
    }
    fmt::print("\n");
    using A = report::Table::Align;
    report::Table comm({"communication", "time per rank", "exposed", "of step"}, {A::left, A::right, A::right, A::right});
    for (std::size_t i = 0; i < report::dimension_count; ++i) {
      if (!report::dimension_shown(s, i)) continue;
      comm.add_row({report::dimension_names[i], u::format_duration(f.comm_mean[i]), u::format_duration(f.exposed_mean[i]),
                    fmt::format("{:.1f} %", f.step_time > 0 ? 100 * f.exposed_mean[i] / f.step_time : 0.0)});
    }
    fmt::print("{}\n", comm.render());
    fmt::print("{}\n", per_rank_table(s, f).render());
    if (hetero) print_heterogeneity(s, *hetero, f);
    if (syncbn) print_syncbn(*syncbn, f);
    // Offloading: each stage's host memory against the rank's share of its node's too.
    const bool host = mem.host_capacity > 0.0;
    std::vector<std::string> head{"stage", "memory per rank", "capacity", ""};
    std::vector<A> align{A::right, A::right, A::right, A::left};
    if (host) {
      head.insert(head.end(), {"host memory per rank", "host share", ""});
      align.insert(align.end(), {A::right, A::right, A::left});
    }
    report::Table memt(head, align);
    auto verdict = [&](bool oom, const char* what) {
      return oom ? (colour ? fmt::format("\x1b[31m{}\x1b[0m", what) : std::string(what)) : std::string("fits");
    };
    for (const auto& b : mem.stages) {
      std::vector<std::string> row{
          std::to_string(b.stage), u::format_bytes(b.total()), u::format_bytes(mem.capacity),
          b.total() > mem.capacity ? verdict(true, "OUT OF MEMORY")
          : b.total() > mem.usable()
              ? verdict(true, "PAST THE HEADROOM")
              : fmt::format("fits, {:.1f} % left", 100.0 * (mem.capacity - b.total()) / mem.capacity)};
      if (host) {
        row.insert(row.end(), {u::format_bytes(b.host), u::format_bytes(mem.host_capacity),
                               verdict(b.host > mem.host_capacity, "OUT OF HOST MEMORY")});
      }
      memt.add_row(row);
    }
    fmt::print("{}\n", memt.render());
    if (!f.busiest_links.empty()) {
      report::Table links({"busiest links", "class", "carried", "utilisation"}, {A::left, A::left, A::right, A::right});
      for (std::size_t i = 0; i < std::min<std::size_t>(5, f.busiest_links.size()); ++i) {
        const auto& l = f.busiest_links[i];
        links.add_row({l.name, l.cls, u::format_bytes(l.bytes), fmt::format("{:.1f} %", 100 * l.utilisation)});
      }
      fmt::print("{}\n", links.render());
    }
    if (!stats.algorithms.empty()) {
      std::string used;
      for (const auto& [algorithm, n] : stats.algorithms) used += fmt::format("{}{} x {}", used.empty() ? "" : ", ", n, algorithm);
      std::string protocols;
      for (const auto& [protocol, n] : stats.protocols) {
        protocols += fmt::format("{}{} {}", protocols.empty() ? "; NCCL protocols " : ", ", n, protocol);
      }
      fmt::print("collectives: {} (setting {}{}{})\n", used, to_string(s.plan.collective), protocols,
                 program.one_replica() ? "; instances simulated" : "");
    }
    if (run) {
      fmt::print("{}{}\n", report::describe_run(*run, s, samples ? &*samples : nullptr),
                 mc_note.empty() ? std::string() : fmt::format("  monte carlo      {}\n", mc_note));
    }
    fmt::print("ranks simulated: {}\n", ranks_line(s, prediction));
    if (!mem.fits()) fmt::print("memory: {}\n", workload::describe_memory(mem));
    fmt::print("bottleneck: {}\n", mem.fits() ? f.bottleneck : "memory: the plan does not fit; " + f.bottleneck);
    if (!mem.fits()) fmt::print("{}\n", fitting_plan_advice(a.scenario, s));
  }
  out.commit();
  require_fit(a.require_fit, mem, s);
}

}  // namespace

void add_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict one training step: time, throughput, memory, where the time goes");
  args->scenario.add_to(*cmd);
  args->json.add_to(*cmd, "The prediction, memory and bottleneck");
  cmd->add_flag("--require-fit", args->require_fit, "Exit with status 3 when the plan does not fit in memory");
  cmd->add_option("--trace", args->trace, "Write the predicted step as Chrome-trace JSON (Perfetto) to FILE")
      ->type_name("FILE")
      ->check(output_file());
  cmd->add_option("--fold", args->fold,
                  "Simulate one data-parallel replica for all: auto (when exact, or approximately from 256 ranks), "
                  "always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_option("--runs", args->runs,
                  "Also play the whole run's failures out N times (Monte Carlo, seeded by run.seed) against the "
                  "closed form; needs training.tokens or training.steps")
      ->type_name("N")
      ->check(CLI::Range(1, 1000000));
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace parasim::cli
