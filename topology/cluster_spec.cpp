#include "topology/cluster_spec.hpp"

namespace parasim::topology {

std::string_view to_string(IntraFabric f) {
  switch (f) {
    case IntraFabric::nvswitch: return "nvswitch";
    case IntraFabric::nvlink_mesh: return "nvlink-mesh";
    case IntraFabric::pcie: return "pcie";
    case IntraFabric::shared_memory: return "shared-memory";
  }
  return "?";
}

std::string_view to_string(CollectiveLibrary l) { return l == CollectiveLibrary::nccl ? "nccl" : "mpi"; }

std::string_view to_string(NetworkShape s) {
  switch (s) {
    case NetworkShape::single_switch: return "single-switch";
    case NetworkShape::fat_tree: return "fat-tree";
    case NetworkShape::rail_optimized: return "rail-optimized";
  }
  return "?";
}

std::string_view to_string(Routing r) { return r == Routing::destination ? "destination" : "ecmp"; }

}  // namespace parasim::topology
