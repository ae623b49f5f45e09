// Graphviz rendering of a cluster: one box per node holding its devices, switches and
// NICs, network switches outside; one undirected edge per physical link, labelled with its
// bandwidth and coloured by kind (NVLink green, PCIe blue, network orange, WAN red).
#pragma once

#include <ostream>

#include "topology/cluster.hpp"

namespace parasim::topology {

void write_dot(std::ostream& out, const Cluster& c);

}  // namespace parasim::topology
