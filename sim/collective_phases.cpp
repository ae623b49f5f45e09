#include "sim/collective_phases.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace parasim::sim {

using program::CollectiveOp;

std::map<int, std::vector<int>> by_node(const topology::Cluster& cluster, const std::vector<int>& devices) {
  std::map<int, std::vector<int>> nodes;
  for (int d : devices) nodes[cluster.node_of(d)].push_back(d);
  return nodes;
}

std::size_t uniform_local(const std::map<int, std::vector<int>>& nodes) {
  const std::size_t k = nodes.begin()->second.size();
  for (const auto& [node, ds] : nodes) {
    if (ds.size() != k) return 0;
  }
  return k;
}

namespace {

int nvswitch_link(const topology::Cluster& cluster, int device, bool up) {
  const auto& g = cluster.graph();
  const topology::VertexId v = cluster.gpu(device);
  if (up) {
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      if (g[boost::target(*e, g)].kind == topology::VertexKind::nvswitch) return g[*e].id;
    }
  } else {
    for (auto [e, end] = boost::in_edges(v, g); e != end; ++e) {
      if (g[boost::source(*e, g)].kind == topology::VertexKind::nvswitch) return g[*e].id;
    }
  }
  throw std::logic_error("nvls on a device without an NVSwitch port");
}

int tree_depth(int n) {
  int d = 0;
  while ((2 << d) <= n) ++d;  // floor(log2 n)
  return d;
}

// A ring as NCCL runs it: the buffer is cut into many chunks that follow each other round
// the ring, so each member streams to its successor continuously. As flows: one flow per
// ring edge carrying all the chunks that cross it, steps x S/n bytes, after the pipeline
// fill of steps - 1 hops (the flow's own route adds the last).
void add_ring(std::vector<Phase>& phases, Network& net, const std::vector<int>& d, CollectiveOp op, double bytes) {
  const int n = static_cast<int>(d.size());
  if (n < 2) return;
  const int steps = op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
  Phase p;
  double max_latency = 0.0;
  for (int i = 0; i < n; ++i) {
    const int src = d[static_cast<std::size_t>(i)];
    const int dst = d[static_cast<std::size_t>((i + 1) % n)];
    p.flows.push_back({src, dst, -1, 0.0, steps * bytes / n});
    max_latency = std::max(max_latency, net.router().route(src, dst).latency);
  }
  p.delay = (steps - 1) * max_latency;
  phases.push_back(std::move(p));
}

// The nodes of a group in the order their first member appears, each with its members.
std::vector<std::vector<int>> nodes_in_order(const topology::Cluster& cluster, const std::vector<int>& devices) {
  std::vector<std::vector<int>> out;
  std::map<int, std::size_t> index;
  for (int d : devices) {
    auto [it, fresh] = index.try_emplace(cluster.node_of(d), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(d);
  }
  return out;
}

// NCCL's rings across nodes, one per rail (collectives.hpp): ring c crosses between nodes
// from the member at local index c to the next node's member at index c; inside each node
// it visits the members from index c round to index c again.
void add_channel_rings(std::vector<Phase>& phases, Network& net, const std::vector<int>& d, CollectiveOp op,
                       double bytes, int channels) {
  const auto nodes = nodes_in_order(net.cluster(), d);
  const int n = static_cast<int>(d.size());
  const std::size_t k = nodes.front().size();
  const int steps = op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
  const double each = steps * bytes / n / channels;
  Phase p;
  double max_latency = 0.0;
  auto flow = [&](int src, int dst) {
    p.flows.push_back({src, dst, -1, 0.0, each});
    max_latency = std::max(max_latency, net.router().route(src, dst).latency);
  };
  for (std::size_t c = 0; c < static_cast<std::size_t>(channels); ++c) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& local = nodes[i];
      for (std::size_t j = 0; j < k; ++j) flow(local[(c + j) % k], local[(c + j + 1) % k]);
      flow(local[c], nodes[(i + 1) % nodes.size()][c]);
    }
  }
  p.delay = (steps - 1) * max_latency;
  phases.push_back(std::move(p));
}

// Several rings at once (the concurrent rings of a hierarchical phase); the phase ends
// when the last of them does.
void add_rings(std::vector<Phase>& phases, Network& net, const std::vector<std::vector<int>>& rings, CollectiveOp op,
               double bytes) {
  std::vector<Phase> each;
  for (const auto& r : rings) add_ring(each, net, r, op, bytes);
  if (each.empty()) return;
  Phase merged;
  for (auto& p : each) {
    merged.delay = std::max(merged.delay, p.delay);
    merged.flows.insert(merged.flows.end(), p.flows.begin(), p.flows.end());
  }
  phases.push_back(std::move(merged));
}

void add_direct(std::vector<Phase>& phases, const std::vector<int>& d, double bytes) {
  const std::size_t n = d.size();
  if (n < 2) return;
  Phase p;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j) p.flows.push_back({d[i], d[j], -1, 0.0, bytes / static_cast<double>(n)});
    }
  }
  phases.push_back(std::move(p));
}

// libnbc's binomial reduce of S to the first member: round r's senders v (v mod 2^r =
// 2^(r-1)) send to v - 2^(r-1), one phase a round.
void add_binomial_reduce(std::vector<Phase>& phases, const std::vector<int>& d, double bytes) {
  const int n = static_cast<int>(d.size());
  for (int half = 1; half < n; half *= 2) {
    Phase p;
    for (int v = half; v < n; v += 2 * half) p.flows.push_back({d[static_cast<std::size_t>(v)], d[static_cast<std::size_t>(v - half)], -1, 0.0, bytes});
    phases.push_back(std::move(p));
  }
}

// libnbc's binomial broadcast of S from the first member: member v receives from v less its
// highest bit, then sends to all its children at once; the members at k bits receive in
// phase k.
void add_binomial_broadcast(std::vector<Phase>& phases, const std::vector<int>& d, double bytes) {
  const int n = static_cast<int>(d.size());
  std::vector<Phase> by_bits;
  for (int v = 1; v < n; ++v) {
    const auto high = static_cast<int>(std::bit_floor(static_cast<unsigned>(v)));
    const auto bits = static_cast<std::size_t>(std::popcount(static_cast<unsigned>(v)));
    if (by_bits.size() < bits) by_bits.resize(bits);
    by_bits[bits - 1].flows.push_back({d[static_cast<std::size_t>(v - high)], d[static_cast<std::size_t>(v)], -1, 0.0, bytes});
  }
  for (Phase& p : by_bits) phases.push_back(std::move(p));
}

}  // namespace

int ring_channels(const Network& net, const std::vector<int>& d) {
  const topology::Cluster& cluster = net.cluster();
  if (cluster.spec().library != topology::CollectiveLibrary::nccl || cluster.spec().inter.nics_per_node < 2) return 1;
  const auto nodes = nodes_in_order(cluster, d);
  if (nodes.size() < 2) return 1;
  const std::size_t k = nodes.front().size();
  for (const auto& n : nodes) {
    if (n.size() != k) return 1;
  }
  return static_cast<int>(std::min<std::size_t>(k, static_cast<std::size_t>(cluster.spec().inter.nics_per_node)));
}

std::vector<Phase> build_phases(Algorithm a, Network& net, const CollectiveCall& c) {
  std::vector<Phase> phases;
  const auto& d = c.devices;
  const int n = static_cast<int>(d.size());
  if (n < 2) return phases;
  const topology::Cluster& cluster = net.cluster();
  switch (a) {
    case Algorithm::ring:
      if (const int channels = ring_channels(net, d); channels > 1) {
        add_channel_rings(phases, net, d, c.op, c.bytes, channels);
      } else {
        add_ring(phases, net, d, c.op, c.bytes);
      }
      break;
    case Algorithm::direct:
      add_direct(phases, d, c.bytes);
      if (c.op == CollectiveOp::all_reduce) add_direct(phases, d, c.bytes);
      break;
    case Algorithm::binomial:
      if (c.op == CollectiveOp::all_reduce) {
        add_binomial_reduce(phases, d, c.bytes);
        add_binomial_broadcast(phases, d, c.bytes);
      } else if (c.op == CollectiveOp::reduce_scatter) {
        add_binomial_reduce(phases, d, c.bytes);
        Phase scatter;
        for (int v = 1; v < n; ++v) scatter.flows.push_back({d[0], d[static_cast<std::size_t>(v)], -1, 0.0, c.bytes / n});
        phases.push_back(std::move(scatter));
      } else {
        add_direct(phases, d, c.bytes);
      }
      break;
    case Algorithm::tree: {
      Phase p;
      double max_latency = 0.0;
      auto edge = [&](int child, int parent) {
        const int u = d[static_cast<std::size_t>(child)];
        const int v = d[static_cast<std::size_t>(parent)];
        p.flows.push_back({u, v, -1, 0.0, c.bytes / 2});
        p.flows.push_back({v, u, -1, 0.0, c.bytes / 2});
        max_latency = std::max({max_latency, net.router().route(u, v).latency, net.router().route(v, u).latency});
      };
      for (int i = 1; i < n; ++i) edge(i, (i - 1) / 2);                        // tree A
      for (int i = 1; i < n; ++i) edge(n - 1 - i, n - 1 - (i - 1) / 2);        // tree B, mirrored
      p.delay = (2 * tree_depth(n) - 1) * max_latency;
      phases.push_back(std::move(p));
      break;
    }
    case Algorithm::nvls: {
      Phase p;
      for (int dev : d) {
        const int up = nvswitch_link(cluster, dev, true);
        const int down = nvswitch_link(cluster, dev, false);
        const double up_latency = cluster.link(up).latency;
        p.flows.push_back({dev, -1, up, up_latency, c.bytes});
        p.flows.push_back({-1, dev, down, up_latency + cluster.link(down).latency, c.bytes});
      }
      phases.push_back(std::move(p));
      break;
    }
    case Algorithm::hierarchical: {
      const auto nodes = by_node(cluster, d);
      const std::size_t k = uniform_local(nodes);
      std::vector<std::vector<int>> inside;
      for (const auto& [node, ds] : nodes) inside.push_back(ds);
      std::vector<std::vector<int>> across(k);
      for (std::size_t i = 0; i < k; ++i) {
        for (const auto& [node, ds] : nodes) across[i].push_back(ds[i]);
      }
      add_rings(phases, net, inside, CollectiveOp::reduce_scatter, c.bytes);
      add_rings(phases, net, across, CollectiveOp::all_reduce, c.bytes / static_cast<double>(k));
      add_rings(phases, net, inside, CollectiveOp::all_gather, c.bytes);
      if (cluster.spec().library == topology::CollectiveLibrary::nccl) {
        // Pipelined: the chunks flow through the three phases at once.
        Phase all;
        for (Phase& ph : phases) {
          all.delay += ph.delay;
          all.flows.insert(all.flows.end(), ph.flows.begin(), ph.flows.end());
        }
        phases.assign(1, std::move(all));
      }
      break;
    }
  }
  return phases;
}

}  // namespace parasim::sim
