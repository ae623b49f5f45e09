#include "sim/network.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace parasim::sim {

Network::Network(Engine& engine, const topology::Cluster& cluster)
    : engine_(engine), cluster_(cluster), router_(cluster), carried_(static_cast<std::size_t>(cluster.link_count()), 0.0) {
  for (auto& v : by_traffic_) v.assign(carried_.size(), 0.0);
  for (int l = 0; l < cluster.link_count(); ++l) solver_.add_link(cluster.link(l).bandwidth);
}

void Network::transfer(int src, int dst, double bytes, std::function<void()> done, int traffic) {
  if (src == dst || bytes <= 0.0) {
    engine_.after(Time{}, std::move(done));
    return;
  }
  const topology::Route& route = router_.route(src, dst);
  start(route.links, route.latency, bytes, std::move(done), traffic);
}

void Network::transfer_on_link(int link, double latency, double bytes, std::function<void()> done, int traffic) {
  const std::array<int, 1> links{link};
  start(links, latency, bytes, std::move(done), traffic);
}

void Network::start(std::span<const int> route, double latency, double bytes, std::function<void()> done,
                    int traffic) {
  for (int l : route) carried_[static_cast<std::size_t>(l)] += bytes;
  if (traffic >= 0) {
    for (int l : route) by_traffic_[static_cast<std::size_t>(traffic)][static_cast<std::size_t>(l)] += bytes;
  }
  // The flow enters the network after the path latency.
  std::vector<int> links(route.begin(), route.end());
  engine_.after(Time::seconds(latency), [this, bytes, links = std::move(links), done = std::move(done)]() mutable {
    const int id = solver_.add_flow(links);
    if (static_cast<std::size_t>(id) >= flows_.size()) flows_.resize(static_cast<std::size_t>(id) + 1);
    Flow& f = flows_[static_cast<std::size_t>(id)];
    f.remaining = bytes;
    f.rate = 0.0;
    f.since = engine_.now();
    ++f.version;
    f.links = std::move(links);
    f.done = std::move(done);
    ++flows_started_;
    request_solve();
  });
}

void Network::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  // After every other event of this instant, so simultaneous starts share one solve.
  engine_.after(Time{}, [this] { solve(); });
}

void Network::record(const Flow& f) {
  if (rate_deltas_.empty() || f.rate <= 0.0 || engine_.now() == f.since) return;
  for (int l : f.links) {
    auto& d = rate_deltas_[static_cast<std::size_t>(l)];
    d.emplace_back(f.since.picoseconds(), f.rate);
    d.emplace_back(engine_.now().picoseconds(), -f.rate);
  }
}

std::vector<std::pair<std::int64_t, double>> Network::utilisation(int link) const {
  std::vector<std::pair<std::int64_t, double>> out;
  if (rate_deltas_.empty()) return out;
  auto deltas = rate_deltas_[static_cast<std::size_t>(link)];
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
    f.rate = solver_.rate(id);
    const std::uint64_t version = ++f.version;
    // Round the finishing time up to the next picosecond so no byte is left behind.
    const auto ps = static_cast<std::int64_t>(std::ceil(f.remaining / f.rate * 1e12));
    engine_.after(Time::ps(ps), [this, id, version] { finish(static_cast<std::size_t>(id), version); });
  }
}

void Network::finish(std::size_t slot, std::uint64_t version) {
  Flow& f = flows_[slot];
  if (f.version != version) return;  // rescheduled since
  record(f);
  ++f.version;
  auto done = std::move(f.done);
  f.done = nullptr;
  solver_.remove_flow(static_cast<int>(slot));
  request_solve();
  done();
}

}  // namespace parasim::sim
