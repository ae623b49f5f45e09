// Compute whose speed changes while it runs (RankCompute), and what changes it on GPUs: the
// SMs a running collective holds (CollectiveHold). On CPU ranks, the network stack's time
// (Network::charge_cpu) changes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "program/program.hpp"
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

// The SMs a rank's running collectives hold: NCCL's kernels one block per channel
// (KernelSpec::collective_sms), Transformer Engine's userbuffers reduce-scatter its own
// count (userbuffer_sms). Kernels of collectives on several streams are resident side by
// side, so their SMs add up; a rank's compute runs on the SMs left.
class CollectiveHold {
 public:
  CollectiveHold(int sms, int ranks) : sms_(sms), held_(static_cast<std::size_t>(ranks), 0) {}
  // A collective of `rank` holding `sms` SMs started (+1) or ended (-1); true when the
  // rank's speed changed.
  bool change(int rank, int sms, int delta) {
    int& held = held_[static_cast<std::size_t>(rank)];
    const int was = std::min(held, sms_);
    held += delta * sms;
    return was != std::min(held, sms_);
  }
  // The share of the SMs left to compute (none held: 1).
  [[nodiscard]] double speed(int rank) const {
    const int held = std::min(held_[static_cast<std::size_t>(rank)], sms_);
    return 1.0 - static_cast<double>(held) / sms_;
  }

 private:
  int sms_;
  std::vector<int> held_;
};

// The SMs collective op `o` holds while it runs: under tp communication overlap a row GEMM's
// blocks are reduce-scattered by Transformer Engine's userbuffers kernel, which takes TE's
// default 16 SMs for a pipelined or bulk overlap (initialize_ub's get_default_config,
// "num_sm": 1 for a ring exchange, whose copies run on the copy engines, "use_ce": True,
// and 16 otherwise; transformer_engine/pytorch/module/base.py, TE 1.x and 2.x); every other
// collective is NCCL's, one block per channel (`nccl_sms`, KernelSpec::collective_sms).
int held_sms(const program::Op& o, int nccl_sms);

}  // namespace parasim::sim
