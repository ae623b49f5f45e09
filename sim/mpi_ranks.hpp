// What the simulator models of CPU ranks talking MPI (cluster.collectives: mpi) beyond
// their collectives' algorithms (collectives.hpp): Open MPI's point-to-point protocols. (The
// CPU time the network stack takes from a rank's compute: rank_compute.hpp.)
#pragma once

#include "program/program.hpp"
#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
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

}  // namespace parasim::sim
