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
//
// Folded replicas. With fold(), the network carries the flows of one data-parallel replica
// (replica 0) and each flow stands for its n copies, one per replica: the copy in replica
// j runs between the images of its ends under the shift σ^j that maps a device to the
// same position of the next replica. Links are grouped into classes: prepare_fold() takes
// every flow the simulation will start, routes all of its copies, and joins the links that
// the copies cross at the same position of routes of the same length. A class is solved as
// one link whose load is its members' mean load: a flow's weight on a class K is
//   w(f, K) = (number of crossings of K's links by f's n copies) / |K|
// and bytes and rates are recorded on the class, so every member reports the mean. The
// copies of a flow share its rate; its latency is the longest of theirs. A flow started
// as `single` stands for itself only (a collective across the replicas whose flows differ
// from replica to replica, such as the tree, runs all of its flows): its weight on a class
// is its own crossings of the class over |K|.
//
// When the shift maps every used route onto the route of the shifted ends link by link
// (a permutation of the links with equal bandwidths), the classes are its orbits, every
// link of a class carries the same load in the full simulation, and the folded one gives
// the same rates (exact()). Otherwise it is a mean-field approximation: load is spread
// evenly over equivalent links (ECMP spines of a fat-tree, rails of different blocks).
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "report/trace.hpp"
#include "sim/engine.hpp"
#include "sim/lmm/maxmin.hpp"
#include "topology/routing.hpp"

namespace parasim::sim {

// Open MPI 4.1 over TCP (ob1, btl/tcp): a message whose data and match header fit the
// eager limit goes at once; a larger one is a rendezvous. Its control messages (the
// receiver's acknowledgement) carry about a header's bytes.
inline constexpr double tcp_eager_limit = 65536.0;
inline constexpr double shared_memory_eager_limit = 4096.0;
inline constexpr double mpi_match_header = 16.0;
inline constexpr double mpi_control_bytes = 64.0;
// Whether a message of `bytes` is a rendezvous: between nodes over TCP, else through
// shared memory.
inline bool mpi_rendezvous(double bytes, bool between_nodes) {
  return bytes + mpi_match_header > (between_nodes ? tcp_eager_limit : shared_memory_eager_limit);
}

// Thrown when a scenario cannot be simulated folded (the caller simulates every rank).
struct NotFoldable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The replicas a folded network stands for.
struct Replicas {
  int count = 1;                   // n
  std::vector<int> next;           // device -> the device at its position in the next replica (σ)
  std::vector<char> represented;   // device -> is in replica 0
};

// A flow's ends as prepare_fold() needs them: devices src -> dst, or for a flow on one
// link (`link` >= 0) the device whose port it is (`src`, else `dst`).
// A flow end that is a device's own host memory (offload copies: FlowEnds{d, host_end} out,
// {host_end, d} in).
inline constexpr int host_end = -2;

struct FlowEnds {
  int src = -1;
  int dst = -1;
  int link = -1;
  friend bool operator==(const FlowEnds&, const FlowEnds&) = default;
};

class Network {
 public:
  // One copy of a folded flow: the links it crosses and its route's latency.
  struct Copy {
    std::span<const int> links;
    double latency = 0.0;
  };

  Network(Engine& engine, const topology::Cluster& cluster);

  // Moves `bytes` from device `src` to device `dst`; `done` runs when the last byte arrives.
  // `traffic` (0 tp, 1 pp, 2 dp, 3 cp, 4 ep, 5 offload, 6 syncbn, or -1) says whose bytes they are, for per-link accounting.
  void transfer(int src, int dst, double bytes, std::function<void()> done, int traffic = -1, bool single = false);
  // Moves `bytes` between device `device` and its node's host memory (to_host: out), on
  // the device's PCIe path (Router::host_route).
  void transfer_host(int device, bool to_host, double bytes, std::function<void()> done, int traffic = -1);
  // Moves `bytes` over the single directed link `link`, entering it after `latency` seconds
  // (collectives that model a switch's own work use it for the device's port).
  // `owner` is the device whose port the link is (needed only when folded).
  void transfer_on_link(int link, double latency, double bytes, std::function<void()> done, int traffic = -1,
                        int owner = -1, bool single = false);

  // Folding (see above): call fold(), then prepare_fold() with every flow's ends, before
  // any transfer. Throws NotFoldable when a flow's copies cannot be formed.
  void fold(Replicas replicas);
  void prepare_fold(std::span<const FlowEnds> flows);
  [[nodiscard]] bool folded() const { return replicas_.count > 1; }
  [[nodiscard]] int replica_count() const { return replicas_.count; }
  [[nodiscard]] bool exact() const { return exact_; }
  // Says that some flows will run `single`: the folding is then approximate.
  void mark_approximate() { exact_ = false; }
  // Whether device d's flows are simulated (always, unless folded: replica 0's).
  [[nodiscard]] bool represented(int d) const {
    return !folded() || replicas_.represented[static_cast<std::size_t>(d)] != 0;
  }

  // CPU ranks: the CPU their traffic between nodes takes (DeviceProfile's send and receive
  // seconds per byte). A device's load is the share of its core its flows between nodes
  // take (rate x cost, sending and receiving); after rates change, `changed` is told each
  // device whose load did. Call before any transfer.
  void charge_cpu(double send_per_byte, double receive_per_byte, std::function<void(int)> changed);
  [[nodiscard]] double cpu_load(int device) const {
    return cpu_load_.empty() ? 0.0 : cpu_load_[static_cast<std::size_t>(device)];
  }
  // MPI's connections (Open MPI's TCP transport: one connection per pair of ranks, which
  // sends their messages in the order posted): from now on a transfer between two devices
  // of different nodes moves only once the earlier ones from the same device to the same
  // device have arrived; one above the eager limit (a rendezvous) waits first for the
  // receiver's acknowledgement, a message on the reverse connection, in order there.
  void order_between_nodes() { ordered_ = true; }
  // From now on, remember every link's rate over time (for utilisation counters).
  void record_rates() { rate_deltas_.resize(carried_.size()); }
  // A link's utilisation (rate / bandwidth) as a step function over the recorded time.
  [[nodiscard]] std::vector<std::pair<std::int64_t, double>> utilisation(int link) const;

  [[nodiscard]] double bytes_carried(int link) const { return carried_[cls(link)]; }
  [[nodiscard]] double bytes_carried(int link, int traffic) const {
    return by_traffic_[static_cast<std::size_t>(traffic)][cls(link)];
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
    std::span<const int> links;       // in the router's or the folding's cache
    std::span<const double> weights;  // folded: per link (class)
    std::function<void()> done;
    int src = -1, dst = -1;  // with charge_cpu, between nodes: the devices whose cores it loads
  };
  // A folded flow's classes and weights.
  struct Folded {
    std::vector<int> links;
    std::vector<double> weights;
    double latency = 0.0;
  };

  void start(std::span<const int> links, std::span<const double> weights, double latency, double bytes,
             std::function<void()> done, int traffic, int src = -1, int dst = -1);
  // The device whose core pays for device d's share (folded: the device in replica 0 at the
  // same position), and a flow's load moving by `rate` bytes/s.
  [[nodiscard]] int in_replica0(int d) const;
  void charge(const Flow& f, double rate);
  void tell_cpu();
  // A transfer on the connection src -> dst, in order (order_between_nodes).
  void connection(int src, int dst, double bytes, std::function<void()> done, int traffic, bool single);
  // Starts a transfer between two devices (the route or the folded flow), as transfer().
  void start_pair(int src, int dst, double bytes, std::function<void()> done, int traffic, bool single);
  // A transfer waiting for the earlier ones on its connection (order_between_nodes).
  struct Queued {
    double bytes = 0.0;
    std::function<void()> done;
    int traffic = -1;
    bool single = false;
  };
  // Starts `q` on the idle connection `key`; when it arrives, the next waiting there.
  void send_on(std::pair<int, int> key, Queued q);
  // The links each copy of a flow crosses, replica by replica, and its route's latency.
  std::vector<Copy> copies(const FlowEnds& e, int count);
  [[nodiscard]] Folded weigh(const std::vector<Copy>& copies) const;
  const Folded& folded_flow(const FlowEnds& e, bool single);
  int find(int link);
  [[nodiscard]] std::size_t cls(int link) const {
    return static_cast<std::size_t>(class_of_.empty() ? link : class_of_[static_cast<std::size_t>(link)]);
  }
  void finish(std::size_t slot, std::uint64_t version);
  void request_solve();
  void solve();
  void settle(Flow& f);
  void record(const Flow& f);

  Engine& engine_;
  const topology::Cluster& cluster_;
  std::vector<int> link_ids_;  // 0..links-1: one-link routes point into it
  topology::Router router_;
  lmm::MaxMinSolver solver_;
  std::vector<Flow> flows_;         // indexed by solver flow id
  std::vector<double> carried_;     // bytes per link
  std::array<std::vector<double>, report::traffic_kinds> by_traffic_;  // bytes per link of each kind of traffic
  std::vector<std::vector<std::pair<std::int64_t, double>>> rate_deltas_;  // per link, when recording
  bool solve_pending_ = false;
  double send_cpu_ = 0.0, receive_cpu_ = 0.0;  // seconds per byte (charge_cpu)
  std::vector<double> cpu_load_;               // per device
  std::vector<int> cpu_dirty_;                 // devices whose load changed, to tell
  std::function<void(int)> cpu_changed_;
  bool ordered_ = false;
  // Per connection (source, destination) with a transfer under way: those waiting behind it.
  std::map<std::pair<int, int>, std::deque<Queued>> connections_;
  std::uint64_t flows_started_ = 0;
  // Folding.
  Replicas replicas_;
  bool exact_ = true;
  std::vector<int> parent_;                     // union-find over links, while preparing
  std::vector<int> class_of_;                   // link -> its class's representative link
  std::vector<int> class_size_;                 // by representative
  std::vector<int> sigma_;                      // link -> its image under the shift, -1 unknown
  std::unordered_map<std::uint64_t, Folded> folded_;  // by flow ends
};

}  // namespace parasim::sim
