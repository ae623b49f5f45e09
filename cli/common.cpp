#include "cli/common.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include <fmt/format.h>
#include <unistd.h>

#include "plan/load.hpp"

namespace parasim::cli {

void ScenarioArgs::add_to(CLI::App& cmd) {
  cmd.add_option("scenario", path, "Scenario YAML file")->required();
  cmd.add_option("--set", overrides, "Override a key, e.g. --set plan.tp=4 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

namespace {
std::vector<std::string>& args() {
  static std::vector<std::string> a;
  return a;
}
}  // namespace

void set_command_line(int argc, char** argv) { args().assign(argv, argv + argc); }
const std::vector<std::string>& command_line() { return args(); }

bool under_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

[[noreturn]] void relaunch_under_mpirun(int ranks) {
  const std::vector<std::string>& argv = command_line();
  std::vector<std::string> cmd{"mpirun", "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none",
                               "-x", "OPENBLAS_NUM_THREADS=1"};
  if (::geteuid() == 0) cmd.emplace_back("--allow-run-as-root");
  cmd.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());
  std::vector<char*> c;
  for (std::string& s : cmd) c.push_back(s.data());
  c.push_back(nullptr);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::cout.flush();
  ::execvp("mpirun", c.data());
  throw UsageError(fmt::format("{} ranks are needed and mpirun could not be started ({}); install OpenMPI "
                               "(openmpi-bin) or start the ranks with your own launcher",
                               ranks, std::strerror(errno)));
}

plan::Scenario ScenarioArgs::load() const { return plan::load(path, overrides); }

void write_output(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content;
    return;
  }
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path tmp = target.parent_path() / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    out << content;
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error(fmt::format("cannot write '{}'", path));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, ec.message()));
  }
}

}  // namespace parasim::cli
