// parasim plan SCENARIO: search every valid plan of the scenario's model and batch on its
// cluster (or --gpus N), reject those that do not fit, rank the rest by throughput.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/progress.hpp"
#include "scenario/describe.hpp"
#include "scenario/limits.hpp"
#include "planner/search.hpp"
#include "report/table.hpp"
#include "planner/planner.hpp"
#include "topology/units.hpp"

#ifdef PARASIM_HAVE_CPU_BACKEND
#include "exec/mpi_job.hpp"
#endif

namespace parasim::cli {
namespace {

struct PlanArgs {
  ScenarioArgs scenario;
  int gpus = 0;
  int top = 10;
  int resimulate = 20;
  int threads = 0;
  JsonOption json;
  bool require_fit = false;
  std::string csv;
  std::string write_best;  // FILE: the best plan as a scenario
  std::string objective = "step";
};

planner::Objective objective_of(const std::string& name) {
  if (name == "time-to-train") return planner::Objective::time_to_train;
  if (name == "cost") return planner::Objective::cost;
  if (name == "energy") return planner::Objective::energy;
  return planner::Objective::step;
}

// The whole run's figures of a plan (rank_by), for JSON.
nlohmann::ordered_json plan_run_json(const report::RunEstimate& r) {
  nlohmann::ordered_json j{{"time_to_train", r.expected}, {"ideal", r.ideal},
                           {"goodput", r.goodput},         {"interruptions", r.interruptions},
                           {"device_hours", r.device_hours}, {"cost", r.cost}};
  if (r.has_power) j["energy_mwh"] = r.energy / 3.6e9;
  return j;
}

// The best plan as --set arguments (common.hpp, plan_overrides).
std::vector<std::string> best_overrides(const PlanArgs& a, const scenario::Scenario& s, const planner::PlanReport& r) {
  return plan_overrides(a.scenario, s, r.ranked[0].candidate, a.gpus);
}

// --write-best: a scenario that extends the one planned (by its path from the new file's
// folder) with the best plan's keys, the dotted --set keys written as YAML sections.
std::string best_scenario_yaml(const PlanArgs& a, const scenario::Scenario& s, const planner::PlanReport& r) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(a.write_best)).parent_path();
  const std::string base = fs::absolute(fs::path(a.scenario.path)).lexically_relative(dir).generic_string();
  const planner::PlanScore& best = r.ranked[0];
  std::string out = fmt::format(
      "# parasim plan's best of {} plans that fit for {}: {} a step, {} tokens/s, MFU {:.1f} %\n", r.ranked.size(),
      s.source, units::format_duration(best.step_time), units::format_count(best.tokens_per_s), 100 * best.mfu);
  out += fmt::format("extends: {}\n", base);
  return out + sets_yaml(best_overrides(a, s, r));
}

const char* tier(const planner::PlanScore& p) {
  return p.simulated ? "simulated" : "estimate";
}

nlohmann::ordered_json plan_json(const planner::PlanScore& p, std::size_t rank, double capacity) {
  const scenario::ParallelPlan& pl = p.candidate.plan;
  return {{"rank", rank},
          {"dp", pl.dp},
          {"tp", pl.tp},
          {"pp", pl.pp},
          {"cp", pl.cp},
          {"ep", pl.ep},
          {"virtual_stages", pl.virtual_stages},
          {"schedule", to_string(pl.schedule)},
          {"micro_batch", p.candidate.micro_batch},
          {"recompute", to_string(p.candidate.recompute)},
          {"zero", pl.zero},
          {"shard_group", pl.shard_size()},
          {"offload_optimizer", pl.offload_optimizer},
          {"offload_params", pl.offload_params},
          {"offload_activations", pl.offload_activations},
          {"sequence_parallel", pl.sequence_parallel},
          {"tp_comm_overlap", pl.tp_comm_overlap},
          {"placement", scenario::placement_string(pl)},
          {"step_time", p.step_time},
          {"tokens_per_s", p.tokens_per_s},
          {"mfu", p.mfu},
          {"memory", p.memory},
          {"memory_free", (capacity - p.memory) / capacity},
          {"bottleneck", p.bottleneck},
          {"tier", tier(p)},
          {"estimated_step_time", p.estimate},
          {"overrides", planner::overrides_of(p.candidate)}};
}

nlohmann::ordered_json plan_json_run(const planner::PlanScore& p, std::size_t rank, double capacity) {
  nlohmann::ordered_json j = plan_json(p, rank, capacity);
  if (p.run) j["run"] = plan_run_json(*p.run);
  return j;
}

std::string csv_text(const planner::PlanReport& r) {
  std::string out =
      "rank,dp,tp,pp,cp,ep,virtual_stages,schedule,micro_batch,recompute,zero,shard_group,offload_optimizer,"
      "offload_params,offload_activations,sequence_parallel,tp_comm_overlap,placement,step_time,"
      "tokens_per_s,mfu,memory,tier,estimated_step_time,bottleneck";
  // Ranked by the whole run: its figures too.
  const bool run = !r.ranked.empty() && r.ranked[0].run.has_value();
  out += run ? ",time_to_train,goodput,interruptions,energy_mwh,device_hours,cost\n" : "\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const planner::PlanScore& p = r.ranked[i];
    const scenario::ParallelPlan& pl = p.candidate.plan;
    auto flag = [](bool b) { return b ? "true" : "false"; };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\",{:.9g},{:.9g},{:.6g},{:.0f},{},{:.9g},\"{}\"\n",
                       i + 1, pl.dp, pl.tp, pl.pp, pl.cp, pl.ep, pl.virtual_stages, to_string(pl.schedule),
                       p.candidate.micro_batch, to_string(p.candidate.recompute), pl.zero, pl.shard_size(),
                       flag(pl.offload_optimizer), flag(pl.offload_params), flag(pl.offload_activations),
                       flag(pl.sequence_parallel), flag(pl.tp_comm_overlap),
                       scenario::placement_string(pl), p.step_time, p.tokens_per_s, p.mfu, p.memory, tier(p),
                       p.estimate, p.bottleneck);
    if (run && p.run) {
      out.pop_back();
      out += fmt::format(",{:.9g},{:.6g},{:.6g},{},{:.9g},{:.9g}\n", p.run->expected, p.run->goodput, p.run->interruptions,
                         p.run->has_power ? fmt::format("{:.9g}", p.run->energy / 3.6e9) : std::string(),
                         p.run->device_hours, p.run->cost);
    }
  }
  return out;
}

// Returns whether a plan fits on the devices planned for (another rank of an MPI job: true).
bool run_plan(const PlanArgs& a) {
  const scenario::Scenario s = a.scenario.load();
  if (a.gpus < 0) throw UsageError("--gpus: expected a positive device count");
  const planner::Objective objective = objective_of(a.objective);
  if (objective != planner::Objective::step && s.training.total_steps <= 0) {
    throw UsageError(fmt::format("--objective {} ranks by the whole run: the scenario needs training.tokens or "
                                 "training.steps",
                                 a.objective));
  }
  if (objective == planner::Objective::energy && !s.job.has_power()) {
    throw UsageError(fmt::format("--objective energy needs the device's power: {} states no TDP; set job.power.busy",
                                 s.cluster.device.name));
  }
  planner::PlanOptions options;
  options.devices = a.gpus;
  options.resimulate = a.resimulate;
  options.threads = a.threads;
  planner::PlanReport r;
  if (under_mpi()) {
    // Under mpirun or srun: each rank scores its slice of the candidates, rank 0 gathers
    // them into the one ranking a single process would make, and prints it.
#ifdef PARASIM_HAVE_CPU_BACKEND
    exec::MpiJob job;
    const std::string mine = planner::score_part(s, options, job.rank(), job.world()) + "\n";
    const std::vector<char> all = job.gather_to_root(std::span<const char>(mine.data(), mine.size()));
    if (job.rank() != 0) return true;
    std::vector<std::string> parts;
    std::string line;
    for (char c : all) {
      if (c != '\n') {
        line += c;
        continue;
      }
      parts.push_back(std::move(line));
      line.clear();
    }
    r = planner::merge_parts(s, options, parts);
#else
    throw UsageError("this build has no MPI: run parasim plan without mpirun (it uses every core by itself)");
#endif
  } else {
    Progress progress(a.json.on_stdout());
    if (progress.shown()) {
      options.progress = [&progress](std::string_view phase, std::size_t done, std::size_t total) {
        progress.update(phase, done, total);
      };
    }
    r = planner::plan_search(s, options);
  }
  planner::rank_by(s, r, objective);
  // Beyond the step, smaller clusters too: their failures are rarer.
  std::vector<planner::SizeResult> sizes;
  if (objective != planner::Objective::step && !under_mpi() && !r.ranked.empty()) {
    planner::PlanOptions smaller = options;
    smaller.devices = planner::half_cluster(r.devices, s.cluster.gpus_per_node);
    smaller.progress = {};
    if (smaller.devices > 0) sizes = planner::plan_sizes(s, smaller, objective, 1);
  }
  std::size_t rejected = 0;
  for (const auto& [reason, n] : r.rejected) rejected += n;
  if (!a.csv.empty()) write_output(a.csv, csv_text(r));
  if (!a.write_best.empty() && !r.ranked.empty()) write_output(a.write_best, best_scenario_yaml(a, s, r));
  const std::size_t shown = std::min(r.ranked.size(), static_cast<std::size_t>(std::max(0, a.top)));
  // Nothing fits: the smallest cluster on which something does (by memory alone).
  const int bigger = r.ranked.empty() && !under_mpi() ? planner::smallest_fitting_devices(s, r.devices) : 0;
  // Only plans that offload to host memory fit: the smallest cluster where one fits without.
  const bool all_offload =
      !r.ranked.empty() && std::all_of(r.ranked.begin(), r.ranked.end(),
                                       [](const planner::PlanScore& p) { return p.candidate.plan.offloads(); });
  const int without_offload = all_offload && !under_mpi() ? planner::smallest_fitting_devices(s, r.devices, false) : 0;
  if (a.json.wanted()) {
    nlohmann::ordered_json plans = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < shown; ++i) plans.push_back(plan_json_run(r.ranked[i], i + 1, r.capacity));
    nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
    for (const auto& [reason, n] : r.rejected) reasons[reason] = n;
    // The same with a stable identifier per reason, for scripts.
    nlohmann::ordered_json rejections = nlohmann::ordered_json::array();
    for (const auto& [reason, n] : r.rejected) {
      rejections.push_back({{"id", planner::reason_id(reason)}, {"reason", reason}, {"plans", n}});
    }
    nlohmann::ordered_json j{{"scenario", s.name},
                             {"devices", r.devices},
                             {"capacity", r.capacity},
                             {"headroom", s.cluster.device.headroom},
                             {"valid_plans", r.candidates},
                             {"fit", r.ranked.size()},
                             {"rejected", reasons},
                             {"rejections", rejections},
                             {"resimulated", r.simulated},
                             {"objective", a.objective},
                             {"plans", plans}};
    if (!sizes.empty()) {
      nlohmann::ordered_json smaller = nlohmann::ordered_json::array();
      for (const planner::SizeResult& z : sizes) {
        smaller.push_back({{"devices", z.devices}, {"best", plan_json_run(z.report.ranked[0], 1, z.report.capacity)}});
      }
      j["smaller_clusters"] = smaller;
    }
    if (r.ranked.empty()) j["smallest_fitting_devices"] = bigger;  // 0: none up to the limit
    if (all_offload) j["smallest_fitting_devices_without_offload"] = without_offload;
    write_output(a.json.path, stamped("plan", j).dump(2) + "\n");
    if (a.json.on_stdout()) return !r.ranked.empty();
  }
  namespace u = units;
  fmt::print("planning {}: {} on {} device{} ({}, {} each)\n", s.name, s.model.name, r.devices,
             r.devices == 1 ? "" : "s", s.cluster.device.name, u::format_bytes(r.capacity));
  fmt::print("{} valid plans: {} fit, {} rejected", r.candidates, r.ranked.size(), rejected);
  std::string sep = " (";
  for (const auto& [reason, n] : r.rejected) {
    fmt::print("{}{} {}", sep, n, reason);
    sep = ", ";
  }
  fmt::print("{}\n", rejected > 0 ? ")" : "");
  fmt::print("scored by the analytical tier in {}; the best {} simulated in {}\n\n",
             u::format_duration(r.score_seconds), r.simulated, u::format_duration(r.resimulate_seconds));
  if (r.ranked.empty()) {
    fmt::print("no plan fits in {} per device\n", u::format_bytes(r.capacity));
    if (bigger == 0) {
      if (!under_mpi()) fmt::print("nor on any cluster of this node up to {} devices\n", scenario::limits::gpus);
      return !r.ranked.empty();
    }
    const scenario::Scenario grown = planner::on_devices(s, bigger);
    fmt::print("the smallest cluster where one fits: {} devices ({} node{} of {}); its plans:\n\n", bigger,
               grown.cluster.nodes, grown.cluster.nodes == 1 ? "" : "s", grown.cluster.gpus_per_node);
    PlanArgs more = a;
    more.gpus = bigger;
    more.json = {};  // the JSON was written: it names the smallest cluster
    run_plan(more);
    return !r.ranked.empty();
  }
  using A = report::Table::Align;
  const bool by_run = objective != planner::Objective::step;
  std::vector<std::string> head{"#",  "dp",        "tp",   "pp", "cp",        "ep",        "v",   "schedule", "mb",
                                "recompute", "zero", "sp", "placement", "step time", "tokens/s", "MFU", "memory"};
  std::vector<A> align{A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::left, A::right,
                       A::left,  A::right, A::left,  A::left,  A::right, A::right, A::right, A::right};
  if (by_run) {
    head.insert(head.end(), {"time to train", "goodput", "energy", "device-hours"});
    align.insert(align.end(), {A::right, A::right, A::right, A::right});
  }
  head.insert(head.end(), {"tier", "bottleneck"});
  align.insert(align.end(), {A::left, A::left});
  report::Table t(head, align);
  const double capacity = s.cluster.device.memory_bytes;
  fmt::print("every plan leaves at least {:g} % of the device's {} free (headroom: --headroom)\n\n",
             100 * s.cluster.device.headroom, u::format_bytes(capacity));
  for (std::size_t i = 0; i < shown; ++i) {
    const planner::PlanScore& p = r.ranked[i];
    const scenario::ParallelPlan& pl = p.candidate.plan;
    std::vector<std::string> row{
        std::to_string(i + 1), std::to_string(pl.dp), std::to_string(pl.tp), std::to_string(pl.pp),
        std::to_string(pl.cp), std::to_string(pl.ep), std::to_string(pl.virtual_stages),
        std::string(to_string(pl.schedule)), std::to_string(p.candidate.micro_batch),
        std::string(to_string(p.candidate.recompute)), planner::sharding_string(pl),
        pl.tp_comm_overlap     ? "overlap"
        : pl.sequence_parallel ? "yes"
                               : "no",
        scenario::placement_string(pl), u::format_duration(p.step_time), u::format_count(p.tokens_per_s),
        fmt::format("{:.1f} %", 100 * p.mfu),
        fmt::format("{} ({:.0f} % free)", u::format_bytes(p.memory), 100 * (capacity - p.memory) / capacity)};
    if (by_run && p.run) {
      row.insert(row.end(), {u::format_span(p.run->expected), fmt::format("{:.1f} %", 100 * p.run->goodput),
                             p.run->has_power ? fmt::format("{:.4g} MWh", p.run->energy / 3.6e9) : std::string("-"),
                             u::format_count(p.run->device_hours)});
    } else if (by_run) {
      row.insert(row.end(), {"-", "-", "-", "-"});
    }
    row.insert(row.end(), {tier(p), p.bottleneck});
    t.add_row(std::move(row));
  }
  fmt::print("{}", t.render());
  if (all_offload) {
    fmt::print("\nevery plan that fits on {} device{} offloads to host memory; without offloading, {}\n", r.devices,
               r.devices == 1 ? "" : "s",
               without_offload > 0 ? fmt::format("the smallest cluster where one fits has {} devices", without_offload)
                                   : fmt::format("none fits up to {} devices", scenario::limits::gpus));
  }
  if (by_run) {
    fmt::print("\nranked by {} over the whole run ({} steps; failures, restarts and checkpoints: job:)\n", a.objective,
               s.training.total_steps);
  }
  if (!sizes.empty()) {
    const planner::PlanScore& here = r.ranked[0];
    report::Table z({"devices", "best plan", "step time", "time to train", "goodput", "interruptions", "energy",
                     "device-hours"},
                    {A::right, A::left, A::right, A::right, A::right, A::right, A::right, A::right});
    auto add = [&](int devices, const planner::PlanScore& p) {
      const report::RunEstimate& run = *p.run;
      z.add_row({std::to_string(devices), planner::describe(p.candidate), u::format_duration(p.step_time),
                 u::format_span(run.expected), fmt::format("{:.1f} %", 100 * run.goodput),
                 fmt::format("{:.0f}", run.interruptions),
                 run.has_power ? fmt::format("{:.4g} MWh", run.energy / 3.6e9) : std::string("-"),
                 u::format_count(run.device_hours)});
    };
    add(r.devices, here);
    // The size whose best plan beats every larger one's by the objective.
    const planner::SizeResult* winner = nullptr;
    double best = planner::objective_value(here, objective);
    for (const planner::SizeResult& size : sizes) {
      add(size.devices, size.report.ranked[0]);
      if (const double v = planner::objective_value(size.report.ranked[0], objective); v < best) {
        best = v;
        winner = &size;
      }
    }
    fmt::print("\nsmaller clusters, each with its best plan by {}:\n{}", a.objective, z.render());
    if (winner != nullptr) {
      fmt::print("{} devices beat {} by {}: fewer devices, fewer interruptions (--gpus {})\n", winner->devices,
                 r.devices, a.objective, winner->devices);
    }
  }
  // The best plan as a command: the scenario's own overrides, the cluster's new size, the plan.
  fmt::print("\nbest: parasim simulate {} --set {}\n", a.scenario.path, fmt::join(best_overrides(a, s, r), " --set "));
  if (!a.write_best.empty()) fmt::print("wrote {}: the best plan as a scenario\n", a.write_best);
  return true;
}

}  // namespace

void add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd =
      app.add_subcommand("plan", "Search every valid plan for the scenario's model and cluster, ranked by throughput");
  args->scenario.add_to(*cmd);
  cmd->add_option("--gpus", args->gpus, "Plan for N devices (default: the cluster's; nodes are added or removed)")
      ->type_name("N")
      ->check(CLI::Range(1, static_cast<int>(scenario::limits::gpus)));
  cmd->add_option("--top", args->top, "Plans shown")
      ->type_name("K")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--resimulate", args->resimulate, "Best plans scored again by the event simulator")
      ->type_name("R")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads scoring plans (default: every core)")
      ->type_name("T")
      ->check(CLI::PositiveNumber);
  args->json.add_to(*cmd, "The ranked plans and the rejections");
  cmd->add_option("--csv", args->csv, "Write every plan that fits, ranked, as CSV to FILE")
      ->type_name("FILE")
      ->check(output_file());
  cmd->add_option("--write-best", args->write_best,
                  "Write the best plan as a scenario to FILE (it extends the one planned)")
      ->type_name("FILE")
      ->check(output_file());
  cmd->add_option("--objective", args->objective,
                  "Rank by the step's throughput (step) or by the whole run's expected time-to-train, cost or energy, "
                  "failures and checkpoints counted (needs training.tokens or training.steps); beyond the step, "
                  "half and a quarter of the cluster are searched too")
      ->check(CLI::IsMember({"step", "time-to-train", "cost", "energy"}))
      ->capture_default_str();
  cmd->add_flag("--require-fit", args->require_fit,
                "Exit with status 3 when no plan fits on the devices planned for (for scripts and CI)");
  cmd->callback([args] {
    if (!run_plan(*args) && args->require_fit) {
      throw ExitStatus(exit_no_fit, "no plan fits on the devices planned for (--require-fit)");
    }
  });
}

}  // namespace parasim::cli
