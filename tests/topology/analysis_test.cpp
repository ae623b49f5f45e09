#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "topology/analysis.hpp"

using namespace parasim::topology;
using parasim::topology::test::dgx;

TEST_CASE("bisection of a non-blocking fat-tree is half the NICs' bandwidth", "[analysis]") {
  // 4 nodes x 8 NICs x 50 GB/s, 2 leaves of 16, r = 1 -> 16 spines. Devices 0-15 sit on
  // leaf 0, 16-31 on leaf 1: the cut is leaf 0's 16 uplinks x 50 GB/s = 800 GB/s.
  CHECK(bisection_bandwidth(Cluster(dgx(4, NetworkShape::fat_tree, 16, 1.0))) == Approx(800e9));
}

TEST_CASE("oversubscription divides the fat-tree bisection", "[analysis]") {
  // r = 2: 8 uplinks per leaf -> 400 GB/s; r = 4: 4 uplinks -> 200 GB/s.
  CHECK(bisection_bandwidth(Cluster(dgx(4, NetworkShape::fat_tree, 16, 2.0))) == Approx(400e9));
  CHECK(bisection_bandwidth(Cluster(dgx(4, NetworkShape::fat_tree, 16, 4.0))) == Approx(200e9));
  // 8 nodes, 4 leaves, r = 2: devices 0-31 on leaves 0-1 send through 2 x 8 uplinks = 800 GB/s.
  CHECK(bisection_bandwidth(Cluster(dgx(8, NetworkShape::fat_tree, 16, 2.0))) == Approx(800e9));
}

TEST_CASE("bisection of a single switch is the NICs of half the nodes", "[analysis]") {
  // 4 nodes x 8 NICs x 50 GB/s; nodes 0-1 send 16 x 50 = 800 GB/s.
  CHECK(bisection_bandwidth(Cluster(dgx(4, NetworkShape::single_switch))) == Approx(800e9));
  ClusterSpec s = dgx(4, NetworkShape::single_switch);
  s.inter.nics_per_node = 1;  // one 50 GB/s NIC per node: 2 x 50
  CHECK(bisection_bandwidth(Cluster(s)) == Approx(100e9));
}

TEST_CASE("bisection inside one node", "[analysis]") {
  // NVSwitch: 4 GPUs x 450 GB/s.
  CHECK(bisection_bandwidth(Cluster(dgx(1))) == Approx(1800e9));
  // Mesh of 4 at 300 GB/s: {0,1} -> {2,3} over 4 links of 100 GB/s.
  ClusterSpec mesh = dgx(1);
  mesh.gpus_per_node = 4;
  mesh.intra = IntraNodeSpec{IntraFabric::nvlink_mesh, 300e9, 1e-6, 2};
  CHECK(bisection_bandwidth(Cluster(mesh)) == Approx(400e9));
  // PCIe, 2 GPUs per switch: GPUs 0-3 sit under switches 0-1, whose two 32 GB/s host
  // uplinks carry the cut.
  ClusterSpec pcie = dgx(1);
  pcie.intra = IntraNodeSpec{IntraFabric::pcie, 32e9, 3e-6, 2};
  CHECK(bisection_bandwidth(Cluster(pcie)) == Approx(64e9));
}

TEST_CASE("the WAN is the bisection of two sites", "[analysis]") {
  ClusterSpec s = dgx(2, NetworkShape::single_switch);
  s.wan = WanSpec{1, 12.5e9, 10e-3};
  CHECK(bisection_bandwidth(Cluster(s)) == Approx(12.5e9));
}

TEST_CASE("injection bandwidth per device", "[analysis]") {
  const Cluster c(dgx(2));
  CHECK(intra_injection_bandwidth(c, 0) == 450e9);
  CHECK(inter_injection_bandwidth(c, 0) == Approx(50e9));  // its own 50 GB/s NIC
  ClusterSpec shared = dgx(2);
  shared.inter.nics_per_node = 2;  // 2 NICs for 8 GPUs: 100 GB/s / 8
  CHECK(inter_injection_bandwidth(Cluster(shared), 3) == Approx(12.5e9));
  ClusterSpec slow_attach = dgx(2);
  slow_attach.inter.attach_bandwidth = 32e9;  // PCIe Gen4 caps a 50 GB/s NIC
  CHECK(inter_injection_bandwidth(Cluster(slow_attach), 0) == Approx(32e9));
}

TEST_CASE("the summary counts vertices and links by class", "[analysis]") {
  const TopologySummary s = summarize(Cluster(dgx(4, NetworkShape::fat_tree, 16, 2.0)));
  CHECK(s.gpus == 32);
  CHECK(s.vertices_by_kind.at("spine-switch") == 8);
  CHECK(s.links_by_class.at("inter-node").links == 32 + 16);
  CHECK(s.links_by_class.at("intra-node").links == 32 + 32);
  CHECK(s.links_by_class.at("inter-node").total_bandwidth == Approx(48 * 50e9));
  CHECK(s.bisection == Approx(400e9));
}
