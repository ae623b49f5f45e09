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

// The compute of CPU ranks whose traffic between nodes takes their cores' time
// (Network::charge_cpu): each rank's compute op runs at 1 - the rank's network load (at
// least 10 %) of its speed; a change of the load settles the work done and reschedules the
// op's end. `complete` is told the op when its work is done.
class RankCompute {
 public:
  RankCompute(Engine& engine, const Network& net, int ranks, std::function<void(std::int64_t)> complete);
  // Op `op` of `rank` starts now with `seconds` of work at full speed.
  void start(int rank, std::int64_t op, double seconds);
  // The network's load on `rank` changed.
  void load_changed(int rank);

 private:
  struct Running {
    std::int64_t op = -1;
    double work = 0.0;       // seconds at full speed left at `since`
    std::int64_t since = 0;  // ps
    double speed = 1.0;
    std::uint64_t version = 0;
  };
  [[nodiscard]] double speed(int rank) const;
  void schedule(int rank);

  Engine& engine_;
  const Network& net_;
  std::vector<Running> running_;
  std::function<void(std::int64_t)> complete_;
};

}  // namespace parasim::sim
