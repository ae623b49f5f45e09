#include "exec/backend.hpp"

#include <fmt/format.h>

namespace parasim::exec {

std::vector<BackendStatus> all_backends() { return {cpu_status(), cuda_status()}; }

BackendStatus backend_status(std::string_view name) {
  if (name == "cpu") return cpu_status();
  if (name == "cuda") return cuda_status();
  return BackendStatus{std::string(name), false, false, fmt::format("unknown backend '{}': expected cpu or cuda", name)};
}

}  // namespace parasim::exec
