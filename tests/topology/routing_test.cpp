#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <set>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>

#include "fixtures.hpp"
#include "topology/routing.hpp"

using namespace parasim::topology;
using parasim::topology::test::dgx;

namespace {

std::vector<std::string> hops(const Cluster& c, const Route& r) {
  std::vector<std::string> names;
  for (int id : r.links) names.push_back(c.link_name(id));
  return names;
}

}  // namespace

TEST_CASE("GPUs of one node talk through the NVSwitch", "[routing]") {
  // gpu0 -> nvswitch -> gpu5: 2 links of 450 GB/s, 1 us each.
  const Cluster c(dgx(2));
  Router router(c);
  const Route& r = router.route(0, 5);
  CHECK(hops(c, r) == std::vector<std::string>{"n0.gpu0 -> n0.nvswitch", "n0.nvswitch -> n0.gpu5"});
  CHECK(r.bottleneck == 450e9);
  CHECK(r.latency == Approx(2e-6));
}

TEST_CASE("GPUs on nodes under one leaf cross it through their NICs", "[routing]") {
  // gpu0 -> nic0 (64 GB/s) -> leaf0 (50 GB/s) -> nic of gpu 11 -> gpu 11: bottleneck the
  // NIC's 50 GB/s; latency 2 + 2 us on the network links, 0 on the attach links.
  const Cluster c(dgx(2, NetworkShape::fat_tree, 16));
  Router router(c);
  const Route& r = router.route(0, 11);
  CHECK(hops(c, r) == std::vector<std::string>{"n0.gpu0 -> n0.nic0", "n0.nic0 -> leaf0", "leaf0 -> n1.nic3",
                                               "n1.nic3 -> n1.gpu3"});
  CHECK(r.bottleneck == 50e9);
  CHECK(r.latency == Approx(4e-6));
}

TEST_CASE("routes across leaves go through a spine, spread over all spines", "[routing]") {
  // 4 nodes, 2 leaves of 16 NICs, 16 spines. Every pair node0/1 -> node2/3 crosses a spine.
  const Cluster c(dgx(4, NetworkShape::fat_tree, 16));
  Router router(c);
  std::set<std::string> spines_used;
  for (int src = 0; src < 16; ++src) {
    for (int dst = 16; dst < 32; ++dst) {
      const Route& r = router.route(src, dst);
      REQUIRE(r.links.size() == 6);
      spines_used.insert(c.vertex(c.target(r.links[2])).name);
      CHECK(r.latency == Approx(8e-6));
    }
  }
  CHECK(spines_used.size() == 16);  // 256 pairs hashed over 16 equal-cost spines
}

TEST_CASE("destination routing climbs to the spine of the destination's leaf port, one per port", "[routing]") {
  // 4 nodes of 8 NICs, 2 leaves of 16 NICs (nodes 0-1, 2-3), 16 spines. The destination's
  // port on its leaf is its NIC's place there: device 16 + p is port p of leaf1.
  ClusterSpec spec = dgx(4, NetworkShape::fat_tree, 16);
  spec.inter.routing = Routing::destination;
  const Cluster c(spec);
  Router router(c);
  auto spine = [&](int src, int dst) { return c.vertex(c.target(router.route(src, dst).links[2])).name; };
  for (int p = 0; p < 16; ++p) {
    const std::string expected = "spine" + std::to_string(p);
    for (int src = 0; src < 16; ++src) {
      INFO("from " << src << " to " << 16 + p);
      CHECK(spine(src, 16 + p) == expected);  // every source to one destination: its spine
    }
  }
  // A shift between the leaves (device i to 16 + i, as a ring's or pipeline's transfers
  // between nodes 0-1 and 2-3) climbs each of leaf0's 16 uplinks once.
  std::set<int> uplinks;
  for (int i = 0; i < 16; ++i) uplinks.insert(router.route(i, 16 + i).links[1]);
  CHECK(uplinks.size() == 16);
}

TEST_CASE("destination routing on an oversubscribed tree: ports share spines modulo the uplinks", "[routing]") {
  // 2:1: leaves of 16 NICs with 8 uplinks, 8 spines; port p and p + 8 share spine p.
  ClusterSpec spec = dgx(4, NetworkShape::fat_tree, 16, 2.0);
  spec.inter.routing = Routing::destination;
  const Cluster c(spec);
  Router router(c);
  for (int p = 0; p < 16; ++p) {
    CHECK(c.vertex(c.target(router.route(0, 16 + p).links[2])).name == "spine" + std::to_string(p % 8));
  }
}

TEST_CASE("ecmp routing hashes each pair: one destination is reached over several spines", "[routing]") {
  const Cluster c(dgx(4, NetworkShape::fat_tree, 16));
  REQUIRE(c.spec().inter.routing == Routing::ecmp);
  Router router(c);
  std::set<std::string> spines;
  for (int src = 0; src < 16; ++src) spines.insert(c.vertex(c.target(router.route(src, 20).links[2])).name);
  CHECK(spines.size() > 1);  // destination routing would take one
}

TEST_CASE("routing is deterministic and cached", "[routing]") {
  const Cluster c(dgx(4, NetworkShape::fat_tree, 16));
  Router a(c);
  Router b(c);
  for (int src = 0; src < 32; src += 3) {
    for (int dst = 0; dst < 32; dst += 5) CHECK(a.route(src, dst).links == b.route(src, dst).links);
  }
  const std::size_t cached = a.cached_routes();
  a.route(1, 2);  // a pair not asked for above: computed once, then served from the cache
  a.route(1, 2);
  CHECK(a.cached_routes() == cached + 1);
  CHECK(&a.route(3, 25) == &a.route(3, 25));
}

TEST_CASE("PCIe traffic between switches goes through the host", "[routing]") {
  ClusterSpec s = dgx(1);
  s.intra = IntraNodeSpec{IntraFabric::pcie, 32e9, 3e-6, 2};
  const Cluster c(s);
  Router router(c);
  // Same switch: gpu0 -> pcie0 -> gpu1, latency 3 us.
  CHECK(router.route(0, 1).links.size() == 2);
  CHECK(router.route(0, 1).latency == Approx(3e-6));
  // Across: gpu0 -> pcie0 -> host -> pcie2 -> gpu4, latency 6 us.
  const Route& r = router.route(0, 4);
  CHECK(hops(c, r) == std::vector<std::string>{"n0.gpu0 -> n0.pcie0", "n0.pcie0 -> n0.host", "n0.host -> n0.pcie2",
                                               "n0.pcie2 -> n0.gpu4"});
  CHECK(r.latency == Approx(6e-6));
  CHECK(r.bottleneck == 32e9);
}

TEST_CASE("a mesh routes directly and never through another GPU", "[routing]") {
  ClusterSpec s = dgx(1);
  s.gpus_per_node = 4;
  s.intra = IntraNodeSpec{IntraFabric::nvlink_mesh, 300e9, 1e-6, 2};
  const Cluster c(s);
  Router router(c);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) CHECK(router.route(a, b).links.size() == 1);
    }
  }
}

TEST_CASE("rail-optimized: same rail stays on its leaf, other rails climb to a spine", "[routing]") {
  const Cluster c(dgx(4, NetworkShape::rail_optimized, 32));
  Router router(c);
  CHECK(router.route(0, 8).links.size() == 4);   // n0.gpu0 -> rail0 leaf -> n1.gpu0
  CHECK(router.route(0, 9).links.size() == 6);   // n0.gpu0 -> rail0 leaf -> spine -> rail1 leaf -> n1.gpu1
}

TEST_CASE("the WAN link is on every cross-site route", "[routing]") {
  ClusterSpec s = dgx(2, NetworkShape::single_switch);
  s.wan = WanSpec{1, 12.5e9, 10e-3};
  const Cluster c(s);
  Router router(c);
  const Route& r = router.route(0, 8);
  CHECK(r.bottleneck == 12.5e9);
  CHECK(r.latency == Approx(10e-3 + 4e-6));
  CHECK(router.route(0, 1).bottleneck == 450e9);  // inside a node the WAN is irrelevant
}

TEST_CASE("a route to oneself is empty and a bad rank is an error", "[routing]") {
  const Cluster c(dgx(1));
  Router router(c);
  CHECK(router.route(3, 3).links.empty());
  CHECK_THROWS_AS(router.route(0, 8), std::out_of_range);
}

TEST_CASE("GPUs sharing a NIC still talk through the NVSwitch, not through the NIC", "[routing]") {
  // Two NICs per node: four GPUs behind each, attached with no latency. The path
  // gpu0 -> nic0 -> gpu1 would be shorter than the NVSwitch, but a NIC is no switch.
  ClusterSpec s = dgx(2);
  s.inter.nics_per_node = 2;
  const Cluster c(s);
  Router router(c);
  CHECK(hops(c, router.route(0, 1)) == std::vector<std::string>{"n0.gpu0 -> n0.nvswitch", "n0.nvswitch -> n0.gpu1"});
  // Across nodes the NIC does forward: gpu0 -> nic0 -> leaf -> node 1's nic0 -> its gpu0.
  const Route& across = router.route(0, 8);
  CHECK(c.link_name(across.links.front()) == "n0.gpu0 -> n0.nic0");
  CHECK(c.link_name(across.links.back()) == "n1.nic0 -> n1.gpu0");
}

TEST_CASE("pruned routes are shortest paths: checked against a plain Dijkstra over the whole graph", "[routing]") {
  // The router skips NICs of other nodes entered from the network and leaves that do not
  // hold the destination when coming down from a spine. An unpruned Boost Dijkstra (devices
  // other than the source do not forward) must find the same cost for every pair of GPUs in
  // different nodes, on fat trees and rail-optimized networks of several leaves.
  auto cost = [](const Link& l) { return std::llround(l.latency * 1e12) + 1; };
  for (const ClusterSpec& spec : {dgx(8, NetworkShape::fat_tree, 2, 2.0), dgx(8, NetworkShape::rail_optimized, 2),
                                  dgx(6, NetworkShape::fat_tree, 4)}) {
    const Cluster c(spec);
    Router router(c);
    const Graph& g = c.graph();
    for (int src = 0; src < c.gpu_count(); src += 3) {
      const VertexId s = c.gpu(src);
      auto forwards = [&](EdgeId e) {
        const VertexId u = boost::source(e, g);
        return u == s || g[u].kind != VertexKind::gpu;
      };
      const boost::filtered_graph<Graph, std::function<bool(EdgeId)>> fg(g, std::function<bool(EdgeId)>(forwards));
      std::vector<std::int64_t> dist(boost::num_vertices(g));
      boost::dijkstra_shortest_paths(
          fg, s,
          boost::distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)))
              .weight_map(boost::make_function_property_map<EdgeId>([&](EdgeId e) { return cost(g[e]); })));
      for (int dst = 0; dst < c.gpu_count(); ++dst) {
        if (c.node_of(dst) == c.node_of(src)) continue;
        const Route& r = router.route(src, dst);
        std::int64_t total = 0;
        VertexId at = s;
        for (int l : r.links) {
          REQUIRE(c.source(l) == at);
          at = c.target(l);
          total += cost(c.link(l));
        }
        CHECK(at == c.gpu(dst));
        CHECK(total == dist[c.gpu(dst)]);
      }
    }
  }
}

TEST_CASE("each device reaches its host's memory over its PCIe switch, a path device routes never take", "[routing]") {
  // 2 nodes of 8, hosts described: per node a host and 4 PCIe switches of 2 devices each
  // (25 GB/s links, 2 us device to host), built after everything else.
  ClusterSpec s = dgx(2);
  const Cluster plain(s);
  s.host = NodeHostSpec{1e12, 300e9, 25e9, 2, 2e-6};
  const Cluster c(s);
  CHECK(c.link_count() == plain.link_count() + 2 * 2 * (8 + 4));
  for (int id = 0; id < plain.link_count(); ++id) CHECK(c.link_name(id) == plain.link_name(id));  // ids kept
  Router router(c);
  const Route& up = router.host_route(11, true);
  CHECK(hops(c, up) == std::vector<std::string>{"n1.gpu3 -> n1.hostpcie1", "n1.hostpcie1 -> n1.host"});
  CHECK(up.bottleneck == 25e9);
  CHECK(up.latency == Approx(2e-6));
  const Route& down = router.host_route(11, false);
  CHECK(hops(c, down) == std::vector<std::string>{"n1.host -> n1.hostpcie1", "n1.hostpcie1 -> n1.gpu3"});
  // gpu 10 shares the switch's uplink with gpu 11; gpu 12 does not.
  CHECK(router.host_route(10, true).links.back() == up.links.back());
  CHECK(router.host_route(12, true).links.back() != up.links.back());
  // Device to device, nothing changes: through the NVSwitch and the NICs, never the host.
  Router before(plain);
  for (int a : {0, 3, 9}) {
    for (int b : {1, 10, 15}) {
      if (a == b) continue;
      CHECK(router.route(a, b).links == before.route(a, b).links);
      for (int id : router.route(a, b).links) CHECK(c.link(id).kind != LinkKind::host);
    }
  }
  // Without a host on the graph, there is no such route.
  Router none(plain);
  CHECK_THROWS_WITH(none.host_route(0, true), Catch::Contains("no host memory on the graph"));
}

TEST_CASE("under the pcie and shared-memory fabrics the host route is the fabric's own", "[routing]") {
  ClusterSpec s = dgx(1);
  s.intra = IntraNodeSpec{IntraFabric::pcie, 32e9, 3e-6, 2};
  const Cluster c(s);
  Router router(c);
  CHECK(hops(c, router.host_route(5, true)) == std::vector<std::string>{"n0.gpu5 -> n0.pcie2", "n0.pcie2 -> n0.host"});
  s.intra = IntraNodeSpec{IntraFabric::shared_memory, 10e9, 1e-6, 2};
  const Cluster m(s);
  Router shared(m);
  CHECK(hops(m, shared.host_route(2, false)) == std::vector<std::string>{"n0.host -> n0.gpu2"});
}
