#include "sim/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "sim/collective_phases.hpp"

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

using program::CollectiveOp;

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
  for (const Phase& p : build_phases(a, net, c)) {
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
  for (const Phase& p : build_phases(a, net, c)) {
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

double bus_factor(const CollectiveCall& c) {
  const double n = static_cast<double>(c.devices.size());
  return c.op == program::CollectiveOp::all_reduce ? 2.0 * (n - 1) / n : (n - 1) / n;
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

Choice choose(scenario::Collective setting, Network& net, const CollectiveCall& c) {
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
    case scenario::Collective::ring: candidates = {Algorithm::ring}; break;
    case scenario::Collective::direct: candidates = {Algorithm::direct}; break;
    case scenario::Collective::tree: candidates = {or_ring(Algorithm::tree)}; break;
    case scenario::Collective::hierarchical: candidates = {or_ring(Algorithm::hierarchical)}; break;
    case scenario::Collective::nvls:
      candidates = {applicable(Algorithm::nvls, cluster, c) ? Algorithm::nvls : or_ring(Algorithm::hierarchical)};
      break;
    case scenario::Collective::automatic:
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

Algorithm resolve(scenario::Collective setting, Network& net, const CollectiveCall& c) {
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
  st->phases = build_phases(a, net, c);
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

void ring_collective(Network& net, program::CollectiveOp op, std::vector<int> devices, double bytes,
                     std::function<void()> done) {
  run_collective(net, Algorithm::ring, CollectiveCall{op, std::move(devices), bytes}, std::move(done));
}

const Choice& AlgorithmCache::get(scenario::Collective setting, Network& net, const CollectiveCall& c, int group,
                                  bool count) {
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
