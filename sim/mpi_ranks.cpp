#include "sim/mpi_ranks.hpp"

namespace parasim::sim {

bool rendezvous(const topology::Cluster& c, const program::Op& o) {
  if (c.spec().library != topology::CollectiveLibrary::mpi) return false;
  return mpi_rendezvous(o.bytes, c.node_of(o.rank) != c.node_of(o.peer));
}

void scale_to_measured(const DeviceProfile& p, Algorithm a, Network& net, CollectiveCall& call) {
  const double busbw = measured_busbw(p, net.cluster(), call.op, call.devices, call.bytes);
  if (busbw > 0.0) call.bytes *= bus_factor(call) * call.bytes / busbw / transfer_seconds(a, net, call);
}

}  // namespace parasim::sim
