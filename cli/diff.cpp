// parasim diff A [B] [--set k=v]...: two predictions side by side, what changed in the
// inputs and where the step's change comes from (report/diff.hpp). B defaults to A, and
// --set applies to B: `parasim diff s.yaml --set plan.tp=4` compares a plan with a variant.
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "report/diff.hpp"
#include "report/run_model.hpp"
#include "scenario/load.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"
#include "workload/memory.hpp"

namespace parasim::cli {
namespace {

struct DiffArgs {
  std::string a;
  std::string b;  // empty: A again
  std::vector<std::string> sets;    // applied to B
  std::vector<std::string> sets_a;  // applied to A
  JsonOption json;
};

// One side: the scenario, its prediction's figures, its memory and its run.
struct Side {
  scenario::Scenario scenario;
  report::StepFigures figures;
  workload::MemoryReport memory;
  double time_to_train = 0.0;
};

Side predict_side(const std::string& path, const std::vector<std::string>& sets) {
  Side s{scenario::load(path, sets), {}, {}, 0.0};
  const sim::Prediction p = sim::predict(s.scenario);
  s.figures = report::step_figures(s.scenario, p.trace, topology::Cluster(s.scenario.cluster));
  s.memory = workload::memory_per_rank(s.scenario);
  if (s.scenario.training.total_steps > 0) {
    s.time_to_train = report::estimate_run(s.scenario, p.trace).expected;
  }
  return s;
}

void run_diff(const DiffArgs& args) {
  const std::string b_path = args.b.empty() ? args.a : args.b;
  if (args.b.empty() && args.sets.empty() && args.sets_a.empty()) {
    throw UsageError("diff compares two scenarios: give B, or --set overrides that make B a variant of A");
  }
  Progress progress(args.json.on_stdout());
  if (progress.shown()) progress.update("simulating A", 0, 2);
  const Side a = predict_side(args.a, args.sets_a);
  if (progress.shown()) progress.update("simulating B", 1, 2);
  const Side b = predict_side(b_path, args.sets);
  progress.clear();
  const report::Diff d = report::diff({&a.scenario, &a.figures, &a.memory, a.time_to_train},
                                      {&b.scenario, &b.figures, &b.memory, b.time_to_train});
  const std::string name_a = a.scenario.name;
  const std::string name_b = args.b.empty() ? a.scenario.name + " (variant)" : b.scenario.name;
  OutputSet out;
  if (args.json.wanted()) {
    nlohmann::ordered_json j = report::diff_json(d);
    j["a"] = {{"scenario", name_a}, {"source", args.a}, {"overrides", args.sets_a}};
    j["b"] = {{"scenario", name_b}, {"source", b_path}, {"overrides", args.sets}};
    out.add(args.json.path, stamped("diff", j).dump(2) + "\n");
  }
  if (!args.json.on_stdout()) {
    fmt::print("A: {}{}\nB: {}{}\n\n", args.a, args.sets_a.empty() ? "" : " --set " + fmt::format("{}", fmt::join(args.sets_a, " --set ")),
               b_path, args.sets.empty() ? "" : " --set " + fmt::format("{}", fmt::join(args.sets, " --set ")));
    fmt::print("{}", report::describe_diff(d, name_a, name_b));
  }
  out.commit();
}

}  // namespace

void add_diff(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "Two predictions side by side: what changed in the inputs, which figures moved and why");
  cmd->add_option("a", args->a, "Scenario A")->required();
  cmd->add_option("b", args->b, "Scenario B (default: A, changed by --set)");
  cmd->add_option("--set", args->sets, "Override a key of B, e.g. --set plan.tp=4 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--set-a", args->sets_a, "Override a key of A (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  args->json.add_to(*cmd, "The changed inputs, both sides' figures and the step's parts");
  cmd->callback([args] { run_diff(*args); });
}

}  // namespace parasim::cli
