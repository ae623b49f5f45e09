// Cluster specs for the topology tests, with round numbers that make the expected figures
// easy to work out by hand.
#pragma once

#include "topology/cluster_spec.hpp"

namespace parasim::topology::test {

inline DeviceSpec gpu() {
  DeviceSpec d;
  d.name = "test-gpu";
  d.peak_flops = {100e12, 100e12, 400e12, 400e12};
  d.memory_bytes = 80e9;
  d.memory_bandwidth = 3e12;
  return d;
}

// nodes x 8 GPUs on an NVSwitch (450 GB/s, 2 us, reducing in the switch), 8 NICs of 400 Gb/s = 50 GB/s (4 us),
// attached at 64 GB/s.
inline ClusterSpec dgx(int nodes, NetworkShape shape = NetworkShape::fat_tree, int leaf_downlinks = 16,
                       double oversubscription = 1.0) {
  ClusterSpec c;
  c.name = "test-dgx";
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.device = gpu();
  c.intra = IntraNodeSpec{IntraFabric::nvswitch, 450e9, 2e-6, 2};
  c.intra.nvls = 1.0;  // the switch reduces at the ports' full rate
  c.inter = InterNodeSpec{8, 50e9, 4e-6, shape, oversubscription, leaf_downlinks, 64e9};
  return c;
}

}  // namespace parasim::topology::test
