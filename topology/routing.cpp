#include "topology/routing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>

namespace parasim::topology {
namespace {

// Integer cost of a link: picoseconds of latency plus one per hop, so paths of equal
// latency prefer fewer hops and equal-cost comparisons are exact.
std::int64_t link_cost(const Link& l) { return std::llround(l.latency * 1e12) + 1; }

std::uint64_t pair_key(VertexId a, VertexId b) { return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint64_t>(b); }

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Router::Router(const Cluster& cluster)
    : cluster_(cluster),
      dist_(boost::num_vertices(cluster.graph())),
      stamp_(boost::num_vertices(cluster.graph()), 0),
      preds_(boost::num_vertices(cluster.graph())) {
  const Graph& g = cluster.graph();
  cost_.resize(static_cast<std::size_t>(cluster.link_count()));
  for (int l = 0; l < cluster.link_count(); ++l) cost_[static_cast<std::size_t>(l)] = link_cost(cluster.link(l));
  // The leaves each node's NICs hang from.
  const int nodes = cluster.gpu_count() / std::max(1, cluster.spec().gpus_per_node);
  node_leaves_.resize(static_cast<std::size_t>(nodes));
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].kind != VertexKind::nic || g[v].node < 0 || g[v].node >= nodes) continue;
    for (auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const VertexId w = boost::target(e, g);
      if (g[w].kind == VertexKind::leaf_switch) node_leaves_[static_cast<std::size_t>(g[v].node)].push_back(w);
    }
  }
  // Each NIC's port on its leaf: its place among the leaf's links down to NICs, in link order.
  nic_port_.assign(boost::num_vertices(g), -1);
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].kind != VertexKind::leaf_switch) continue;
    std::vector<std::pair<int, VertexId>> ports;  // (link id, NIC)
    for (auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const VertexId w = boost::target(e, g);
      if (g[w].kind == VertexKind::nic) ports.emplace_back(g[e].id, w);
    }
    std::sort(ports.begin(), ports.end());
    for (std::size_t i = 0; i < ports.size(); ++i) nic_port_[ports[i].second] = static_cast<int>(i);
  }
  // A spine's edges: to each leaf (looked up by leaf, a spine reaches hundreds), and the rest.
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].kind != VertexKind::spine_switch) continue;
    auto& other = spine_other_[v];
    for (auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
      const VertexId w = boost::target(e, g);
      if (g[w].kind == VertexKind::leaf_switch) {
        spine_leaf_[pair_key(v, w)].push_back(g[e].id);
      } else {
        other.push_back(g[e].id);
      }
    }
  }
}

const Route& Router::route(int src, int dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                            static_cast<std::uint32_t>(dst);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(key, compute(src, dst)).first->second;
}

Route Router::compute(int src, int dst) {
  if (src < 0 || dst < 0 || src >= cluster_.gpu_count() || dst >= cluster_.gpu_count()) {
    throw std::out_of_range(fmt::format("route {} -> {}: the cluster has devices 0..{}", src, dst,
                                        cluster_.gpu_count() - 1));
  }
  Route r;
  if (src == dst) {
    r.bottleneck = std::numeric_limits<double>::infinity();
    return r;
  }
  const Graph& g = cluster_.graph();
  const VertexId s = cluster_.gpu(src);
  const VertexId t = cluster_.gpu(dst);
  ++current_;
  auto seen = [&](VertexId v) { return stamp_[v] == current_; };
  auto touch = [&](VertexId v) {
    if (!seen(v)) {
      stamp_[v] = current_;
      dist_[v] = std::numeric_limits<std::int64_t>::max();
      preds_[v].clear();
    }
  };

  // Pruning that keeps every shortest path: a NIC entered from the network leads only into
  // its own node, so only the destination node's NICs are entered; and a leaf entered from
  // a spine leads only down to its NICs (going up again is never shorter than taking the
  // destination's leaf from that spine), so only the destination node's leaves are.
  const int t_node = g[t].node;
  using Item = std::pair<std::int64_t, VertexId>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  touch(s);
  dist_[s] = 0;
  heap.emplace(0, s);
  bool reached = false;
  while (!heap.empty()) {
    // Plain variables: a lambda below uses them (clang 14 cannot capture a structured binding).
    const auto d = heap.top().first;
    const auto u = heap.top().second;
    heap.pop();
    if (d != dist_[u]) continue;  // stale entry
    if (u == t) {
      reached = true;
      break;
    }
    if (u != s && g[u].kind == VertexKind::gpu) continue;  // devices do not forward
    // A NIC forwards between its node and the network, never from one of its node's
    // devices to another: they talk over the node's own fabric.
    const bool nic_from_node =
        g[u].kind == VertexKind::nic && !preds_[u].empty() && cluster_.link(preds_[u].front()).cls == LinkClass::intra;
    auto relax = [&](int link) {
      const VertexId v = cluster_.target(link);
      touch(v);
      const std::int64_t nd = d + cost_[static_cast<std::size_t>(link)];
      if (nd < dist_[v]) {
        dist_[v] = nd;
        preds_[v].assign(1, link);
        heap.emplace(nd, v);
      } else if (nd == dist_[v]) {
        preds_[v].push_back(link);
      }
    };
    if (g[u].kind == VertexKind::spine_switch) {
      for (int link : spine_other_[u]) relax(link);
      for (VertexId leaf : node_leaves_[static_cast<std::size_t>(t_node)]) {
        const auto it = spine_leaf_.find(pair_key(u, leaf));
        if (it == spine_leaf_.end()) continue;
        for (int link : it->second) relax(link);
      }
      continue;
    }
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g))) {
      if (nic_from_node && g[e].cls == LinkClass::intra) continue;
      if (g[e].kind == LinkKind::host) continue;  // offload copies' links only
      const VertexId v = boost::target(e, g);
      if (g[v].kind == VertexKind::nic && g[e].cls == LinkClass::inter && g[v].node != t_node) continue;
      relax(g[e].id);
    }
  }
  if (!reached) {
    throw std::runtime_error(fmt::format("no route from {} to {}", g[s].name, g[t].name));
  }

  // Walk back, choosing among equal-cost predecessors by the network's routing.
  const bool by_destination = cluster_.spec().inter.routing == Routing::destination;
  int port = -1;  // the destination NIC's port on its leaf, once the walk has passed it
  r.bottleneck = std::numeric_limits<double>::infinity();
  for (VertexId v = t; v != s;) {
    const std::vector<int>& p = preds_[v];
    if (port < 0 && g[v].kind == VertexKind::nic) port = nic_port_[v];
    int link = p.front();
    if (p.size() > 1 && by_destination && port >= 0 && g[v].kind == VertexKind::leaf_switch) {
      // A spine's link can be listed more than once (reached through each of the
      // destination node's NICs on this leaf): each counts once.
      spines_.assign(p.begin(), p.end());
      std::sort(spines_.begin(), spines_.end());
      spines_.erase(std::unique(spines_.begin(), spines_.end()), spines_.end());
      link = spines_[static_cast<std::size_t>(port) % spines_.size()];
    } else if (p.size() > 1) {
      const std::uint64_t h = mix((static_cast<std::uint64_t>(src) << 40) ^ (static_cast<std::uint64_t>(dst) << 20) ^ v);
      link = p[h % p.size()];
    }
    r.links.push_back(link);
    const Link& l = cluster_.link(link);
    r.bottleneck = std::min(r.bottleneck, l.bandwidth);
    r.latency += l.latency;
    v = cluster_.source(link);
  }
  std::reverse(r.links.begin(), r.links.end());
  return r;
}

const Route& Router::host_route(int device, bool to_host) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(device)) << 1) | (to_host ? 1 : 0);
  if (auto it = host_cache_.find(key); it != host_cache_.end()) return it->second;
  if (device < 0 || device >= cluster_.gpu_count()) {
    throw std::out_of_range(fmt::format("host route of device {}: the cluster has devices 0..{}", device,
                                        cluster_.gpu_count() - 1));
  }
  const Graph& g = cluster_.graph();
  const VertexId host = cluster_.host(cluster_.node_of(device));
  if (host == Graph::null_vertex()) {
    throw std::runtime_error(fmt::format("{} has no host memory on the graph (cluster.host)", g[cluster_.gpu(device)].name));
  }
  // The device's tree up to its host: from the device, the one link up at each vertex
  // (host links first, then the fabric's PCIe or shared-memory links), never through a
  // device, a NIC or an NVSwitch.
  Route r;
  r.bottleneck = std::numeric_limits<double>::infinity();
  VertexId at = cluster_.gpu(device);
  while (at != host) {
    int next = -1;
    for (auto e : boost::make_iterator_range(boost::out_edges(at, g))) {
      const Link& l = g[e];
      const VertexKind k = g[boost::target(e, g)].kind;
      const bool up = k == VertexKind::host || k == VertexKind::pcie_switch;
      if (!up || (at != cluster_.gpu(device) && k == VertexKind::pcie_switch)) continue;
      if (l.kind != LinkKind::host && l.kind != LinkKind::pcie && l.kind != LinkKind::shared_memory) continue;
      if (next < 0 || (l.kind == LinkKind::host && cluster_.link(next).kind != LinkKind::host)) next = l.id;
    }
    if (next < 0 || r.links.size() > 4) {
      throw std::runtime_error(fmt::format("no route from {} to its host memory", g[cluster_.gpu(device)].name));
    }
    r.links.push_back(next);
    r.bottleneck = std::min(r.bottleneck, cluster_.link(next).bandwidth);
    r.latency += cluster_.link(next).latency;
    at = cluster_.target(next);
  }
  if (!to_host) {
    // The same links the other way: each physical link's two directions are ids 2k, 2k+1.
    std::reverse(r.links.begin(), r.links.end());
    for (int& l : r.links) l ^= 1;
  }
  return host_cache_.emplace(key, std::move(r)).first->second;
}

}  // namespace parasim::topology
