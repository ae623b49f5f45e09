// A grid of overrides, each point predicted: `parasim sweep` and the dashboard's scaling
// chart. Each axis is a key and its values (--vary plan.dp=1,2,4,8); the grid is every
// combination, the first axis varying slowest. For throughput against GPU count:
//   * the cluster grows by whole nodes to hold each point's plan (unless a point sets
//     cluster.nodes itself), so dp = 64 needs no matching --vary of the nodes;
//   * with per_replica_batch (the default) the global batch follows dp, keeping each
//     replica's batch (weak scaling) unless a point sets training.global_batch.
// A point that cannot be loaded or simulated keeps the loader's message and no figures.
// The ideal line scales the smallest successful point's throughput linearly by GPU count;
// efficiency is a point's throughput over it.
#pragma once

#include <string>
#include <vector>

namespace parasim::sim {

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

struct SweepOptions {
  bool per_replica_batch = true;
  bool grow_nodes = true;
};

struct SweepPoint {
  std::vector<std::string> values;      // one per axis
  std::vector<std::string> overrides;  // everything set for this point, as --set would
  int gpus = 0;
  double step_time = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;
  bool fits = true;
  std::string bottleneck;
  std::string error;  // set when the point has no figures
  // Where the grid changes the GPU count: linear throughput from the smallest point's per
  // GPU, and this point's share of it (else scaling is false and both 0).
  bool scaling = false;
  double ideal = 0.0;
  double efficiency = 0.0;
};

// "plan.dp=1,2,4,8" -> {plan.dp, {1, 2, 4, 8}}; values that hold commas are separated by
// semicolons ("plan.placement=tp,dp,pp;dp,tp,pp"). Throws std::invalid_argument on a
// malformed axis (no '=', no key, an empty value).
SweepAxis parse_axis(const std::string& text);

std::vector<SweepPoint> sweep(const std::string& path, const std::vector<std::string>& overrides,
                              const std::vector<SweepAxis>& axes, const SweepOptions& options = {});

// The scaling plot as SVG: tokens/s of each successful point against GPUs (log 2 axis),
// the ideal line dashed, efficiency labelled at each point.
std::string scaling_svg(const std::vector<SweepPoint>& points, const std::string& title);

}  // namespace parasim::sim
