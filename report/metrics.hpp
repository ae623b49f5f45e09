// Figures of one training step, from a Trace (predicted or measured alike).
//
// Per rank, busy time is the length of the union of its spans of a kind:
//   compute   forward, backward, recompute, optimizer spans
//   tp/pp/dp/cp  communication spans of that dimension
//   exposed   the part of a dimension's communication not overlapped by compute
//   bubble    time the rank neither computes nor communicates on tp, dp or cp: it waits for
//             the pipeline (pp transfers in flight count as waiting)
// A folded trace (trace.hpp) gives each mirrored rank the figures of the rank it mirrors.
// Throughput: samples/s = global batch / step; tokens/s = samples/s x sequence length.
// Model FLOP/s per device counts the training FLOPs without recompute (Narayanan et al.)
// over the step and the devices; MFU divides it by the device's peak for the precision.
// Bottleneck: the largest loss among the bubble and each dimension's exposed communication
// when it costs at least 5 % of the step (else "compute-bound"), with the link that
// dimension's own traffic loads most.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "scenario/scenario.hpp"
#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::report {

// offload: the copies between devices and host memory (plan.offload_optimizer), reported
// as a dimension's communication is: busy time and the part compute does not hide.
// syncbn: SyncBatchNorm's statistics exchange over the dp group (Category::bn_comm), apart
// from dp's gradient synchronisation.
enum class Dimension { tp = 0, pp = 1, dp = 2, cp = 3, ep = 4, offload = 5, syncbn = 6 };
inline constexpr std::size_t dimension_count = traffic_kinds;
inline constexpr std::array<const char*, dimension_count> dimension_names{"tp", "pp", "dp", "cp", "ep", "offload",
                                                                          "syncbn"};
// Whether a report shows dimension `d` for the scenario: tp, pp and dp always, cp, ep,
// offload and syncbn only where the plan has them (so that other plans' reports keep
// their shape).
inline bool dimension_shown(const scenario::Scenario& s, std::size_t d) {
  const scenario::ParallelPlan& p = s.plan;
  return d < 3 || (d == 3 && p.cp > 1) || (d == 4 && p.ep > 1) || (d == 5 && p.offloads()) ||
         (d == 6 && s.syncs_batch_norm());
}

struct RankFigures {
  int rank = 0;
  double compute = 0.0;
  std::array<double, dimension_count> comm{};     // busy seconds per dimension
  std::array<double, dimension_count> exposed{};  // not hidden by compute
  double bubble = 0.0;               // fraction of the step
};

struct LinkFigure {
  int link = -1;
  std::string name;
  std::string cls;  // intra-node / inter-node
  double bytes = 0.0;
  double utilisation = 0.0;  // bytes / (bandwidth x step)
};

// What limits the step, as the bottleneck sentence says it: `kind` is compute, latency
// (busy devices under 10 % MFU: small kernels), bubble,
// idle (devices waiting for the host to issue kernels), tp, pp, dp, cp, ep, offload,
// host_optimizer, straggler (a degraded device the others wait for) or jitter (ranks
// waiting for the slowest of each synchronised op, cluster.jitter); `fraction` the share of the step it takes (for compute, the share the
// devices compute); for a communication kind, the link its traffic loads most.
struct Bottleneck {
  std::string kind = "compute";
  double fraction = 0.0;
  LinkFigure link;  // link -1: none
};

struct StepFigures {
  double step_time = 0.0;
  double samples_per_s = 0.0;
  double tokens_per_s = 0.0;
  double model_flops = 0.0;  // per step, all devices
  double flops_per_device = 0.0;
  double mfu = 0.0;
  double bubble_fraction = 0.0;          // mean over ranks
  std::array<double, dimension_count> comm_mean{};     // seconds per rank, mean
  std::array<double, dimension_count> exposed_mean{};
  std::vector<RankFigures> ranks;
  std::vector<LinkFigure> busiest_links;  // by utilisation, top 8
  std::string bottleneck;
  Bottleneck limit;  // the same, structured
  // The rank that computes longest, and the median rank's compute (seconds): on a cluster
  // with degraded devices (cluster.degraded) the others wait for it.
  int slowest_rank = -1;
  double slowest_compute = 0.0;
  double median_compute = 0.0;
};

// The Dimension (as an int) of a communication category, -1 for compute categories.
int dimension_of(program::Category c);
double model_flops_per_step(const scenario::Scenario& s);
StepFigures step_figures(const scenario::Scenario& s, const Trace& trace, const topology::Cluster& cluster);

// Length of the union of [start, end) intervals (picoseconds), and of the part of `a` not
// covered by `b`.
std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>> v);
std::int64_t uncovered_length(std::vector<std::pair<std::int64_t, std::int64_t>> a,
                              std::vector<std::pair<std::int64_t, std::int64_t>> b);

}  // namespace parasim::report
