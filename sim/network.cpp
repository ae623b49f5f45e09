#include "sim/network.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace parasim::sim {

Network::Network(Engine& engine, const topology::Cluster& cluster)
    : engine_(engine), cluster_(cluster), router_(cluster), carried_(static_cast<std::size_t>(cluster.link_count()), 0.0) {
  for (auto& v : by_traffic_) v.assign(carried_.size(), 0.0);
  for (int l = 0; l < cluster.link_count(); ++l) solver_.add_link(cluster.link(l).bandwidth);
  link_ids_.resize(carried_.size());
  std::iota(link_ids_.begin(), link_ids_.end(), 0);
}

void Network::transfer(int src, int dst, double bytes, std::function<void()> done, int traffic, bool single) {
  if (src == dst || bytes <= 0.0) {
    engine_.after(Time{}, std::move(done));
    return;
  }
  if (!ordered_ || cluster_.node_of(src) == cluster_.node_of(dst)) {
    start_pair(src, dst, bytes, std::move(done), traffic, single);
    return;
  }
  if (mpi_rendezvous(bytes, true)) {
    // A rendezvous: the data follows the receiver's acknowledgement, which comes back in
    // order on the reverse connection.
    connection(dst, src, mpi_control_bytes,
               [this, src, dst, bytes, traffic, single, done = std::move(done)]() mutable {
                 connection(src, dst, bytes, std::move(done), traffic, single);
               },
               -1, single);
    return;
  }
  connection(src, dst, bytes, std::move(done), traffic, single);
}

void Network::connection(int src, int dst, double bytes, std::function<void()> done, int traffic, bool single) {
  // One connection: behind the transfers under way on it, or now (and the next one on it
  // when this one arrives).
  const std::pair<int, int> key{src, dst};
  if (auto it = connections_.find(key); it != connections_.end()) {
    it->second.push_back({bytes, std::move(done), traffic, single});
    return;
  }
  connections_.emplace(key, std::deque<Queued>{});
  send_on(key, Queued{bytes, std::move(done), traffic, single});
}

void Network::send_on(std::pair<int, int> key, Queued q) {
  start_pair(key.first, key.second, q.bytes, [this, key, done = std::move(q.done)] {
    // Arrived: the next waiting on the connection goes, or the connection is idle.
    auto& waiting = connections_.at(key);
    if (waiting.empty()) {
      connections_.erase(key);
    } else {
      Queued next = std::move(waiting.front());
      waiting.pop_front();
      send_on(key, std::move(next));
    }
    done();
  }, q.traffic, q.single);
}

void Network::start_pair(int src, int dst, double bytes, std::function<void()> done, int traffic, bool single) {
  // With charge_cpu, a flow between nodes loads both ends' cores.
  const bool charged = !cpu_load_.empty() && cluster_.node_of(src) != cluster_.node_of(dst);
  const int from = charged ? in_replica0(src) : -1;
  const int to = charged ? in_replica0(dst) : -1;
  if (folded()) {
    const Folded& f = folded_flow({src, dst, -1}, single);
    start(f.links, f.weights, f.latency, bytes, std::move(done), traffic, from, to);
    return;
  }
  const topology::Route& route = router_.route(src, dst);
  start(route.links, {}, route.latency, bytes, std::move(done), traffic, from, to);
}

void Network::charge_cpu(double send_per_byte, double receive_per_byte, std::function<void(int)> changed) {
  send_cpu_ = send_per_byte;
  receive_cpu_ = receive_per_byte;
  cpu_load_.assign(static_cast<std::size_t>(cluster_.gpu_count()), 0.0);
  cpu_changed_ = std::move(changed);
}

int Network::in_replica0(int d) const {
  if (!folded()) return d;
  for (int hops = 0; hops < replicas_.count && replicas_.represented[static_cast<std::size_t>(d)] == 0; ++hops) {
    d = replicas_.next[static_cast<std::size_t>(d)];
  }
  return d;
}

void Network::charge(const Flow& f, double rate) {
  if (f.src < 0 || rate == 0.0) return;
  cpu_load_[static_cast<std::size_t>(f.src)] += rate * send_cpu_;
  cpu_load_[static_cast<std::size_t>(f.dst)] += rate * receive_cpu_;
  cpu_dirty_.push_back(f.src);
  cpu_dirty_.push_back(f.dst);
}

void Network::tell_cpu() {
  if (cpu_dirty_.empty()) return;
  std::sort(cpu_dirty_.begin(), cpu_dirty_.end());
  cpu_dirty_.erase(std::unique(cpu_dirty_.begin(), cpu_dirty_.end()), cpu_dirty_.end());
  const std::vector<int> dirty = std::move(cpu_dirty_);
  cpu_dirty_.clear();
  for (int d : dirty) cpu_changed_(d);
}

void Network::transfer_host(int device, bool to_host, double bytes, std::function<void()> done, int traffic) {
  if (bytes <= 0.0) {
    engine_.after(Time{}, std::move(done));
    return;
  }
  if (folded()) {
    const Folded& f = folded_flow(to_host ? FlowEnds{device, host_end, -1} : FlowEnds{host_end, device, -1}, false);
    start(f.links, f.weights, f.latency, bytes, std::move(done), traffic);
    return;
  }
  const topology::Route& route = router_.host_route(device, to_host);
  start(route.links, {}, route.latency, bytes, std::move(done), traffic);
}

void Network::transfer_on_link(int link, double latency, double bytes, std::function<void()> done, int traffic,
                               int owner, bool single) {
  if (folded()) {
    const Folded& f = folded_flow({owner, -1, link}, single);
    start(f.links, f.weights, latency, bytes, std::move(done), traffic);
    return;
  }
  start({&link_ids_[static_cast<std::size_t>(link)], 1}, {}, latency, bytes, std::move(done), traffic);
}

void Network::start(std::span<const int> route, std::span<const double> weights, double latency, double bytes,
                    std::function<void()> done, int traffic, int src, int dst) {
  for (std::size_t i = 0; i < route.size(); ++i) {
    const double b = weights.empty() ? bytes : bytes * weights[i];
    carried_[static_cast<std::size_t>(route[i])] += b;
    if (traffic >= 0) by_traffic_[static_cast<std::size_t>(traffic)][static_cast<std::size_t>(route[i])] += b;
  }
  // The flow enters the network after the path latency. `route` and `weights` live in
  // the router's or the folding's cache, so the flow refers to them without a copy.
  engine_.after(Time::seconds(latency), [this, bytes, route, weights, src, dst, done = std::move(done)]() mutable {
    const int id = weights.empty() ? solver_.add_flow(route) : solver_.add_flow(route, weights);
    if (static_cast<std::size_t>(id) >= flows_.size()) flows_.resize(static_cast<std::size_t>(id) + 1);
    Flow& f = flows_[static_cast<std::size_t>(id)];
    f.remaining = bytes;
    f.rate = 0.0;
    f.since = engine_.now();
    ++f.version;
    f.links = route;
    f.weights = weights;
    f.done = std::move(done);
    f.src = src;
    f.dst = dst;
    ++flows_started_;
    request_solve();
  });
}

// --- folding ---------------------------------------------------------------------------

void Network::fold(Replicas replicas) {
  if (flows_started_ > 0 || !folded_.empty()) throw std::logic_error("fold() after the network started");
  replicas_ = std::move(replicas);
  const auto links = static_cast<std::size_t>(cluster_.link_count());
  parent_.resize(links);
  std::iota(parent_.begin(), parent_.end(), 0);
  class_of_ = parent_;
  class_size_.assign(links, 1);
  sigma_.assign(links, -1);
  exact_ = true;
}

namespace {

// The link at device `d` in the same direction as `link` at its own device, towards a
// vertex of the same kind (a device's port on a switch).
int port_image(const topology::Cluster& cluster, int link, int d) {
  const auto& g = cluster.graph();
  const bool out = cluster.vertex(cluster.source(link)).kind == topology::VertexKind::gpu;
  const topology::VertexKind other = cluster.vertex(out ? cluster.target(link) : cluster.source(link)).kind;
  const topology::VertexId v = cluster.gpu(d);
  int found = -1;
  int count = 0;
  auto consider = [&](topology::EdgeId e, topology::VertexId far) {
    if (g[far].kind == other) {
      found = g[e].id;
      ++count;
    }
  };
  if (out) {
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) consider(*e, boost::target(*e, g));
  } else {
    for (auto [e, end] = boost::in_edges(v, g); e != end; ++e) consider(*e, boost::source(*e, g));
  }
  if (count != 1) throw NotFoldable("a device's port has no single counterpart in the other replicas");
  return found;
}

}  // namespace

std::vector<Network::Copy> Network::copies(const FlowEnds& e, int count) {
  std::vector<Copy> out;
  out.reserve(static_cast<std::size_t>(count));
  int a = e.src;
  int b = e.dst;
  int owner = e.src >= 0 ? e.src : e.dst;
  const auto& next = replicas_.next;
  for (int j = 0; j < count; ++j) {
    if (e.link >= 0) {
      // A port flow's latency is its caller's; only its link is copied.
      const int link = j == 0 ? e.link : port_image(cluster_, e.link, owner);
      out.push_back({{&link_ids_[static_cast<std::size_t>(link)], 1}, 0.0});
      owner = next[static_cast<std::size_t>(owner)];
    } else if (a == host_end || b == host_end) {
      // A copy between a device and its host: the device moves, its host with it.
      const int device = a == host_end ? b : a;
      const topology::Route& r = router_.host_route(device, b == host_end);
      out.push_back({r.links, r.latency});
      (a == host_end ? b : a) = next[static_cast<std::size_t>(device)];
    } else {
      const topology::Route& r = router_.route(a, b);
      out.push_back({r.links, r.latency});
      a = next[static_cast<std::size_t>(a)];
      b = next[static_cast<std::size_t>(b)];
    }
  }
  return out;
}

namespace {

std::uint64_t flow_key(const FlowEnds& e, bool single) {
  return (e.link >= 0 ? (std::uint64_t{1} << 63) | static_cast<std::uint64_t>(e.link)
                      : (static_cast<std::uint64_t>(e.src) << 32) | static_cast<std::uint32_t>(e.dst)) |
         (single ? std::uint64_t{1} << 62 : 0);
}

bool same_shape(const std::vector<Network::Copy>& cps) {
  for (const auto& c : cps) {
    if (c.links.size() != cps[0].links.size()) return false;
  }
  return true;
}

}  // namespace

int Network::find(int link) {
  auto l = static_cast<std::size_t>(link);
  while (parent_[l] != static_cast<int>(l)) {
    parent_[l] = parent_[static_cast<std::size_t>(parent_[l])];
    l = static_cast<std::size_t>(parent_[l]);
  }
  return static_cast<int>(l);
}

void Network::prepare_fold(std::span<const FlowEnds> flows) {
  if (!folded()) return;
  const int n = replicas_.count;
  // First the shift on links: copy j's k-th link maps to copy j+1's. A link mapped two
  // ways (ECMP picks different spines for different pairs) or reached two ways is
  // conflicted: it stays a class of its own.
  std::vector<std::vector<Copy>> all;
  all.reserve(flows.size());
  std::vector<int> sigma_inverse(sigma_.size(), -1);
  std::vector<char> conflicted(sigma_.size(), 0);
  for (const FlowEnds& e : flows) {
    all.push_back(copies(e, n));
    const auto& cps = all.back();
    if (!same_shape(cps)) {
      exact_ = false;  // copies of different shapes: their links are joined by no one
      continue;
    }
    for (const Copy& c : cps) exact_ = exact_ && c.latency == cps[0].latency;
    for (std::size_t k = 0; k < cps[0].links.size(); ++k) {
      for (int j = 0; j < n; ++j) {
        const int l = cps[static_cast<std::size_t>(j)].links[k];
        const int image = cps[static_cast<std::size_t>((j + 1) % n)].links[k];
        int& fwd = sigma_[static_cast<std::size_t>(l)];
        int& back = sigma_inverse[static_cast<std::size_t>(image)];
        if (fwd >= 0 && fwd != image) conflicted[static_cast<std::size_t>(l)] = conflicted[static_cast<std::size_t>(fwd)] = 1;
        if (back >= 0 && back != l) conflicted[static_cast<std::size_t>(image)] = conflicted[static_cast<std::size_t>(back)] = 1;
        if (fwd < 0) fwd = image;
        if (back < 0) back = l;
      }
    }
  }
  for (char c : conflicted) exact_ = exact_ && c == 0;
  // Then the classes: links at the same position of same-shaped copies, unless conflicted.
  for (const auto& cps : all) {
    if (!same_shape(cps)) continue;
    for (std::size_t k = 0; k < cps[0].links.size(); ++k) {
      const int first = cps[0].links[k];
      if (conflicted[static_cast<std::size_t>(first)]) continue;
      for (int j = 1; j < n; ++j) {
        const int l = cps[static_cast<std::size_t>(j)].links[k];
        if (conflicted[static_cast<std::size_t>(l)]) continue;
        const int ra = find(first);
        const int rb = find(l);
        if (ra != rb) parent_[static_cast<std::size_t>(std::max(ra, rb))] = std::min(ra, rb);
      }
    }
  }
  // Classes: representative = smallest link id; capacity = the members' mean bandwidth.
  std::map<int, std::pair<int, double>> members;  // representative -> (count, bandwidth sum)
  for (int l = 0; l < cluster_.link_count(); ++l) {
    const int r = find(l);
    class_of_[static_cast<std::size_t>(l)] = r;
    auto& [count, sum] = members[r];
    ++count;
    sum += cluster_.link(l).bandwidth;
  }
  for (const auto& [r, cs] : members) {
    class_size_[static_cast<std::size_t>(r)] = cs.first;
    const double mean = cs.second / cs.first;
    if (mean != cluster_.link(r).bandwidth) {
      exact_ = false;
      solver_.set_capacity(r, mean);
    }
  }
  // The prepared flows' classes and weights, from the copies routed above.
  for (std::size_t i = 0; i < flows.size(); ++i) folded_.emplace(flow_key(flows[i], false), weigh(all[i]));
}

Network::Folded Network::weigh(const std::vector<Copy>& cps) const {
  Folded f;
  std::map<int, double> weight;  // ordered: deterministic link order
  for (const Copy& c : cps) {
    f.latency = std::max(f.latency, c.latency);
    for (int l : c.links) {
      const int k = class_of_[static_cast<std::size_t>(l)];
      weight[k] += 1.0 / class_size_[static_cast<std::size_t>(k)];
    }
  }
  for (const auto& [k, w] : weight) {
    f.links.push_back(k);
    f.weights.push_back(w);
  }
  return f;
}

const Network::Folded& Network::folded_flow(const FlowEnds& e, bool single) {
  const std::uint64_t key = flow_key(e, single);
  auto it = folded_.find(key);
  if (it != folded_.end()) return it->second;
  return folded_.emplace(key, weigh(copies(e, single ? 1 : replicas_.count))).first->second;
}

void Network::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  // After every other event of this instant, so simultaneous starts share one solve.
  engine_.after(Time{}, [this] { solve(); });
}

void Network::record(const Flow& f) {
  if (rate_deltas_.empty() || f.rate <= 0.0 || engine_.now() == f.since) return;
  for (std::size_t i = 0; i < f.links.size(); ++i) {
    const double rate = f.weights.empty() ? f.rate : f.rate * f.weights[i];
    auto& d = rate_deltas_[static_cast<std::size_t>(f.links[i])];
    d.emplace_back(f.since.picoseconds(), rate);
    d.emplace_back(engine_.now().picoseconds(), -rate);
  }
}

std::vector<std::pair<std::int64_t, double>> Network::utilisation(int link) const {
  std::vector<std::pair<std::int64_t, double>> out;
  if (rate_deltas_.empty()) return out;
  auto deltas = rate_deltas_[cls(link)];
  std::stable_sort(deltas.begin(), deltas.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const double bandwidth = cluster_.link(link).bandwidth;
  double rate = 0.0;
  for (std::size_t i = 0; i < deltas.size();) {
    const std::int64_t t = deltas[i].first;
    for (; i < deltas.size() && deltas[i].first == t; ++i) rate += deltas[i].second;
    const double u = std::max(0.0, rate / bandwidth);
    const double shown = u < 1e-9 ? 0.0 : u;  // sums of +r and -r leave rounding dust
    if (out.empty() || out.back().second != shown) out.emplace_back(t, shown);
  }
  return out;
}

void Network::settle(Flow& f) {
  record(f);
  const double elapsed = (engine_.now() - f.since).to_seconds();
  f.remaining = std::max(0.0, f.remaining - f.rate * elapsed);
  f.since = engine_.now();
}

void Network::solve() {
  solve_pending_ = false;
  solver_.solve();
  for (int id : solver_.changed()) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    settle(f);
    const double before = f.rate;
    f.rate = solver_.rate(id);
    charge(f, f.rate - before);
    const std::uint64_t version = ++f.version;
    // Round the finishing time up to the next picosecond so no byte is left behind.
    const auto ps = static_cast<std::int64_t>(std::ceil(f.remaining / f.rate * 1e12));
    engine_.after(Time::ps(ps), [this, id, version] { finish(static_cast<std::size_t>(id), version); });
  }
  tell_cpu();
}

void Network::finish(std::size_t slot, std::uint64_t version) {
  Flow& f = flows_[slot];
  if (f.version != version) return;  // rescheduled since
  record(f);
  ++f.version;
  charge(f, -f.rate);
  f.rate = 0.0;
  f.src = f.dst = -1;
  auto done = std::move(f.done);
  f.done = nullptr;
  solver_.remove_flow(static_cast<int>(slot));
  request_solve();
  tell_cpu();
  done();
}

}  // namespace parasim::sim
