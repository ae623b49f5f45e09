// Flow-level network on the cluster graph.
//
// A transfer of S bytes from device a to device b follows the route the topology gives
// (routing.hpp). It waits the route's latency, then flows at the rate that max-min fair
// sharing (lmm/maxmin.hpp) allots it among every flow active at that moment on the
// directed links it crosses, and completes when its bytes are through. Rates are
// re-solved once per instant in which flows start or end, over the components they touch;
// a flow whose rate changes has its progress settled and its completion rescheduled.
//
// So an uncontended transfer takes latency + S / bottleneck; two flows on one link each
// get half; a flow limited elsewhere leaves its share to the others. Per link, the bytes
// carried are recorded for utilisation reports.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "sim/lmm/maxmin.hpp"
#include "topology/routing.hpp"

namespace parasim::sim {

class Network {
 public:
  Network(Engine& engine, const topology::Cluster& cluster);

  // Moves `bytes` from device `src` to device `dst`; `done` runs when the last byte arrives.
  // `traffic` (0 tp, 1 pp, 2 dp, or -1) says whose bytes they are, for per-link accounting.
  void transfer(int src, int dst, double bytes, std::function<void()> done, int traffic = -1);
  // Moves `bytes` over the single directed link `link`, entering it after `latency` seconds
  // (collectives that model a switch's own work use it for the device's port).
  void transfer_on_link(int link, double latency, double bytes, std::function<void()> done, int traffic = -1);

  // From now on, remember every link's rate over time (for utilisation counters).
  void record_rates() { rate_deltas_.resize(carried_.size()); }
  // A link's utilisation (rate / bandwidth) as a step function over the recorded time.
  [[nodiscard]] std::vector<std::pair<std::int64_t, double>> utilisation(int link) const;

  [[nodiscard]] double bytes_carried(int link) const { return carried_[static_cast<std::size_t>(link)]; }
  [[nodiscard]] double bytes_carried(int link, int traffic) const {
    return by_traffic_[static_cast<std::size_t>(traffic)][static_cast<std::size_t>(link)];
  }
  [[nodiscard]] const topology::Cluster& cluster() const { return cluster_; }
  [[nodiscard]] Engine& engine() { return engine_; }
  [[nodiscard]] topology::Router& router() { return router_; }
  [[nodiscard]] std::uint64_t flows_started() const { return flows_started_; }
  [[nodiscard]] const lmm::MaxMinSolver& solver() const { return solver_; }

 private:
  struct Flow {
    double remaining = 0.0;
    double rate = 0.0;
    Time since;  // when `remaining` was last settled
    std::uint64_t version = 0;
    std::vector<int> links;
    std::function<void()> done;
  };

  void start(std::span<const int> links, double latency, double bytes, std::function<void()> done, int traffic);
  void finish(std::size_t slot, std::uint64_t version);
  void request_solve();
  void solve();
  void settle(Flow& f);
  void record(const Flow& f);

  Engine& engine_;
  const topology::Cluster& cluster_;
  topology::Router router_;
  lmm::MaxMinSolver solver_;
  std::vector<Flow> flows_;         // indexed by solver flow id
  std::vector<double> carried_;     // bytes per link
  std::array<std::vector<double>, 3> by_traffic_;  // bytes per link of tp, pp, dp traffic
  std::vector<std::vector<std::pair<std::int64_t, double>>> rate_deltas_;  // per link, when recording
  bool solve_pending_ = false;
  std::uint64_t flows_started_ = 0;
};

}  // namespace parasim::sim
