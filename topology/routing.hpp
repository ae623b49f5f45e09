// Routes between devices on the cluster graph.
//
// A route is a shortest path by latency (ties broken by hop count) that never passes
// through another device: devices are endpoints, not forwarders; nor over the links to
// host memory that only offload copies take (LinkKind::host). A NIC forwards between
// its node and the network only, never between two devices of its node (they use the
// node's fabric). Where several shortest paths exist (spines of a fat-tree, NICs of a
// node), the path is chosen by walking back from the destination and picking among the
// equal-cost predecessors by the network's routing (cluster.inter_node.routing):
//   ecmp         a hash of (source, destination, vertex): deterministic, and spread evenly
//                over the alternatives across pairs, as ECMP hashing spreads flows
//   destination  at the destination's leaf, the spine numbered (the destination NIC's port
//                on that leaf) modulo the spines that reach it, in link order (D-mod-k,
//                Zahavi 2010, as InfiniBand's ftree routing programs a fat tree); a
//                leaf's k uplinks thus carry the traffic to its ports p, p + k, ... and a
//                shift between two leaves, every NIC sending to the same port of the other
//                leaf, takes each uplink once. Elsewhere (a WAN's gateways) the hash.
//
// Cost: one Dijkstra from the source with early exit at the destination, pruned to the
// vertices that can lie on a path to it (a NIC entered from the network leads only into its
// own node; a leaf entered from a spine only down to its NICs), so a query on a large fat
// tree visits the two nodes, their leaves and the spines rather than the whole graph:
// O((V + E) log V) at worst for the first query of a pair, O(1) from the cache afterwards. The
// search reuses one workspace (stamped arrays), so a query allocates only its route.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "topology/cluster.hpp"

namespace parasim::topology {

struct Route {
  std::vector<int> links;   // link ids from source to destination
  double bottleneck = 0.0;  // min bandwidth along the path, bytes/s (infinite for src == dst)
  double latency = 0.0;     // sum of link latencies, seconds
};

class Router {
 public:
  explicit Router(const Cluster& cluster);

  // Route from device `src` to device `dst` (global ranks). Cached; the reference stays
  // valid for the Router's lifetime.
  const Route& route(int src, int dst);
  [[nodiscard]] std::size_t cached_routes() const { return cache_.size(); }
  // Route from device `device` to its node's host memory (to_host) or back: the device's
  // PCIe path (host links, or under the pcie and shared-memory fabrics the fabric's own).
  // Throws where the node has no host (Cluster::host). Cached likewise.
  const Route& host_route(int device, bool to_host);

 private:
  Route compute(int src, int dst);

  const Cluster& cluster_;
  std::unordered_map<std::uint64_t, Route> cache_;
  std::unordered_map<std::uint64_t, Route> host_cache_;
  // Dijkstra workspace, valid where stamp_[v] == current_.
  std::vector<std::int64_t> dist_;
  std::vector<std::uint32_t> stamp_;
  std::vector<std::vector<int>> preds_;  // equal-cost incoming link ids
  std::uint32_t current_ = 0;
  std::vector<std::int64_t> cost_;               // per link
  std::vector<std::vector<VertexId>> node_leaves_;  // per node: leaves its NICs hang from
  std::unordered_map<std::uint64_t, std::vector<int>> spine_leaf_;  // (spine, leaf) -> link ids
  std::unordered_map<VertexId, std::vector<int>> spine_other_;      // spine -> its links to non-leaves
  std::vector<int> nic_port_;  // per vertex: a NIC's port on its leaf (its place among the leaf's NIC links), else -1
  std::vector<int> spines_;    // scratch: a leaf's equal-cost spine links, once each, in link order
};

}  // namespace parasim::topology
