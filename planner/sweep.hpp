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

#include <functional>
#include <string>
#include <vector>

namespace parasim::planner {

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

struct SweepOptions {
  bool per_replica_batch = true;
  bool grow_nodes = true;
  // Told after each point (points done, points in all); may be empty.
  std::function<void(std::size_t, std::size_t)> progress;
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
  // The whole run, where the scenario gives its length (training.tokens / training.steps):
  // the expected time to train, its goodput and interruptions, energy (0: the device's
  // power unknown) and device-hours (report/run_model.hpp).
  bool has_run = false;
  double time_to_train = 0.0;
  double goodput = 0.0;
  double interruptions = 0.0;
  double energy = 0.0;  // joules
  double device_hours = 0.0;
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

// The sweep as an SVG plot (planner/sweep_plot.cpp): tokens/s of each point predicted against
// the first axis's values, one line per series (each combination of the other axes' values,
// named in the legend). The x axis is logarithmic when its values are numbers spanning 8 x
// or more, linear for other numbers, and the values side by side in the grid's order when
// they are not numbers. Where the grid changes the GPU count, each series has its ideal
// line (dashed) and its points their efficiency; on a logarithmic x axis tokens/s is
// logarithmic too, so that the ideal line, proportional to the GPUs, is straight.
std::string sweep_svg(const std::vector<SweepPoint>& points, const std::vector<SweepAxis>& axes,
                      const std::string& title);

}  // namespace parasim::planner
