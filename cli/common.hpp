// What the subcommands share: loading a scenario with --set overrides, exit codes, and
// writing output files whole or not at all.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "workload/memory.hpp"
#include "scenario/scenario.hpp"
#include "planner/search.hpp"

namespace parasim::cli {

// Exit codes of every subcommand.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_bad_input = 2;
inline constexpr int exit_no_fit = 3;           // --require-fit: the plan (or every plan) does not fit
inline constexpr int exit_error_exceeded = 4;   // validate --max-error: the step time's error is past it
inline constexpr int exit_diverged = 5;         // run.on_divergence: stop, and the training diverged

// Thrown once a command's output is written, to end with one of the codes above and a
// message on standard error.
struct ExitStatus : std::runtime_error {
  ExitStatus(int status, const std::string& what) : std::runtime_error(what), code(status) {}
  int code;
};

// The scenario argument and --set overrides, as each scenario subcommand takes them.
struct ScenarioArgs {
  std::string path;
  std::vector<std::string> overrides;
  void add_to(CLI::App& cmd);
  [[nodiscard]] scenario::Scenario load() const;
};

// Thrown for a usage problem found after parsing (exit code 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `content` to `path` whole or not at all (cli/output.hpp); "-" writes to standard
// output. A command with several outputs writes them as one OutputSet.
void write_output(const std::string& path, const std::string& content);

// KEY=VALUE settings (as --set takes them, dotted keys) as YAML sections, in the order
// each key is first set; a section set to a preset name and refined by keys below it
// gets the name as its `preset:` ("cluster=dgx-h100", "cluster.nodes=4").
std::string sets_yaml(const std::vector<std::string>& sets);

// A CLI11 check for an output file option: refuses, before any work, a name that cannot
// be written (cli/output.hpp check_output_path).
CLI::Validator output_file();

// The process's command line as main() received it (a run restarts itself under mpirun).
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

// Whether this process is a rank of an MPI job (started by mpirun, srun or the like; a
// Slurm batch script outside srun is not one).
bool under_mpi();
// Replaces this process with `mpirun -np N [mpirun_args] <this program> <same arguments>`
// (oversubscribed, unbound, OPENBLAS_NUM_THREADS=1 in every rank; `mpirun_args` split at
// spaces, e.g. "--hostfile hosts") and exits with the job's status; throws UsageError when
// mpirun cannot be started, or inside a Slurm allocation (the ranks are srun's to start).
// With a stall timeout, the ranks' heartbeats are watched (exec/watchdog.hpp) and a rank
// that stops ends the job, named.
[[noreturn]] void relaunch_under_mpirun(int ranks, double stall_seconds = 0.0, const std::string& mpirun_args = "");

// A plan the planner found as --set arguments: the scenario's own overrides, the cluster's
// new size when the plan is for `devices` (0: the cluster's), the candidate's keys.
std::vector<std::string> plan_overrides(const ScenarioArgs& args, const scenario::Scenario& s,
                                        const planner::Candidate& c, int devices = 0);

// For a plan that does not fit: the levers its plan still has, each with its value now
// (tp that can double within a node and the heads, pp within the layers, ep, ZeRO over
// dp, recompute, the micro-batch, offloading); none where the plan has used them all.
std::vector<std::string> memory_levers(const scenario::Scenario& s);

// For a plan that does not fit: the best plan that does on the same devices, by the
// planner's quick tier (nothing re-simulated), as a line with the command that simulates
// it; or where none fits, that. The search stops after `budget` (check's advice must not
// cost a plan search): the line then says it was not computed and how to search.
std::string fitting_plan_advice(const ScenarioArgs& args, const scenario::Scenario& s,
                                std::chrono::milliseconds budget = std::chrono::milliseconds(1000));

// --require-fit: ends the command with exit_no_fit when the scenario's plan does not fit.
void require_fit(bool required, const workload::MemoryReport& memory, const scenario::Scenario& s);

// Subcommands.
void add_topo(CLI::App& app);
void add_check(CLI::App& app);
void add_simulate(CLI::App& app);
void add_presets(CLI::App& app);
void add_backends(CLI::App& app);
void add_run(CLI::App& app);
void add_validate(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_plan(CLI::App& app);
void add_sweep(CLI::App& app);
void add_export(CLI::App& app);
void add_import(CLI::App& app);
void add_cluster(CLI::App& app);
void add_diff(CLI::App& app);

}  // namespace parasim::cli
