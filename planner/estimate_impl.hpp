// The analytical tier's view of the network (estimate.cpp): the devices of a plan's groups,
// and Estimator::Impl, which prices a group's collective with the links it shares, a
// pipeline boundary's transfer and a step of the cp ring, caching what it priced. Private
// to the estimator.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>

#include "program/program.hpp"
#include "sim/collectives.hpp"
#include "sim/compute_model.hpp"
#include "sim/engine.hpp"
#include "planner/estimate.hpp"
#include "sim/mpi_ranks.hpp"
#include "sim/network.hpp"
#include "sim/simulate.hpp"
#include "topology/routing.hpp"

namespace parasim::planner {

using program::CollectiveOp;
using scenario::Dim;

namespace estimate_detail {

// The devices of the group of dimension `d` that holds the rank at `c`; of a dp line (over
// dp x cp, the gradients' group), under hybrid sharding, its shard group or its replica
// group (program/program.hpp).
inline std::vector<int> group_of(const scenario::ParallelPlan& p, scenario::Coord c, scenario::Dim d,
                                 program::GroupPart part = program::GroupPart::whole) {
  std::vector<int> out;
  if (d != scenario::Dim::dp) {
    for (int i = 0; i < scenario::extent(p, d); ++i) {
      scenario::coordinate(c, d) = i;
      out.push_back(scenario::rank_of(p, c));
    }
    return out;
  }
  const int n = p.shard_size();
  const int at = scenario::grad_index(p, c);
  int first = 0, end = p.grad_ranks(), stride = 1;
  if (part == program::GroupPart::shard) {
    first = at / n * n;
    end = first + n;
  } else if (part == program::GroupPart::replica) {
    first = at % n;
    stride = n;
  } else if (part == program::GroupPart::expert) {  // ep consecutive grad indices
    first = at / p.ep * p.ep;
    end = first + p.ep;
  } else if (part == program::GroupPart::expert_data) {  // every ep-th
    first = at % p.ep;
    stride = p.ep;
  }
  for (int i = first; i < end; i += stride) out.push_back(scenario::rank_of(p, scenario::at_grad_index(p, c, i)));
  return out;
}

// Whether the rank at `c` is the first of its group (one visit per group).
inline bool first_of_group(const scenario::ParallelPlan& p, const scenario::Coord& c, scenario::Dim d,
                           program::GroupPart part) {
  if (d == scenario::Dim::dp) {
    const int at = scenario::grad_index(p, c);
    if (part == program::GroupPart::shard) return at % p.shard_size() == 0;
    if (part == program::GroupPart::replica) return at < p.shard_size();
    if (part == program::GroupPart::expert) return at % p.ep == 0;
    if (part == program::GroupPart::expert_data) return at < p.ep;
    return at == 0;
  }
  scenario::Coord copy = c;
  return scenario::coordinate(copy, d) == 0;
}

// A group part's share of the estimator's cache keys: the part and its group size.
inline int part_code(const scenario::ParallelPlan& p, program::GroupPart part) {
  const bool expert = part == program::GroupPart::expert || part == program::GroupPart::expert_data;
  return static_cast<int>(part) * 4096 + (part == program::GroupPart::whole ? 0 : expert ? p.ep : p.shard_size());
}

// The placement and the cp degree, for the caches' keys.
inline int placement_code(const scenario::ParallelPlan& p) {
  int code = 0;
  for (scenario::Dim d : p.placement) code = code * 4 + static_cast<int>(d);
  return code + 256 * p.cp;
}

}  // namespace estimate_detail

// A pass's cost from its GEMMs and traffic, or at kernel level: its kernels' device time
// and its collectives, or the host's time to issue them, whichever is longer (the simulator
// interleaves the two exactly). `slow`: every rank's pace, the slowest device's.
struct Costing {
  const sim::DeviceProfile& prof;
  topology::Dtype dtype;
  double slow = 1.0;
  [[nodiscard]] double op(const std::vector<workload::Gemm>& g, double passes, double bytes) const {
    return op_seconds(prof, g, passes, 0.0, bytes, false, dtype) * slow;
  }
  [[nodiscard]] double device(const std::vector<workload::Kernel>& ks) const {
    const std::vector<double> d = kernel_durations(prof, ks, dtype);
    return std::accumulate(d.begin(), d.end(), 0.0) * slow;
  }
  [[nodiscard]] double pass(const std::vector<workload::Kernel>& ks, program::Category c, double comm,
                            int calls) const {
    const double host = static_cast<double>(ks.size()) * dispatch_seconds(prof, c) + calls * prof.host.communication;
    return std::max(device(ks) + comm, host);
  }
  // With pipeline stages the host waits for each transfer (Megatron synchronises), so it
  // starts issuing a chunk's kernels only when the chunk starts: the first pass of a chunk
  // waits for the host from its first kernel on (the recurrence of compute_model.hpp); what
  // that costs beyond pass().
  [[nodiscard]] double cold_start(const std::vector<workload::Kernel>& ks, program::Category c, double comm,
                                  int calls) const {
    const double d = dispatch_seconds(prof, c);
    const double host = static_cast<double>(ks.size()) * d + calls * prof.host.communication;
    return std::max(kernels_seconds(prof, ks, dtype, d, d) * slow + comm, host) - pass(ks, c, comm, calls);
  }
};

// One transformer layer of a spec (the model's, or a mixture of experts' dense first
// layers): per micro-batch its forward, recompute and backward (tp waits included), and
// the exposed communication among them.
struct LayerCost {
  double f = 0.0, b = 0.0, r = 0.0, tp = 0.0, cp = 0.0, ep = 0.0, start_f = 0.0, start_b = 0.0;
  double sum = 0.0, gather = 0.0, overlap = 0.0;  // one tp sum and gather of s·b·h, the links' share
};

// A generic layer's forward and backward per micro-batch, and of them SyncBN's collectives.
struct GenericCost {
  double forward = 0.0, backward = 0.0, syncbn = 0.0;
};

struct Estimator::Impl {
  explicit Impl(const scenario::Scenario& s)
      : profile(sim::profile_of(s)),
        cluster(with_profile_links(s.cluster, profile)),
        net(engine, cluster),
        router(cluster) {}

  sim::DeviceProfile profile;
  topology::Cluster cluster;
  sim::Engine engine;
  sim::Network net;
  topology::Router router;
  std::map<std::tuple<int, int, int, int, int, int, int, int, double, double, int>, double> collectives;
  std::map<std::tuple<int, int, int, int, int, int, int>, double> contention;
  std::map<int, int> host_sharing;  // devices of a node in use -> most sharing one host link

  // How many ring edges of the concurrent groups of dimension d share the busiest link
  // of the group at stage `stage`, over the group's own edges on it. Concurrent: the
  // stage's groups, or with `all_stages` every stage's.
  double contention_of(const scenario::ParallelPlan& p, scenario::Dim d, int stage, bool all_stages,
                       program::GroupPart part = program::GroupPart::whole) {
    const auto key = std::make_tuple(p.tp, p.pp, p.dp, estimate_detail::placement_code(p), static_cast<int>(d),
                                     stage * 2 + (all_stages ? 1 : 0), estimate_detail::part_code(p, part));
    if (auto it = contention.find(key); it != contention.end()) return it->second;
    scenario::Coord c;
    c.pp = stage;
    const std::vector<int> own = estimate_detail::group_of(p, c, d, part);
    double factor = 1.0;
    const int node = cluster.node_of(own.front());
    const bool spans = std::any_of(own.begin(), own.end(), [&](int r) { return cluster.node_of(r) != node; });
    if (spans && own.size() > 1) {
      std::vector<int> all(static_cast<std::size_t>(cluster.link_count()), 0);
      std::vector<int> mine(all.size(), 0);
      for (int r = 0; r < p.world(); ++r) {
        const scenario::Coord rc = scenario::coord_of(p, r);
        if (!estimate_detail::first_of_group(p, rc, d, part)) continue;  // one visit per group
        if (!all_stages && rc.pp != stage) continue;
        const std::vector<int> g = estimate_detail::group_of(p, rc, d, part);
        const bool is_own = g == own;
        for (std::size_t i = 0; i < g.size(); ++i) {
          for (int l : router.route(g[i], g[(i + 1) % g.size()]).links) {
            ++all[static_cast<std::size_t>(l)];
            if (is_own) ++mine[static_cast<std::size_t>(l)];
          }
        }
      }
      for (std::size_t l = 0; l < all.size(); ++l) {
        if (mine[l] > 0) factor = std::max(factor, static_cast<double>(all[l]) / mine[l]);
      }
    }
    contention.emplace(key, factor);
    return factor;
  }

  // A collective of the group at `stage`, its transfer stretched by the groups that share
  // its links: the stage's, plus the other stages' in proportion to `overlap`, the share of
  // the time the other stages run such collectives too.
  // A generic (CNN) layer's cost (estimate_generic.cpp).
  GenericCost generic_layer_cost(const scenario::Scenario& s, const Costing& cost, const scenario::GenericLayer& layer);
  // A transformer layer of `lm` run as `lkp` says (estimate_layer.cpp); `act` is one of
  // this rank's s·b·h tensors in bytes.
  LayerCost transformer_layer_cost(const scenario::Scenario& s, const Costing& cost, const scenario::ModelSpec& lm,
                                   const workload::KernelPlan& lkp, double act);

  double collective(const scenario::Scenario& s, scenario::Dim d, program::CollectiveOp op, double bytes, int stage,
                    double overlap = 0.0, program::GroupPart part = program::GroupPart::whole) {
    const scenario::ParallelPlan& p = s.plan;
    if ((d == scenario::Dim::dp ? p.grad_ranks() : scenario::extent(p, d)) <= 1 || bytes <= 0.0) return 0.0;
    const auto key = std::make_tuple(p.tp, p.pp, p.dp, estimate_detail::placement_code(p), static_cast<int>(d), stage,
                                     static_cast<int>(op), static_cast<int>(p.collective), bytes, overlap,
                                     estimate_detail::part_code(p, part));
    if (auto it = collectives.find(key); it != collectives.end()) return it->second;
    scenario::Coord c;
    c.pp = stage;
    sim::CollectiveCall call{op, estimate_detail::group_of(p, c, d, part), bytes, -1};
    if (call.devices.size() <= 1) return 0.0;
    sim::Choice a;
    if (cluster.spec().library == topology::CollectiveLibrary::mpi) {
      a = choose(p.collective, net, call);  // libnbc's, its bytes scaled to the measured time
      scale_to_measured(profile, a.algorithm, net, call);
    } else {
      call.bytes *= measured_slowdown(profile, cluster, op, call.devices, call.bytes);
      a = choose(p.collective, net, call);
    }
    // Sharing stretches the transfer, not the latency.
    const double full = estimate_seconds(a, net, call);
    sim::CollectiveCall empty = call;
    empty.bytes = 0.0;
    const double latency = estimate_seconds(a, net, empty);
    const double own = contention_of(p, d, stage, false, part);
    const double all = overlap > 0.0 ? contention_of(p, d, stage, true, part) : own;
    const double t = latency + (full - latency) * (own + (all - own) * overlap);
    collectives.emplace(key, t);
    return t;
  }

  // One step of the cp ring: `bytes` from cp rank 0 to cp rank 1 (the tp 0, dp 0 ranks of
  // stage 0), stretched by the rings of every stage sending at once.
  double ring_step(const scenario::ParallelPlan& p, double bytes) {
    scenario::Coord a;
    scenario::Coord b;
    b.cp = 1;
    const topology::Route& r = router.route(scenario::rank_of(p, a), scenario::rank_of(p, b));
    return r.latency + (r.bottleneck > 0 ? bytes / r.bottleneck * contention_of(p, scenario::Dim::cp, 0, true) : 0.0);
  }

  // A copy of `bytes` between device 0 and its host memory (offloading), stretched by the
  // node's other ranks copying at once over the links they share (a PCIe switch's uplink).
  // The sharing depends only on how many of the node's devices the plan uses: worked out
  // once per count (the planner asks for every unit of every plan).
  double host_copy(const scenario::Scenario& s, double bytes) {
    const topology::Route& r = router.host_route(0, true);
    const int ranks = std::min(s.plan.world(), cluster.spec().gpus_per_node);
    auto [it, fresh] = host_sharing.try_emplace(ranks, 1);
    if (fresh) {
      for (int l : r.links) {
        int n = 0;
        for (int d = 0; d < ranks; ++d) {
          const auto& other = router.host_route(d, true).links;
          n += std::find(other.begin(), other.end(), l) != other.end() ? 1 : 0;
        }
        it->second = std::max(it->second, n);
      }
    }
    return r.latency + bytes / r.bottleneck * it->second;
  }

  // One boundary's transfer from stage `stage` to the next (the tp 0, dp 0 ranks).
  double transfer(const scenario::ParallelPlan& p, int stage, double bytes) {
    scenario::Coord a;
    a.pp = stage;
    scenario::Coord b = a;
    b.pp = (stage + 1) % p.pp;
    const topology::Route& r = router.route(scenario::rank_of(p, a), scenario::rank_of(p, b));
    return r.latency + (r.bottleneck > 0 ? bytes / r.bottleneck * contention_of(p, scenario::Dim::pp, 0, true) : 0.0);
  }
};

}  // namespace parasim::planner
