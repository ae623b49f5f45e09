// parasim: predict a distributed training plan, then run it for real.
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "parasim/config.hpp"
#include "scenario/diagnostics.hpp"
#include "sim/time.hpp"

int main(int argc, char** argv) {
  using namespace parasim::cli;
  set_command_line(argc, argv);
  install_output_signal_cleanup();
  CLI::App app{"parasim: predict how fast a distributed training plan runs, whether it fits, and where the time "
               "goes; then run the same plan for real"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(1);
  app.fallthrough();
  add_topo(app);
  add_check(app);
  add_simulate(app);
  add_presets(app);
  add_backends(app);
  add_run(app);
  add_validate(app);
  add_calibrate(app);
  add_plan(app);
  add_sweep(app);
  add_diff(app);
  add_export(app);
  add_import(app);
  add_cluster(app);

  // "--json" takes a file name only when one follows (cli/json.hpp).
  const std::vector<std::string> args = spell_json_options(std::vector<std::string>(argv, argv + argc));
  std::vector<const char*> spelled;
  for (const std::string& a : args) spelled.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(spelled.size()), spelled.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return exit_bad_input;
  } catch (const parasim::scenario::ScenarioError& e) {
    std::cerr << "error: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const parasim::sim::TimeRangeError& e) {
    std::cerr << "error: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const ExitStatus& e) {
    if (!flush_standard_output()) return exit_failure;
    if (*e.what() != '\0') std::cerr << "error: " << e.what() << '\n';  // (one rank of many says it)
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << '\n';
    return exit_failure;
  }
  if (!flush_standard_output()) {
    std::cerr << "error: cannot write to standard output: " << std::strerror(errno != 0 ? errno : EIO) << '\n';
    return exit_failure;
  }
  return exit_ok;
}
