// parasim check SCENARIO: load and check a scenario, print it resolved (defaults filled).
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "scenario/describe.hpp"
#include "workload/memory.hpp"
#include "report/table.hpp"
#include "sim/compute_model.hpp"
#include "topology/units.hpp"

namespace parasim::cli {

void add_check(CLI::App& app) {
  struct Args {
    ScenarioArgs scenario;
    JsonOption json;
    bool require_fit = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("check", "Check a scenario and print it with every default filled in");
  args->scenario.add_to(*cmd);
  args->json.add_to(*cmd, "The resolved scenario and its memory (SI units)");
  cmd->add_flag("--require-fit", args->require_fit, "Exit with status 3 when the plan does not fit in memory");
  cmd->callback([args] {
    const scenario::Scenario s = args->scenario.load();
    // The device profile too: simulate reads it, so check must refuse what simulate would.
    if (!s.hardware.profile.empty()) (void)sim::load_profile(s.hardware.profile, s.cluster.device);
    const workload::MemoryReport mem = workload::memory_per_rank(s);
    if (args->json.wanted()) {
      auto j = scenario::to_json(s);
      j["memory"] = memory_json(mem);
      write_output(args->json.path, stamped("check", j).dump(2) + "\n");
      if (args->json.on_stdout()) {
        require_fit(args->require_fit, mem, s);
        return;
      }
    }
    namespace u = units;
    using A = report::Table::Align;
    report::Table t({"stage", "params", "weights", "grads", "master", "optimizer", "activations", "in flight", "other",
                     "total"},
                    {A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right});
    for (const auto& b : mem.stages) {
      t.add_row({std::to_string(b.stage), u::format_count(b.parameters), u::format_bytes(b.weights),
                 u::format_bytes(b.gradients), u::format_bytes(b.master), u::format_bytes(b.optimizer),
                 u::format_bytes(b.activations), std::to_string(b.in_flight),
                 u::format_bytes(b.logits + b.workspace + b.communicators), u::format_bytes(b.total())});
    }
    fmt::print("{}\nmemory per rank (capacity {}):\n{}{}\n\n", scenario::describe(s), u::format_bytes(mem.capacity),
               t.render("  "), workload::describe_memory(mem));
    if (mem.fits()) {
      fmt::print("ok: {} is a valid scenario and fits in memory\n", s.source);
    } else {
      const std::vector<std::string> levers = memory_levers(s);
      if (levers.empty()) {
        fmt::print("{} is a valid scenario but does not fit in memory, and its plan has no lever left on these devices\n",
                   s.source);
      } else {
        fmt::print("{} is a valid scenario but does not fit in memory: {} (parasim plan searches them all)\n", s.source,
                   fmt::join(levers, ", "));
      }
      fmt::print("{}\n", fitting_plan_advice(args->scenario, s));
    }
    require_fit(args->require_fit, mem, s);
  });
}

}  // namespace parasim::cli
