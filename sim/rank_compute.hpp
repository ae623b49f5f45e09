// Compute whose speed changes while it runs (RankCompute), and what changes it on GPUs: the
// SMs a running collective holds (CollectiveHold). On CPU ranks, the network stack's time
// (Network::charge_cpu) changes it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/engine.hpp"

namespace parasim::sim {

// Compute whose speed changes while it runs: CPU ranks whose traffic between nodes takes
// their cores' time (Network::charge_cpu), GPUs whose SMs a running collective holds
// (KernelSpec::collective_sms). Each rank's compute op runs at `speed(rank)` of its nominal
// speed; a change of it (load_changed) settles the work done and reschedules the op's end.
// `complete` is told the op when its work is done.
class RankCompute {
 public:
  RankCompute(Engine& engine, int ranks, std::function<double(int)> speed, std::function<void(std::int64_t)> complete);
  // Op `op` of `rank` starts now with `seconds` of work at full speed.
  void start(int rank, std::int64_t op, double seconds);
  // What sets `rank`'s speed changed.
  void load_changed(int rank);

 private:
  struct Running {
    std::int64_t op = -1;
    double work = 0.0;       // seconds at full speed left at `since`
    std::int64_t since = 0;  // ps
    double speed = 1.0;
    std::uint64_t version = 0;
  };
  void schedule(int rank);

  Engine& engine_;
  std::vector<Running> running_;
  std::function<double(int)> speed_;
  std::function<void(std::int64_t)> complete_;
};

// The SMs NCCL's collectives hold (KernelSpec::collective_sms): each rank's collectives in
// flight; a rank with any computes at `share` of its speed (the SMs left to its compute).
class CollectiveHold {
 public:
  CollectiveHold(double share, int ranks) : share_(share), running_(static_cast<std::size_t>(ranks), 0) {}
  // A collective of `rank` started (+1) or ended (-1); true when whether the rank holds any
  // changed, and with it its speed.
  bool change(int rank, int delta) {
    int& running = running_[static_cast<std::size_t>(rank)];
    const bool was = running > 0;
    running += delta;
    return was != (running > 0);
  }
  [[nodiscard]] double speed(int rank) const { return running_[static_cast<std::size_t>(rank)] > 0 ? share_ : 1.0; }

 private:
  double share_;
  std::vector<int> running_;
};

}  // namespace parasim::sim
