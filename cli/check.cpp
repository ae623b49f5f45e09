// parasim check SCENARIO: load and check a scenario, print it resolved (defaults filled).
#include <iostream>

#include <fmt/format.h>

#include "cli/common.hpp"
#include "plan/describe.hpp"

namespace parasim::cli {

void add_check(CLI::App& app) {
  struct Args {
    ScenarioArgs scenario;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("check", "Check a scenario and print it with every default filled in");
  args->scenario.add_to(*cmd);
  cmd->add_flag("--json", args->json, "Print the resolved scenario as JSON (SI units)");
  cmd->callback([args] {
    const plan::Scenario s = args->scenario.load();
    if (args->json) {
      std::cout << plan::to_json(s).dump(2) << '\n';
    } else {
      fmt::print("{}ok: {} is a valid scenario\n", plan::describe(s), s.source);
    }
  });
}

}  // namespace parasim::cli
