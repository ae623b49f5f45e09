#include "sim/collectives.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_map>

namespace parasim::sim {

std::string_view to_string(Protocol p) {
  switch (p) {
    case Protocol::simple: return "Simple";
    case Protocol::ll128: return "LL128";
    case Protocol::ll: return "LL";
  }
  return "?";
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::nvls: return "nvls";
    case Algorithm::direct: return "direct";
    case Algorithm::binomial: return "binomial";
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

// Rings per NIC (rail) that NCCL runs for a ring over `d`: 1 inside a node, with one NIC,
// or with an uneven or single member per node.
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
    int high = 1;
    while (high * 2 <= v) high *= 2;
    const auto bits = static_cast<std::size_t>(std::popcount(static_cast<unsigned>(v)));
    if (by_bits.size() < bits) by_bits.resize(bits);
    by_bits[bits - 1].flows.push_back({d[static_cast<std::size_t>(v - high)], d[static_cast<std::size_t>(v)], -1, 0.0, bytes});
  }
  for (Phase& p : by_bits) phases.push_back(std::move(p));
}

std::vector<Phase> build(Algorithm a, Network& net, const CollectiveCall& c) {
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

// NCCL's latency before the flows replaces the links' pipeline fill: the first phase waits
// it (less what the flows' own routes add), the others nothing; the flows carry `stretch`
// times their bytes.
void apply_choice(std::vector<Phase>& phases, Network& net, const Choice& choice) {
  if (choice.latency < 0.0 && choice.stretch == 1.0) return;
  double route = 0.0;
  for (Phase& p : phases) {
    double longest = 0.0;
    for (FlowSpec& f : p.flows) {
      f.bytes *= choice.stretch;
      longest = std::max(longest, f.link >= 0 ? f.latency : net.router().route(f.src, f.dst).latency);
    }
    route += longest;
    if (choice.latency >= 0.0) p.delay = 0.0;
  }
  if (choice.latency >= 0.0 && !phases.empty()) phases.front().delay = std::max(0.0, choice.latency - route);
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

bool symmetric(Algorithm a, const Network& net, const CollectiveCall& c) {
  if (a == Algorithm::ring) return ring_channels(net, c.devices) == 1;
  return a == Algorithm::direct || a == Algorithm::nvls;
}

std::vector<FlowEnds> flow_ends(Algorithm a, Network& net, const CollectiveCall& c) {
  std::vector<FlowEnds> out;
  if (net.folded() && !symmetric(a, net, c) && spans_replicas(net, c)) return out;  // single flows: nothing to prepare
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
    case Algorithm::binomial: return c.op != CollectiveOp::all_to_all;
    case Algorithm::tree: return all_reduce && c.devices.size() > 2;
    case Algorithm::hierarchical: {
      if (!all_reduce || c.devices.empty()) return false;
      const auto nodes = by_node(cluster, c.devices);
      return nodes.size() > 1 && uniform_local(nodes) > 1;
    }
    case Algorithm::nvls:
      return all_reduce && c.devices.size() > 1 && cluster.spec().intra.fabric == topology::IntraFabric::nvswitch &&
             cluster.spec().intra.nvls > 0.0 && by_node(cluster, c.devices).size() == 1;
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

double transfer_seconds(Algorithm a, Network& net, const CollectiveCall& c) {
  CollectiveCall none = c;
  none.bytes = 0.0;
  return estimate_seconds(a, net, c) - estimate_seconds(a, net, none);
}

namespace {

bool nvlink(const topology::ClusterSpec& spec) {
  return spec.intra.fabric == topology::IntraFabric::nvswitch || spec.intra.fabric == topology::IntraFabric::nvlink_mesh;
}

// The protocol's stretch of the bytes, given the bus bandwidth the flows alone reach.
double protocol_stretch(Protocol p, double flow_busbw, const topology::ClusterSpec& spec, int nodes) {
  switch (p) {
    case Protocol::simple: return 1.0;
    case Protocol::ll128: return 1.0 / 0.92;
    case Protocol::ll: {
      const double cap = nodes > 1 ? 0.9 * spec.inter.nic_bandwidth * spec.inter.efficiency
                                   : 0.37 * spec.intra.bandwidth * spec.intra.efficiency;
      return flow_busbw > 0.0 ? flow_busbw / std::min(0.5 * flow_busbw, cap) : 2.0;
    }
  }
  return 1.0;
}

double bus_factor(const CollectiveCall& c) {
  const double n = static_cast<double>(c.devices.size());
  return c.op == CollectiveOp::all_reduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

// NCCL's run of `c` by `a` with protocol `p`, given the flows' own transfer time.
Choice nccl_choice(Algorithm a, Protocol p, const topology::Cluster& cluster, const CollectiveCall& c, double transfer) {
  const int nodes = static_cast<int>(by_node(cluster, c.devices).size());
  Choice ch{a, p, nccl_latency(a, p, cluster, c), 1.0};
  const double busbw = transfer > 0.0 ? bus_factor(c) * c.bytes / transfer : 0.0;
  ch.stretch = protocol_stretch(p, busbw, cluster.spec(), nodes);
  if (a == Algorithm::nvls) ch.stretch /= cluster.spec().intra.nvls;
  return ch;
}

}  // namespace

double nccl_latency(Algorithm a, Protocol p, const topology::Cluster& cluster, const CollectiveCall& c) {
  // NCCL's tuning constants in microseconds, [tree, ring][LL, LL128, Simple].
  static constexpr double base[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
  static constexpr double nvlink_hop[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
  static constexpr double pci_hop[2][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}};
  static constexpr double net_hop[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
  const topology::ClusterSpec& spec = cluster.spec();
  const auto pi = static_cast<std::size_t>(p == Protocol::ll ? 0 : p == Protocol::ll128 ? 1 : 2);
  const int n = static_cast<int>(c.devices.size());
  const int nodes = static_cast<int>(by_node(cluster, c.devices).size());
  const double network = spec.inter.latency * 1e6 * (p == Protocol::simple ? 2.0 : 1.0);
  if (a == Algorithm::nvls) return (25.0 + (nodes > 1 ? 18.0 + network : 0.0)) * 1e-6;
  const std::size_t ai = a == Algorithm::tree ? 0 : 1;
  const double intra = (nvlink(spec) ? nvlink_hop : pci_hop)[ai][pi];
  const double inter = net_hop[ai][pi] + network;
  double lat = base[ai][pi];
  if (a == Algorithm::direct) {  // every peer at once (an all-to-all's grouped sends): one hop
    lat += nodes > 1 ? inter : intra;
  } else if (a == Algorithm::tree) {
    lat += 2.0 * ((static_cast<double>(n) / nodes - 1.0) * intra + std::log2(static_cast<double>(nodes)) * inter);
  } else {
    const bool all_reduce = c.op == CollectiveOp::all_reduce;
    const int steps = all_reduce ? 2 * (n - 1) : n - 1;
    const int inter_steps = nodes > 1 ? (all_reduce ? 2 * (nodes - 1) : nodes - 1) : 0;
    lat += (steps - inter_steps) * intra + inter_steps * inter;
  }
  return lat * 1e-6;
}

double estimate_seconds(const Choice& choice, Network& net, const CollectiveCall& c) {
  if (choice.latency < 0.0 && choice.stretch == 1.0) return estimate_seconds(choice.algorithm, net, c);
  const double transfer = transfer_seconds(choice.algorithm, net, c) * choice.stretch;
  if (choice.latency < 0.0) {
    CollectiveCall none = c;
    none.bytes = 0.0;
    return estimate_seconds(choice.algorithm, net, none) + transfer;
  }
  return choice.latency + transfer;
}

Choice choose(plan::Collective setting, Network& net, const CollectiveCall& c) {
  const topology::Cluster& cluster = net.cluster();
  // An all-to-all is NCCL's grouped point-to-point sends to every peer (Simple protocol),
  // whatever the setting.
  if (c.op == CollectiveOp::all_to_all) {
    Choice ch{Algorithm::direct};
    if (cluster.spec().library == topology::CollectiveLibrary::nccl) {
      ch.latency = nccl_latency(Algorithm::direct, Protocol::simple, cluster, c);
    }
    return ch;
  }
  auto or_ring = [&](Algorithm a) { return applicable(a, cluster, c) ? a : Algorithm::ring; };
  std::vector<Algorithm> candidates;
  switch (setting) {
    case plan::Collective::ring: candidates = {Algorithm::ring}; break;
    case plan::Collective::direct: candidates = {Algorithm::direct}; break;
    case plan::Collective::tree: candidates = {or_ring(Algorithm::tree)}; break;
    case plan::Collective::hierarchical: candidates = {or_ring(Algorithm::hierarchical)}; break;
    case plan::Collective::nvls:
      candidates = {applicable(Algorithm::nvls, cluster, c) ? Algorithm::nvls : or_ring(Algorithm::hierarchical)};
      break;
    case plan::Collective::automatic:
      if (cluster.spec().library == topology::CollectiveLibrary::mpi) return Choice{Algorithm::binomial};
      candidates = {Algorithm::ring};
      for (Algorithm a : {Algorithm::tree, Algorithm::hierarchical, Algorithm::nvls}) {
        if (applicable(a, cluster, c)) candidates.push_back(a);
      }
      break;
  }
  const bool nccl = cluster.spec().library == topology::CollectiveLibrary::nccl;
  Choice best{candidates.front()};
  double best_time = std::numeric_limits<double>::infinity();
  for (Algorithm a : candidates) {
    if (!nccl) {
      const double t = estimate_seconds(a, net, c);
      if (t < best_time) {
        best = Choice{a};
        best_time = t;
      }
      continue;
    }
    std::vector<Protocol> protocols{Protocol::simple};
    if (a != Algorithm::nvls) {
      protocols.push_back(Protocol::ll);
      if (nvlink(cluster.spec())) protocols.push_back(Protocol::ll128);
    }
    const double transfer = transfer_seconds(a, net, c);  // the same for every protocol
    for (Protocol p : protocols) {
      const Choice ch = nccl_choice(a, p, cluster, c, transfer);
      const double t = ch.latency + transfer * ch.stretch;  // estimate_seconds(ch, ...)
      if (t < best_time) {
        best = ch;
        best_time = t;
      }
    }
  }
  return best;
}

Algorithm resolve(plan::Collective setting, Network& net, const CollectiveCall& c) {
  return choose(setting, net, c).algorithm;
}

void run_collective(Network& net, Algorithm a, CollectiveCall c, std::function<void()> done) {
  run_collective(net, Choice{a}, std::move(c), std::move(done));
}

void run_collective(Network& net, const Choice& choice, CollectiveCall c, std::function<void()> done) {
  if (c.op == CollectiveOp::broadcast) throw std::invalid_argument("broadcast collectives are not modelled");
  const Algorithm a = choice.algorithm;
  auto st = std::make_shared<Running>();
  st->net = &net;
  st->phases = build(a, net, c);
  apply_choice(st->phases, net, choice);
  st->traffic = c.traffic;
  st->single = net.folded() && !symmetric(a, net, c) && spans_replicas(net, c);
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

const Choice& AlgorithmCache::get(plan::Collective setting, Network& net, const CollectiveCall& c, int group, bool count) {
  const auto key = std::make_tuple(static_cast<int>(setting), static_cast<int>(c.op), c.bytes, group);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, choose(setting, net, c)).first;
  if (count) {
    ++uses_[std::string(to_string(it->second.algorithm))];
    if (net.cluster().spec().library == topology::CollectiveLibrary::nccl) ++protocol_uses_[std::string(to_string(it->second.protocol))];
  }
  return it->second;
}

}  // namespace parasim::sim
