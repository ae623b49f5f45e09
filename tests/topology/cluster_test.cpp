#include <catch2/catch.hpp>

#include <map>

#include "fixtures.hpp"
#include "topology/cluster.hpp"

using namespace parasim::topology;
using parasim::topology::test::dgx;

namespace {

std::map<VertexKind, int> count_kinds(const Cluster& c) {
  std::map<VertexKind, int> n;
  for (auto v : boost::make_iterator_range(boost::vertices(c.graph()))) ++n[c.vertex(v).kind];
  return n;
}

}  // namespace

TEST_CASE("a single NVSwitch node is a star of its GPUs", "[cluster]") {
  // 8 GPUs + 1 switch; 8 physical links = 16 directed edges; no NICs on a lone node.
  const Cluster c(dgx(1));
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::gpu] == 8);
  CHECK(kinds[VertexKind::nvswitch] == 1);
  CHECK(kinds[VertexKind::nic] == 0);
  CHECK(c.link_count() == 16);
  for (int id = 0; id < c.link_count(); ++id) {
    CHECK(c.link(id).bandwidth == 450e9);
    CHECK(c.link(id).cls == LinkClass::intra);
    CHECK(c.link(id).id == id);
  }
  // The two directions of a physical link are ids 2k and 2k+1.
  CHECK(c.source(0) == c.target(1));
  CHECK(c.target(0) == c.source(1));
}

TEST_CASE("an NVLink mesh splits each GPU's bandwidth over its peers", "[cluster]") {
  ClusterSpec s = dgx(1);
  s.gpus_per_node = 4;
  s.intra = IntraNodeSpec{IntraFabric::nvlink_mesh, 300e9, 1e-6, 2};
  const Cluster c(s);
  // 4 GPUs, C(4,2) = 6 pairs, 100 GB/s each way per pair.
  CHECK(boost::num_vertices(c.graph()) == 4);
  CHECK(c.link_count() == 12);
  CHECK(c.link(0).bandwidth == Approx(100e9));
}

TEST_CASE("a PCIe node hangs GPUs off switches under the host", "[cluster]") {
  ClusterSpec s = dgx(1);
  s.intra = IntraNodeSpec{IntraFabric::pcie, 32e9, 3e-6, 2};
  const Cluster c(s);
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::pcie_switch] == 4);
  CHECK(kinds[VertexKind::host] == 1);
  CHECK(c.link_count() == 2 * (8 + 4));  // GPU-switch and switch-host links
}

TEST_CASE("a two-level fat-tree has ceil(D/r) spines and leaves of D NICs", "[cluster]") {
  // 4 nodes x 8 NICs = 32 NICs, 16 per leaf -> 2 leaves; r = 2 -> 8 spines.
  const Cluster c(dgx(4, NetworkShape::fat_tree, 16, 2.0));
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::nic] == 32);
  CHECK(kinds[VertexKind::leaf_switch] == 2);
  CHECK(kinds[VertexKind::spine_switch] == 8);
  // Links: 32 GPU-NVSwitch, 32 GPU-NIC, 32 NIC-leaf, 2 x 8 leaf-spine.
  CHECK(c.link_count() == 2 * (32 + 32 + 32 + 16));
  int inter = 0;
  for (int id = 0; id < c.link_count(); ++id) inter += c.link(id).cls == LinkClass::inter ? 1 : 0;
  CHECK(inter == 2 * (32 + 16));
}

TEST_CASE("a fat-tree that fits one leaf needs no spine", "[cluster]") {
  const Cluster c(dgx(2, NetworkShape::fat_tree, 32));
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::leaf_switch] == 1);
  CHECK(kinds[VertexKind::spine_switch] == 0);
}

TEST_CASE("rail-optimized networks give each NIC index its own leaf", "[cluster]") {
  // 4 nodes, 8 rails, 32 nodes per leaf -> 8 leaves (one per rail), 32 spines.
  const Cluster c(dgx(4, NetworkShape::rail_optimized, 32));
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::leaf_switch] == 8);
  CHECK(kinds[VertexKind::spine_switch] == 32);
}

TEST_CASE("a WAN splits the nodes into two sites joined by one slow link", "[cluster]") {
  ClusterSpec s = dgx(4, NetworkShape::single_switch);
  s.wan = WanSpec{2, 12.5e9, 10e-3};
  const Cluster c(s);
  auto kinds = count_kinds(c);
  CHECK(kinds[VertexKind::wan_gateway] == 2);
  CHECK(kinds[VertexKind::leaf_switch] == 2);  // one switch per site
  int wan = 0;
  for (int id = 0; id < c.link_count(); ++id) wan += c.link(id).kind == LinkKind::wan ? 1 : 0;
  CHECK(wan == 2);
}

TEST_CASE("devices are numbered node-major", "[cluster]") {
  const Cluster c(dgx(2));
  CHECK(c.vertex(c.gpu(9)).name == "n1.gpu1");
  CHECK(c.vertex(c.gpu(9)).index == 9);
  CHECK(c.node_of(9) == 1);
}
