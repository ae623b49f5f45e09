#include "cli/json.hpp"

#include <ctime>
#include <unistd.h>

#include <fmt/format.h>

#include "parasim/config.hpp"

namespace parasim::cli {

nlohmann::ordered_json stamped(std::string_view kind, const nlohmann::ordered_json& body) {
  nlohmann::ordered_json j{{"schema", fmt::format("parasim.{}/1", kind)},
                           {"parasim", {{"version", config::version}, {"revision", config::revision}}}};
  if (body.is_object()) {
    for (const auto& [key, value] : body.items()) j[key] = value;
  } else {
    j["data"] = body;
  }
  return j;
}

nlohmann::ordered_json memory_json(const plan::MemoryReport& mem) {
  nlohmann::ordered_json j{{"capacity", mem.capacity}, {"fits", mem.fits()}};
  if (mem.host_capacity > 0.0) j["host_capacity"] = mem.host_capacity;
  j["stages"] = nlohmann::ordered_json::array();
  for (const auto& b : mem.stages) {
    j["stages"].push_back({{"stage", b.stage}, {"parameters", b.parameters}, {"weights", b.weights},
                           {"gradients", b.gradients}, {"master", b.master}, {"optimizer", b.optimizer},
                           {"activations", b.activations}, {"in_flight", b.in_flight}, {"logits", b.logits},
                           {"workspace", b.workspace}, {"total", b.total()}});
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
