#include "cli/common.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/output.hpp"
#include "exec/watchdog.hpp"
#include "scenario/load.hpp"
#include "planner/search.hpp"
#include "planner/planner.hpp"
#include "topology/units.hpp"

namespace parasim::cli {

void ScenarioArgs::add_to(CLI::App& cmd) {
  cmd.add_option("scenario", path, "Scenario YAML file")->required();
  cmd.add_option("--set", overrides, "Override a key, e.g. --set plan.tp=4 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd.add_option_function<std::string>(
         "--headroom", [this](const std::string& v) { overrides.push_back("cluster.device.headroom=" + v); },
         "Share of device memory a plan must leave free, e.g. 10% (default 5%: cluster.device.headroom)")
      ->type_name("FRACTION");
}

namespace {
std::vector<std::string>& args() {
  static std::vector<std::string> a;
  return a;
}
}  // namespace

void set_command_line(int argc, char** argv) {
  args().assign(argv, argv + argc);
}
const std::vector<std::string>& command_line() {
  return args();
}

bool under_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

namespace {
pid_t launcher_child = -1;
extern "C" void forward_to_launcher(int sig) {
  if (launcher_child > 0) ::kill(launcher_child, sig);
}
}  // namespace

[[noreturn]] void relaunch_under_mpirun(int ranks, double stall_seconds, const std::string& mpirun_args) {
  const std::vector<std::string>& argv = command_line();
  if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr && *job != '\0') {
    throw UsageError(fmt::format("inside a Slurm allocation (job {}) the ranks are srun's to start: srun -n {} {}", job,
                                 ranks, fmt::join(argv, " ")));
  }
  std::vector<std::string> cmd{"mpirun", "-np", std::to_string(ranks),   "--oversubscribe", "--bind-to",
                               "none",   "-x",  "OPENBLAS_NUM_THREADS=1"};
  for (std::size_t at = 0; at < mpirun_args.size();) {  // the user's, split at spaces
    const std::size_t from = mpirun_args.find_first_not_of(' ', at);
    if (from == std::string::npos) break;
    const std::size_t to = std::min(mpirun_args.find(' ', from), mpirun_args.size());
    cmd.push_back(mpirun_args.substr(from, to - from));
    at = to;
  }
  std::string job_dir;
  std::error_code temp_error;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(temp_error);
  if (!temp_error) exec::watchdog::remove_stale_jobs(temp.string());  // left by launchers that were killed
  if (stall_seconds > 0.0 && !temp_error) {
    std::string pattern = (temp / "parasim-job-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) {
      job_dir = pattern;
      ::setenv("PARASIM_JOB_DIR", job_dir.c_str(), 1);
      cmd.insert(cmd.end(), {"-x", "PARASIM_JOB_DIR"});
    }
  }
  // The ranks end themselves if this process is killed (SIGKILL leaves mpirun running).
  exec::watchdog::mark_launcher(job_dir);
  if (std::getenv("PARASIM_LAUNCHER") != nullptr) cmd.insert(cmd.end(), {"-x", "PARASIM_LAUNCHER"});
  // The ranks' stderr is a pipe to mpirun: a progress line (cli/progress.hpp) is theirs to
  // draw when this process's stderr is a terminal.
  if (std::getenv("PARASIM_PROGRESS") == nullptr && ::isatty(STDERR_FILENO) != 0) ::setenv("PARASIM_PROGRESS", "1", 1);
  if (std::getenv("PARASIM_PROGRESS") != nullptr) cmd.insert(cmd.end(), {"-x", "PARASIM_PROGRESS"});
  if (::geteuid() == 0) cmd.emplace_back("--allow-run-as-root");
  cmd.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());
  std::vector<char*> c;
  for (std::string& s : cmd) c.push_back(s.data());
  c.push_back(nullptr);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::cout.flush();
  std::fflush(stdout);
  // mpirun runs as a child, so its exit status becomes parasim's: 0, 2 for bad input, 1
  // for any failure (mpirun itself reports a killed rank as 137 or the like).
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("cannot start mpirun: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(fmt::format("cannot start mpirun: {}", std::strerror(errno)));
  if (child == 0) {
    ::close(ready[0]);
    // mpirun is told to end (and to end its ranks) when parasim dies, even by SIGKILL.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    ::execvp("mpirun", c.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(ready[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(ready[1]);
  int exec_errno = 0;
  const bool exec_failed = ::read(ready[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno);
  ::close(ready[0]);
  if (exec_failed) {
    ::waitpid(child, nullptr, 0);
    throw UsageError(
        fmt::format("{} ranks are needed and mpirun could not be started ({}); install OpenMPI "
                    "(openmpi-bin) or start the ranks with your own launcher",
                    ranks, std::strerror(exec_errno)));
  }
  launcher_child = child;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = forward_to_launcher;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
  int status = 0;
  if (!job_dir.empty()) {
    status = exec::watchdog::watch_job(child, job_dir, ranks, stall_seconds);
    std::error_code ec;
    std::filesystem::remove_all(job_dir, ec);
  } else {
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  std::fflush(stdout);
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == exit_ok || code == exit_bad_input || code == exit_failure || code == exit_no_fit ||
        code == exit_error_exceeded || code == exit_diverged) {
      std::_Exit(code);
    }
    std::fprintf(stderr, "error: the job ended with mpirun's status %d (a rank was killed or failed to start)\n", code);
  } else if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "error: mpirun was ended by signal %d (%s)\n", WTERMSIG(status),
                 ::strsignal(WTERMSIG(status)));
  }
  std::_Exit(exit_failure);
}

scenario::Scenario ScenarioArgs::load() const {
  return scenario::load(path, overrides);
}

std::vector<std::string> plan_overrides(const ScenarioArgs& args, const scenario::Scenario& s,
                                        const planner::Candidate& c, int devices) {
  // The candidate's keys replace the scenario's own overrides of the same keys.
  const std::vector<std::string> mine = planner::overrides_of(c);
  auto key = [](const std::string& o) { return o.substr(0, o.find('=')); };
  std::vector<std::string> sets;
  for (const std::string& o : args.overrides) {
    if (std::none_of(mine.begin(), mine.end(), [&](const std::string& m) { return key(m) == key(o); })) sets.push_back(o);
  }
  const scenario::Scenario sized = planner::on_devices(s, devices);
  if (sized.cluster.nodes != s.cluster.nodes) sets.push_back(fmt::format("cluster.nodes={}", sized.cluster.nodes));
  if (sized.cluster.gpus_per_node != s.cluster.gpus_per_node) {
    sets.push_back(fmt::format("cluster.gpus_per_node={}", sized.cluster.gpus_per_node));
  }
  for (const std::string& o : mine) sets.push_back(o);
  return sets;
}

std::vector<std::string> memory_levers(const scenario::Scenario& s) {
  const scenario::ParallelPlan& p = s.plan;
  const scenario::ModelSpec& m = s.model;
  std::vector<std::string> levers;
  const bool transformer = m.kind == scenario::ModelKind::transformer;
  const int kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  if (transformer && 2 * p.tp <= s.cluster.gpus_per_node && m.heads % (2 * p.tp) == 0 && kv % (2 * p.tp) == 0) {
    levers.push_back(fmt::format("raise tp (now {})", p.tp));
  }
  if (2 * p.pp <= m.layer_count()) levers.push_back(fmt::format("raise pp (now {})", p.pp));
  if (m.moe() && 2 * p.ep <= m.experts && m.experts % (2 * p.ep) == 0 && p.grad_ranks() % (2 * p.ep) == 0) {
    levers.push_back(fmt::format("raise ep, the experts' split (now {})", p.ep));
  }
  if (p.grad_ranks() > 1 && p.zero < 3) levers.push_back(fmt::format("shard more with ZeRO (now stage {})", p.zero));
  if (transformer && s.training.recompute != scenario::Recompute::full) {
    levers.push_back(fmt::format("recompute more (now {})", scenario::to_string(s.training.recompute)));
  }
  if (s.training.micro_batch > 1) levers.push_back(fmt::format("lower the micro-batch (now {})", s.training.micro_batch));
  if (!p.offload_optimizer) levers.emplace_back("offload the optimizer to host memory");
  return levers;
}

std::string fitting_plan_advice(const ScenarioArgs& args, const scenario::Scenario& s, std::chrono::milliseconds budget) {
  std::string sets;
  for (const std::string& o : args.overrides) sets += " --set " + o;
  planner::PlanOptions options;
  options.resimulate = 0;
  options.deadline = std::chrono::steady_clock::now() + budget;
  planner::PlanReport r;
  try {
    r = planner::plan_search(s, options);
  } catch (const planner::Cancelled&) {
    return fmt::format("the best plan that fits was not computed (its search takes more than {} s): parasim plan {}{} "
                       "searches every plan",
                       static_cast<double>(budget.count()) / 1000.0, args.path, sets);
  }
  if (r.ranked.empty()) {
    return fmt::format("no plan fits on these {} devices; parasim plan {}{} finds the smallest cluster where one does",
                       r.devices, args.path, sets);
  }
  const planner::PlanScore& best = r.ranked.front();
  const std::vector<std::string> plan_sets = plan_overrides(args, s, best.candidate);
  return fmt::format(
      "the best of the {} plans that fit on these devices (the quick tier's estimate {} a step; parasim plan ranks the "
      "best by the simulator): parasim simulate {} --set {}",
      r.ranked.size(), units::format_duration(best.step_time), args.path, fmt::join(plan_sets, " --set "));
}

void require_fit(bool required, const workload::MemoryReport& memory, const scenario::Scenario& s) {
  if (!required || memory.fits()) return;
  throw ExitStatus(exit_no_fit, fmt::format("{} does not fit in memory: {} (--require-fit)", s.source,
                                            workload::describe_memory(memory)));
}

std::string sets_yaml(const std::vector<std::string>& sets) {
  struct Node {
    std::string value;
    std::vector<std::string> keys;  // the children's, in the order first set
    std::vector<Node> children;     // parallel to keys (clang refuses a pair with the incomplete Node)
    Node& child(const std::string& key) {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (keys[i] == key) return children[i];
      }
      keys.push_back(key);
      return children.emplace_back();
    }
  };
  Node root;
  for (const std::string& o : sets) {
    const auto eq = o.find('=');
    Node* n = &root;
    std::size_t from = 0;
    const std::string key = o.substr(0, eq);
    while (true) {
      const auto dot = key.find('.', from);
      n = &n->child(key.substr(from, dot == std::string::npos ? std::string::npos : dot - from));
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    n->value = o.substr(eq + 1);
  }
  std::string out;
  auto emit = [&out](const auto& self, const Node& n, int depth) -> void {
    for (std::size_t i = 0; i < n.children.size(); ++i) {
      const std::string& key = n.keys[i];
      const Node& child = n.children[i];
      out += std::string(static_cast<std::size_t>(2 * depth), ' ') + key + ":";
      if (child.children.empty()) {
        out += " " + child.value + "\n";
        continue;
      }
      out += "\n";
      // A preset name refined by keys below it: the name as the section's preset.
      if (!child.value.empty()) out += std::string(static_cast<std::size_t>(2 * depth + 2), ' ') + "preset: " + child.value + "\n";
      self(self, child, depth + 1);
    }
  };
  emit(emit, root, 0);
  return out;
}

CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        try {
          check_output_path(path, "");
        } catch (const UsageError& e) {
          return e.what();
        }
        return {};
      },
      "FILE", "output file");
}

void write_output(const std::string& path, const std::string& content) {
  OutputSet set;
  set.add(path, content);
  set.commit();
}

}  // namespace parasim::cli
