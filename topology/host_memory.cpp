#include "topology/host_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace parasim::topology {
namespace {

double read_number(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0.0;
  char text[64] = {};
  const bool read = std::fgets(text, sizeof text, f) != nullptr;
  std::fclose(f);
  double v = 0.0;
  return read && std::sscanf(text, "%lf", &v) == 1 ? v : 0.0;  // "max" (no limit) reads as 0
}

// What this process's memory cgroup leaves, in bytes (its limit less its usage); 0 where
// there is no limit or none can be read. cgroup v2's memory.max, else v1's
// memory.limit_in_bytes, of the group /proc/self/cgroup names.
double cgroup_available_memory() {
  std::FILE* f = std::fopen("/proc/self/cgroup", "r");
  if (f == nullptr) return 0.0;
  char line[512];
  std::string v1, v2;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string l(line);
    while (!l.empty() && l.back() == '\n') l.pop_back();
    const auto a = l.find(':');
    const auto b = l.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = l.substr(a + 1, b - a - 1);
    const std::string path = l.substr(b + 1);
    if (l.compare(0, a, "0") == 0 && controllers.empty()) v2 = path;
    if (controllers == "memory" || controllers.find("memory,") == 0 || controllers.find(",memory") != std::string::npos) {
      v1 = path;
    }
  }
  std::fclose(f);
  auto left = [](double limit, double usage) { return limit > 0.0 && limit < 1e18 ? std::max(0.0, limit - usage) : 0.0; };
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (v2.empty()) break;
    const std::string dir = std::string(root) + v2;
    if (const double l = left(read_number(dir + "/memory.max"), read_number(dir + "/memory.current")); l > 0.0) return l;
  }
  if (!v1.empty()) {
    const std::string dir = "/sys/fs/cgroup/memory" + v1;
    return left(read_number(dir + "/memory.limit_in_bytes"), read_number(dir + "/memory.usage_in_bytes"));
  }
  return 0.0;
}

}  // namespace

double host_available_memory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0.0;
  char line[256];
  double kib = 0.0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  }
  std::fclose(f);
  const double host = kib * 1024.0;
  const double group = cgroup_available_memory();
  return group > 0.0 && (host <= 0.0 || group < host) ? group : host;
}

}  // namespace parasim::topology
