#include "cli/json.hpp"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/common.hpp"
#include "parasim/config.hpp"

namespace parasim::cli {

nlohmann::ordered_json stamped(std::string_view kind, const nlohmann::ordered_json& body, int version) {
  nlohmann::ordered_json j{{"schema", fmt::format("parasim.{}/{}", kind, version)},
                           {"parasim", {{"version", config::version}, {"revision", config::revision}}}};
  if (body.is_object()) {
    for (const auto& [key, value] : body.items()) j[key] = value;
  } else {
    j["data"] = body;
  }
  return j;
}

nlohmann::ordered_json memory_json(const workload::MemoryReport& mem) {
  nlohmann::ordered_json j{{"capacity", mem.capacity},
                           {"headroom", mem.headroom},
                           {"usable", mem.usable()},
                           {"margin", mem.margin()},
                           {"fits", mem.fits()}};
  if (mem.host_capacity > 0.0) j["host_capacity"] = mem.host_capacity;
  j["stages"] = nlohmann::ordered_json::array();
  for (const auto& b : mem.stages) {
    j["stages"].push_back({{"stage", b.stage}, {"parameters", b.parameters}, {"weights", b.weights},
                           {"gradients", b.gradients}, {"master", b.master}, {"optimizer", b.optimizer},
                           {"activations", b.activations}, {"in_flight", b.in_flight}, {"logits", b.logits},
                           {"workspace", b.workspace}, {"communicators", b.communicators},
                           {"total", b.total()}});
    if (mem.host_capacity > 0.0) j["stages"].back()["host"] = b.host;
  }
  return j;
}

std::string version_line() {
  std::string with;
  auto part = [&](bool on, const char* name) {
    if (on) with += with.empty() ? name : fmt::format(", {}", name);
  };
  part(config::with_mpi, "CPU backend (MPI)");
  part(config::with_cuda, "CUDA backend (cuBLAS, NCCL)");
  part(config::with_gui, "Qt dashboard");
  return fmt::format("parasim {} (git {}), built with {}", config::version, config::revision,
                     with.empty() ? std::string("the simulator only") : "the simulator, " + with);
}

void JsonOption::add_to(CLI::App& cmd, std::string_view what) {
  cmd.add_option("--json", path,
                 fmt::format("{} as JSON: on standard output in place of the tables, or to FILE (a name ending in "
                             ".json, or --json=FILE) besides them",
                             what))
      ->type_name("[FILE]")
      ->check(output_file());
}

std::vector<std::string> spell_json_options(const std::vector<std::string>& args) {
  auto ends_with = [](const std::string& s, std::string_view end) {
    return s.size() > end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
  };
  std::vector<std::string> out;
  out.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {  // what follows is positional
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] != "--json") {
      out.push_back(args[i]);
      continue;
    }
    const bool file = i + 1 < args.size() &&
                      (args[i + 1] == "-" || ends_with(args[i + 1], ".json") || ends_with(args[i + 1], ".json.gz"));
    out.push_back("--json=" + (file ? args[++i] : std::string("-")));
  }
  return out;
}

StdoutToStderr::StdoutToStderr(bool active) {
  if (!active) return;
  std::cout.flush();
  std::fflush(stdout);
  saved_ = ::dup(STDOUT_FILENO);
  if (saved_ >= 0 && ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    ::close(saved_);
    saved_ = -1;
  }
}

StdoutToStderr::~StdoutToStderr() {
  if (saved_ < 0) return;
  std::cout.flush();
  std::fflush(stdout);
  ::dup2(saved_, STDOUT_FILENO);
  ::close(saved_);
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm t{};
  ::gmtime_r(&now, &t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return buf;
}

}  // namespace parasim::cli
