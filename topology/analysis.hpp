// Figures that summarise a cluster graph, as `parasim topo` prints them.
//
// Injection bandwidth of a device, intra-node: the sum of its links into the node's fabric
// (NVSwitch, NVLink peers, PCIe switch, host memory). Inter-node: its fair share of the
// node's network bandwidth, sum over the node's NICs of min(attach link, NIC uplink),
// divided by the devices of the node.
//
// Bisection bandwidth: the maximum flow, in one direction, from the first half of the
// devices (by rank) to the second half, every link at its bandwidth: Boost.Graph's
// push-relabel max-flow on a copy of the graph with a super source and sink. For the
// symmetric fabrics built here the rank split is the worst balanced cut, so this equals
// the textbook bisection (for a two-level fat-tree: devices/2 x NIC share / oversubscription).
#pragma once

#include <map>
#include <string>

#include "topology/cluster.hpp"

namespace parasim::topology {

struct LinkClassSummary {
  int links = 0;                 // physical (bidirectional) links
  double total_bandwidth = 0.0;  // sum over physical links, one direction
  double min_bandwidth = 0.0;    // of one link, one direction
  double max_bandwidth = 0.0;
};

struct TopologySummary {
  std::string name;
  int nodes = 0;
  int gpus = 0;
  int gpus_per_node = 0;
  std::map<std::string, int> vertices_by_kind;
  std::map<std::string, LinkClassSummary> links_by_class;  // "intra-node", "inter-node"
  std::map<std::string, LinkClassSummary> links_by_kind;   // "nvlink", "network", ...
  double injection_intra = 0.0;  // per device, bytes/s (device 0; all are alike)
  double injection_inter = 0.0;
  double bisection = 0.0;        // bytes/s, one direction
};

double intra_injection_bandwidth(const Cluster& c, int rank);
double inter_injection_bandwidth(const Cluster& c, int rank);
double bisection_bandwidth(const Cluster& c);
TopologySummary summarize(const Cluster& c);

}  // namespace parasim::topology
