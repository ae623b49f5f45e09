// What `parasim run` and `parasim validate` share (cli/run.cpp, cli/validate.cpp): their
// options, the checks before any rank starts, and the job itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "workload/memory.hpp"
#include "scenario/scenario.hpp"

#ifdef PARASIM_HAVE_CPU_BACKEND
#include "exec/execute.hpp"
#endif

namespace parasim::cli {

struct RunArgs {
  ScenarioArgs scenario;
  std::optional<int> steps;
  std::optional<int> warmup;
  std::string backend;
  std::string trace;
  JsonOption json;
  std::string out;                  // validate: folder for the traces and the comparison
  std::optional<double> max_error;  // validate: percent
  int repeat = 1;                   // validate: measured runs
  double stall = 60.0;
  std::string mpirun_args;
  bool emulated = false;  // on the emulated cluster (`parasim cluster up`, cli/emulated.hpp)
};

void add_run_options(CLI::App& cmd, RunArgs& a);

// The scenario with the command line's --steps, --warmup and --backend applied; with
// --emulated its cluster's nodes and NICs are the emulated cluster's.
scenario::Scenario load_for_run(const RunArgs& a);

// The memory each rank's tensors need, as the executor's allocator holds them: the
// stage's total less the runtime's workspace (MPI or NCCL buffers, BLAS scratch).
std::vector<double> rank_tensor_memory(const scenario::Scenario& s, const workload::MemoryReport& mem);

// Everything that can be refused before any rank starts: the backend, the model, memory.
void precheck(const scenario::Scenario& s);

#ifdef PARASIM_HAVE_CPU_BACKEND

struct Job {
  std::vector<exec::Measurement> runs;  // each measured run, in order (validate --repeat)
  std::size_t median = 0;               // the run of median step time
  bool root = false;

  [[nodiscard]] const exec::Measurement& measured() const { return runs[median]; }
};

// Outside MPI: the checks that need no rank, then a restart under mpirun (more than one
// rank). As a rank: runs the plan a.repeat times; rank 0 prints the steps and a summary (to
// standard error when the JSON has standard output).
Job launch_and_run(const scenario::Scenario& s, const RunArgs& a);

nlohmann::ordered_json steps_json(const exec::Measurement& m);

#endif

}  // namespace parasim::cli
