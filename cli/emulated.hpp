// An emulated multi-node cluster on this machine (`parasim cluster up`): one network
// namespace per node, each node's NICs veth pairs into a bridge per rail (the switch),
// every NIC shaped in both directions by tc (netem's delay, tbf's rate). Ranks of one node
// share memory as on a real node; ranks of different nodes talk TCP over the shaped links.
// OpenMPI starts each node's ranks inside its namespace through a launch agent that takes
// ssh's place (`ip netns exec`), from a hostfile naming the nodes: the multi-host launch
// path of a real cluster.
//
// Names: namespaces psim-n<i>; bridges psim-r<k> (rail k, 10.213.k.0/24, the bridge itself
// 10.213.k.254 for mpirun's daemon in the root namespace); node i's NIC k is eth<k> at
// 10.213.k.(i + 1) inside its namespace, the switch's end psim<i>r<k>s. Node names n<i>
// resolve inside every node (/etc/netns/<namespace>/hosts, which `ip netns exec` mounts).
// The state (what is up, the hostfile, the agent) lives in state_dir(), so that `down`
// finds everything after a crash too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::cli {

struct EmulatedCluster {
  std::string scenario;  // the scenario it was made for
  int nodes = 2;
  int ranks_per_node = 1;  // the hostfile's slots
  int nics = 1;            // per node: rails
  double rate = 0.0;       // bytes/s per NIC and direction
  double latency = 0.0;    // seconds added NIC to NIC one way (half on each end; 0: none)
  // Per node: the cores of this machine its ranks run on (a list as taskset reads it), a
  // share of the cores of its own, as a real node has.
  std::vector<std::string> cores;

  [[nodiscard]] std::string address(int node, int nic) const;
  [[nodiscard]] bool operator==(const EmulatedCluster& o) const = default;
};

// The state directory: $PARASIM_CLUSTER_DIR, else /run/parasim-cluster.
std::string state_dir();

// The emulated cluster a scenario asks for: its nodes, devices per node and NICs, each
// NIC at the scenario's rate and latency, the rate capped at `max_rate` (what this machine
// carries; `rate` > 0 sets it outright, as `latency` >= 0 does the latency); the cores this
// process may use shared out among the nodes, an equal block each (one each, round robin,
// when there are fewer cores than nodes).
EmulatedCluster emulated_for(const scenario::Scenario& s, double rate, double latency, double max_rate);

// Why this machine cannot emulate a cluster ("" when it can): not root, no `ip` or `tc`, no
// network namespaces, veth pairs, bridges or token bucket in the kernel.
std::string emulation_unavailable();

// Brings the cluster up (idempotent: nothing to do when the same cluster is up; another
// one is taken down first). Without netem in the kernel the links keep their own latency
// (c.latency becomes 0: none added). Throws std::runtime_error naming the command that
// failed, after taking down what it had made. Returns whether anything was made.
bool cluster_up(EmulatedCluster& c);
// Takes down whatever an emulated cluster left (namespaces, bridges, the nodes' hosts
// files, the state), up or half-made; returns what it removed, one line each.
std::vector<std::string> cluster_down();
// The cluster that is up, if any.
std::optional<EmulatedCluster> cluster_state();

// For `run`, `validate` and `calibrate --emulated`: the cluster that is up (UsageError when
// none is), the mpirun arguments that start the ranks on its nodes, and the overrides that
// make the scenario's cluster the emulated one (its nodes, devices per node, and NICs at the
// shaped rate and latency; the loader then refuses a plan of another size).
EmulatedCluster emulated_cluster_up();
std::string emulated_mpirun_args(const EmulatedCluster& c);
std::vector<std::string> emulated_overrides(const EmulatedCluster& c);

}  // namespace parasim::cli
