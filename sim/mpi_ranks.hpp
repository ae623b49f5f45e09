// What the simulator models of CPU ranks talking MPI (cluster.collectives: mpi) beyond
// their collectives' algorithms (collectives.hpp): Open MPI's point-to-point protocols, and
// the CPU time the network stack takes from a rank's compute.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "program/program.hpp"
#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
#include "sim/engine.hpp"
#include "sim/network.hpp"
#include "topology/cluster.hpp"

namespace parasim::sim {

// Whether a send waits for its receive to be posted before any of its data moves. Open MPI
// 4.1's ob1 sends a message whose data and 16-byte match header fit the transport's eager
// limit at once and returns; a larger one is a rendezvous: the receiver matches it, then
// pulls it (shared memory's single copy, btl_vader_eager_limit 4 KiB) or has it put (TCP,
// btl_tcp_eager_limit 64 KiB). NCCL's sends go into the receiver's preallocated buffers,
// as the simulator's flows do: never.
bool rendezvous(const topology::Cluster& c, const program::Op& o);

// A collective run by `a` (libnbc's) under a measured profile: its bytes scaled so that,
// uncontended, its flows take the time the profile's curve measured (bus bytes over the
// measured busbw); unchanged where no curve applies.
void scale_to_measured(const DeviceProfile& p, Algorithm a, Network& net, CollectiveCall& call);

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

}  // namespace parasim::sim
