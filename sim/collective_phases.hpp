// The flows a collective algorithm makes (collectives.hpp has each algorithm's closed
// form): its phases, each a set of flows that start together, run one after another.
// Internal to the simulator's collectives.
#pragma once

#include <map>
#include <vector>

#include "sim/collectives.hpp"

namespace parasim::sim {

// One flow of a phase: between two devices on their route, or on one explicit link.
struct FlowSpec {
  int src = -1;
  int dst = -1;
  int link = -1;         // >= 0: this link only, entering after `latency`
  double latency = 0.0;  // for `link` flows
  double bytes = 0.0;
};

// Flows that start together after `delay`; the phase ends when all have arrived.
struct Phase {
  double delay = 0.0;
  std::vector<FlowSpec> flows;
};

// A group's members by node.
std::map<int, std::vector<int>> by_node(const topology::Cluster& cluster, const std::vector<int>& devices);
// Members per node when every node holds the same number, else 0.
std::size_t uniform_local(const std::map<int, std::vector<int>>& nodes);
// Rings per NIC (rail) that NCCL runs for a ring over `d`: 1 inside a node, with one NIC,
// or with an uneven or single member per node.
int ring_channels(const Network& net, const std::vector<int>& d);

// The phases of `a` running `c`, with the links' latencies.
std::vector<Phase> build_phases(Algorithm a, Network& net, const CollectiveCall& c);

}  // namespace parasim::sim
