#include "sim/collectives.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <unordered_map>

namespace parasim::sim {

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::nvls: return "nvls";
    case Algorithm::direct: return "direct";
  }
  return "?";
}

namespace {

using plan::CollectiveOp;

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

std::map<int, std::vector<int>> by_node(const topology::Cluster& cluster, const std::vector<int>& devices) {
  std::map<int, std::vector<int>> nodes;
  for (int d : devices) nodes[cluster.node_of(d)].push_back(d);
  return nodes;
}

// Members per node when every node holds the same number, else 0.
std::size_t uniform_local(const std::map<int, std::vector<int>>& nodes) {
  const std::size_t k = nodes.begin()->second.size();
  for (const auto& [node, ds] : nodes) {
    if (ds.size() != k) return 0;
  }
  return k;
}

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

std::vector<Phase> build(Algorithm a, Network& net, const CollectiveCall& c) {
  std::vector<Phase> phases;
  const auto& d = c.devices;
  const int n = static_cast<int>(d.size());
  if (n < 2) return phases;
  const topology::Cluster& cluster = net.cluster();
  switch (a) {
    case Algorithm::ring: add_ring(phases, net, d, c.op, c.bytes); break;
    case Algorithm::direct:
      add_direct(phases, d, c.bytes);
      if (c.op == CollectiveOp::all_reduce) add_direct(phases, d, c.bytes);
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
      break;
    }
  }
  return phases;
}

struct Running {
  Network* net = nullptr;
  std::vector<Phase> phases;
  std::size_t next = 0;  // the phase to start next
  int outstanding = 0;
  int traffic = -1;
  bool single = false;  // folded: run every flow, each standing for itself (network.hpp)
  std::function<void()> done;
};

void next_phase(const std::shared_ptr<Running>& st);

int owner(const FlowSpec& f) { return f.src >= 0 ? f.src : f.dst; }

// Folded (network.hpp), a phase runs the flows of replica 0's members only, each standing
// for its copies in the other replicas; or, `single`, all of them.
void start_flows(const std::shared_ptr<Running>& st, const Phase& p) {
  Network& net = *st->net;
  auto runs = [&](const FlowSpec& f) { return st->single || net.represented(owner(f)); };
  int count = 0;
  for (const FlowSpec& f : p.flows) count += runs(f) ? 1 : 0;
  if (count == 0) throw std::logic_error("a collective phase without a flow of the simulated replica");
  st->outstanding = count;
  for (const FlowSpec& f : p.flows) {
    if (!runs(f)) continue;
    auto arrived = [st] {
      if (--st->outstanding == 0) next_phase(st);
    };
    if (f.link >= 0) {
      st->net->transfer_on_link(f.link, f.latency, f.bytes, std::move(arrived), st->traffic, owner(f), st->single);
    } else {
      st->net->transfer(f.src, f.dst, f.bytes, std::move(arrived), st->traffic, st->single);
    }
  }
}

// Starts the next phase after its delay, or finishes.
void next_phase(const std::shared_ptr<Running>& st) {
  if (st->next >= st->phases.size()) {
    auto done = std::move(st->done);
    done();
    return;
  }
  const Phase& p = st->phases[st->next++];
  if (p.delay > 0.0) {
    st->net->engine().after(Time::seconds(p.delay), [st, &p] { start_flows(st, p); });
  } else {
    start_flows(st, p);
  }
}

}  // namespace

bool spans_replicas(const Network& net, const CollectiveCall& c) {
  return std::any_of(c.devices.begin(), c.devices.end(), [&](int d) { return !net.represented(d); });
}

bool symmetric(Algorithm a) { return a == Algorithm::ring || a == Algorithm::direct || a == Algorithm::nvls; }

std::vector<FlowEnds> flow_ends(Algorithm a, Network& net, const CollectiveCall& c) {
  std::vector<FlowEnds> out;
  if (net.folded() && !symmetric(a) && spans_replicas(net, c)) return out;  // single flows: nothing to prepare
  for (const Phase& p : build(a, net, c)) {
    for (const FlowSpec& f : p.flows) {
      if (net.represented(owner(f))) out.push_back({f.src, f.dst, f.link});
    }
  }
  return out;
}

bool applicable(Algorithm a, const topology::Cluster& cluster, const CollectiveCall& c) {
  const bool all_reduce = c.op == CollectiveOp::all_reduce;
  switch (a) {
    case Algorithm::ring:
    case Algorithm::direct: return true;
    case Algorithm::tree: return all_reduce && c.devices.size() > 2;
    case Algorithm::hierarchical: {
      if (!all_reduce || c.devices.empty()) return false;
      const auto nodes = by_node(cluster, c.devices);
      return nodes.size() > 1 && uniform_local(nodes) > 1;
    }
    case Algorithm::nvls:
      return all_reduce && c.devices.size() > 1 && cluster.spec().intra.fabric == topology::IntraFabric::nvswitch &&
             by_node(cluster, c.devices).size() == 1;
  }
  return false;
}

double estimate_seconds(Algorithm a, Network& net, const CollectiveCall& c) {
  const topology::Cluster& cluster = net.cluster();
  double total = 0.0;
  std::unordered_map<int, double> load;
  for (const Phase& p : build(a, net, c)) {
    load.clear();
    double latency = 0.0;
    for (const FlowSpec& f : p.flows) {
      if (f.link >= 0) {
        load[f.link] += f.bytes;
        latency = std::max(latency, f.latency);
      } else {
        const topology::Route& r = net.router().route(f.src, f.dst);
        for (int l : r.links) load[l] += f.bytes;
        latency = std::max(latency, r.latency);
      }
    }
    double busiest = 0.0;
    for (const auto& [l, bytes] : load) busiest = std::max(busiest, bytes / cluster.link(l).bandwidth);
    total += p.delay + latency + busiest;
  }
  return total;
}

Algorithm resolve(plan::Collective setting, Network& net, const CollectiveCall& c) {
  const topology::Cluster& cluster = net.cluster();
  auto or_ring = [&](Algorithm a) { return applicable(a, cluster, c) ? a : Algorithm::ring; };
  switch (setting) {
    case plan::Collective::ring: return Algorithm::ring;
    case plan::Collective::direct: return Algorithm::direct;
    case plan::Collective::tree: return or_ring(Algorithm::tree);
    case plan::Collective::hierarchical: return or_ring(Algorithm::hierarchical);
    case plan::Collective::nvls:
      return applicable(Algorithm::nvls, cluster, c) ? Algorithm::nvls : or_ring(Algorithm::hierarchical);
    case plan::Collective::automatic: break;
  }
  Algorithm best = Algorithm::ring;
  double best_time = estimate_seconds(Algorithm::ring, net, c);
  for (Algorithm a : {Algorithm::tree, Algorithm::hierarchical, Algorithm::nvls}) {
    if (!applicable(a, cluster, c)) continue;
    const double t = estimate_seconds(a, net, c);
    if (t < best_time) {
      best = a;
      best_time = t;
    }
  }
  return best;
}

void run_collective(Network& net, Algorithm a, CollectiveCall c, std::function<void()> done) {
  if (c.op == CollectiveOp::broadcast) throw std::invalid_argument("broadcast collectives are not modelled");
  auto st = std::make_shared<Running>();
  st->net = &net;
  st->phases = build(a, net, c);
  st->traffic = c.traffic;
  st->single = net.folded() && !symmetric(a) && spans_replicas(net, c);
  st->done = std::move(done);
  if (st->phases.empty()) {
    net.engine().after(Time{}, [st] { next_phase(st); });
    return;
  }
  next_phase(st);
}

void ring_collective(Network& net, plan::CollectiveOp op, std::vector<int> devices, double bytes,
                     std::function<void()> done) {
  run_collective(net, Algorithm::ring, CollectiveCall{op, std::move(devices), bytes}, std::move(done));
}

Algorithm AlgorithmCache::get(plan::Collective setting, Network& net, const CollectiveCall& c, int group, bool count) {
  const auto key = std::make_tuple(static_cast<int>(setting), static_cast<int>(c.op), c.bytes, group);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, resolve(setting, net, c)).first;
  if (count) ++uses_[it->second];
  return it->second;
}

}  // namespace parasim::sim
