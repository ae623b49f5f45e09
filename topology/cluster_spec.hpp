// What a scenario says about a cluster, before it becomes a graph: how many nodes and
// devices, the device, the fabric inside a node, the network between nodes and an
// optional slow link splitting the nodes into two groups (two sites joined by a WAN).
// All bandwidths are bytes per second in one direction; latencies are seconds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/device.hpp"

namespace parasim::topology {

enum class IntraFabric { nvswitch, nvlink_mesh, pcie, shared_memory };
enum class NetworkShape { single_switch, fat_tree, rail_optimized };
// How a fat tree's switches pick among equal-cost spines (topology/routing.hpp):
//   ecmp         each flow by a hash of its ends, as Ethernet switches hash flows (ECMP):
//                flows of different pairs may meet on a spine link while others idle
//   destination  by the destination alone, as InfiniBand's subnet manager programs a fat
//                tree (OpenSM's ftree engine, D-mod-k): traffic to a NIC climbs to the
//                spine its port on its leaf picks, modulo the leaf's uplinks, so a shift
//                between leaves (a ring's or a pipeline's transfers) uses each spine once
enum class Routing { ecmp, destination };

std::string_view to_string(IntraFabric f);
std::string_view to_string(NetworkShape s);
std::string_view to_string(Routing r);

struct IntraNodeSpec {
  IntraFabric fabric = IntraFabric::nvswitch;
  // nvswitch, shared-memory: each device's link to the switch / host memory.
  // nvlink-mesh: the device's total NVLink bandwidth, split evenly over its g-1 peers.
  // pcie: each device's link to its PCIe switch (and each switch's uplink to the host).
  double bandwidth = 0.0;
  double latency = 0.0;     // device to device through one switch
  int gpus_per_switch = 2;  // pcie only
  // The share of `bandwidth` that transfers carry as data (NCCL counts an NVLink 3 link of
  // 25 GB/s as 20 usable, an NVLink 4 one as 20.6); the graph's links run at the product.
  double efficiency = 1.0;
  // nvswitch only: in-switch reductions (NVLink SHARP, H100 generation on). 0: none; else
  // the share of a port's usable rate an NVLS all-reduce sustains each way.
  double nvls = 0.0;
};

struct InterNodeSpec {
  int nics_per_node = 1;
  double nic_bandwidth = 0.0;     // per NIC
  double latency = 0.0;           // NIC to NIC through one switch
  NetworkShape shape = NetworkShape::single_switch;
  double oversubscription = 1.0;  // fat-tree / rail-optimized: leaf downlinks : uplinks
  int leaf_downlinks = 32;        // NIC ports per leaf switch
  double attach_bandwidth = 0.0;  // device (or PCIe switch) to NIC, PCIe
  double efficiency = 1.0;        // the share of nic_bandwidth that transfers carry as data
  Routing routing = Routing::ecmp;  // fat-tree / rail-optimized: the spine a flow takes
};

// How collectives run: NCCL on GPUs (protocols LL / LL128 / Simple with NCCL's latencies,
// one channel per NIC across nodes), or as plain flows at the links' latencies (MPI on CPUs).
enum class CollectiveLibrary { nccl, mpi };
std::string_view to_string(CollectiveLibrary l);

// The hosts' side of each node, for offloading (plan.offload_optimizer / offload_params):
// host memory and its bandwidth (the CPU optimizer step is bound by it), and under the
// nvswitch and nvlink-mesh fabrics the devices' PCIe links to it, `devices_per_link` devices
// behind each PCIe switch sharing its uplink to the CPU (DGX A100 / H100: two per switch).
// Under the pcie fabric the devices already reach the host through their switches; CPU
// ranks (shared-memory) have no separate device memory to offload from.
struct NodeHostSpec {
  double memory = 0.0;            // bytes per node; 0: not described
  double memory_bandwidth = 0.0;  // bytes/s per node
  double link_bandwidth = 0.0;    // a device's PCIe link (and each switch's uplink), one direction
  int devices_per_link = 1;
  double latency = 0.0;           // device to host memory

  [[nodiscard]] bool described() const { return memory > 0.0; }
};

struct WanSpec {
  int first_group_nodes = 1;  // nodes [0, k) form one site, [k, nodes) the other
  double bandwidth = 0.0;
  double latency = 0.0;
};

// A part of the cluster below its nominal rate: a straggler device (thermal throttling, a
// slow host, a failing HBM stack) computing at `factor` of its speed, or links carrying
// `factor` of their bandwidth (a cable trained down to a lower rate, a flapping port).
// One of rank, node or link names what is degraded.
struct Degraded {
  int rank = -1;     // a device (its global rank)
  int node = -1;     // every device of a node
  std::string link;  // "a -> b": that direction of a link, as reports name links; or a
                     // vertex's name ("n3.nic0", "leaf1"): every link to and from it
  double factor = 1.0;  // (0, 1]: of the speed or bandwidth it keeps
};

// Run-to-run noise of compute (OS jitter, clocks, memory refresh): each compute op's time
// multiplied by exp(sigma z - sigma^2 / 2), z a standard normal drawn from (seed, op): the
// mean time unchanged, what the step loses is what synchronous ranks wait for the slowest.
// The same seed gives the same step, bit for bit.
struct JitterSpec {
  double sigma = 0.0;
  std::uint64_t seed = 1;
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 1;
  DeviceSpec device;
  IntraNodeSpec intra;
  InterNodeSpec inter;
  std::optional<WanSpec> wan;
  NodeHostSpec host;
  CollectiveLibrary library = CollectiveLibrary::mpi;
  std::vector<Degraded> degraded;
  JitterSpec jitter;

  [[nodiscard]] int total_gpus() const { return nodes * gpus_per_node; }
  // Whether every device and link runs at its nominal rate, without jitter.
  [[nodiscard]] bool uniform() const { return degraded.empty() && jitter.sigma == 0.0; }
  // The share of its speed device `rank` computes at: the product of the factors naming it.
  [[nodiscard]] double compute_factor(int rank) const {
    double f = 1.0;
    for (const Degraded& d : degraded) {
      if (d.rank == rank || (d.node >= 0 && d.node == rank / gpus_per_node)) f *= d.factor;
    }
    return f;
  }
  // The slowest device's share of its speed (1 without degraded devices).
  [[nodiscard]] double slowest_compute_factor() const {
    double f = 1.0;
    for (const Degraded& d : degraded) {
      if (d.rank >= 0) f = std::min(f, compute_factor(d.rank));
      if (d.node >= 0) f = std::min(f, compute_factor(d.node * gpus_per_node));
    }
    return f;
  }
};

}  // namespace parasim::topology
