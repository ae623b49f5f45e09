// The cluster as a Boost.Graph: devices (GPUs or CPU ranks), NVSwitches, PCIe switches,
// host memory, NICs, leaf and spine switches and WAN gateways are vertices; every physical
// link is two directed edges, each with its own bandwidth, latency, class (intra-node or
// inter-node) and kind. Fabrics are graph shapes, not special cases:
//
//   nvswitch       gpu <-> nvswitch                        (one logical switch per node)
//   nvlink-mesh    gpu <-> gpu for every pair, bandwidth / (g-1) each
//   pcie           gpu <-> pcie switch <-> host            (gpus_per_switch per switch)
//   shared-memory  device <-> host                          (CPU ranks)
//   NICs           gpu <-> nic (pcie: pcie switch <-> nic; shared-memory: host <-> nic);
//                  device g uses NIC floor(g * nics / gpus)
//   single-switch  nic <-> switch
//   fat-tree       nics fill leaves in node order, leaf_downlinks each; every leaf has
//                  ceil(leaf_downlinks / oversubscription) uplinks, one to each spine
//   rail-optimized NIC j of every node joins rail j's leaf (one per rail and block of
//                  leaf_downlinks nodes); leaves joined by spines as in the fat-tree
//   host           (host section, nvswitch / nvlink-mesh) gpu <-> host pcie switch <->
//                  host, devices_per_link devices per switch: links of kind host, which
//                  carry offload copies only (routes between devices never take them)
//   wan            each site's top switches <-> its gateway (non-blocking), and
//                  gateway <-> gateway at the WAN bandwidth and latency
//
// Link ids are dense integers 0..link_count()-1, so models can keep per-link state in
// vectors; the two directions of a physical link have ids 2k and 2k+1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "topology/cluster_spec.hpp"

namespace parasim::topology {

enum class VertexKind { gpu, nvswitch, pcie_switch, host, nic, leaf_switch, spine_switch, wan_gateway };
enum class LinkClass { intra, inter };
enum class LinkKind { nvlink, pcie, shared_memory, network, wan, host };

std::string_view to_string(VertexKind k);
std::string_view to_string(LinkClass c);
std::string_view to_string(LinkKind k);

struct Vertex {
  VertexKind kind = VertexKind::gpu;
  std::string name;
  int node = -1;   // node index, -1 for network equipment
  int index = -1;  // global rank for a GPU, otherwise index within its kind
};

struct Link {
  int id = -1;
  double bandwidth = 0.0;  // bytes/s, this direction
  double latency = 0.0;    // seconds
  LinkClass cls = LinkClass::intra;
  LinkKind kind = LinkKind::nvlink;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Vertex, Link>;
using VertexId = Graph::vertex_descriptor;
using EdgeId = Graph::edge_descriptor;

class Cluster {
 public:
  explicit Cluster(ClusterSpec spec);

  [[nodiscard]] const ClusterSpec& spec() const { return spec_; }
  [[nodiscard]] const Graph& graph() const { return graph_; }

  [[nodiscard]] int gpu_count() const { return static_cast<int>(gpus_.size()); }
  [[nodiscard]] VertexId gpu(int rank) const { return gpus_.at(static_cast<std::size_t>(rank)); }
  [[nodiscard]] int node_of(int rank) const { return rank / spec_.gpus_per_node; }

  [[nodiscard]] int link_count() const { return static_cast<int>(edges_.size()); }
  [[nodiscard]] EdgeId edge(int link_id) const { return edges_[static_cast<std::size_t>(link_id)]; }
  [[nodiscard]] const Link& link(int link_id) const { return graph_[edge(link_id)]; }
  [[nodiscard]] VertexId source(int link_id) const { return boost::source(edge(link_id), graph_); }
  [[nodiscard]] VertexId target(int link_id) const { return boost::target(edge(link_id), graph_); }
  [[nodiscard]] const Vertex& vertex(VertexId v) const { return graph_[v]; }
  // "n0.gpu3 -> n0.nvswitch"
  [[nodiscard]] std::string link_name(int link_id) const;
  // The links a Degraded::link names: "a -> b" that one, a vertex's name every link to and
  // from it; empty when none matches.
  [[nodiscard]] std::vector<int> links_named(std::string_view name) const;
  // The host memory vertex of a node, or null_vertex() where the node has none.
  [[nodiscard]] VertexId host(int node) const { return hosts_[static_cast<std::size_t>(node)]; }

 private:
  void build_devices_and_network();
  VertexId add_vertex(VertexKind kind, std::string name, int node, int index);
  void connect(VertexId a, VertexId b, double bandwidth, double latency, LinkClass cls, LinkKind kind);
  std::vector<VertexId> build_node(int node, bool with_nics);  // returns its NICs
  // The host tier of a node whose fabric has no host (HostSpec); returns its host vertex.
  VertexId build_host(int node, const std::vector<VertexId>& local);
  // Returns the top-level switches (spines, or the only leaf).
  std::vector<VertexId> build_network(const std::vector<VertexId>& nics, int node_count, const std::string& prefix);

  ClusterSpec spec_;
  Graph graph_;
  std::vector<VertexId> gpus_;
  std::vector<EdgeId> edges_;
  std::vector<VertexId> hosts_;  // per node (null_vertex() where none)
  int leaf_count_ = 0;
  int spine_count_ = 0;
  int switch_count_ = 0;
};

}  // namespace parasim::topology
