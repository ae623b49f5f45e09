// Data-parallel gradient buckets (Megatron's DDP): the parameters a rank of a pipeline
// stage holds, in the order their gradients complete in the backward, grouped into buckets
// of plan.bucket_size. The Program (compile), the estimate and the executor's shard all
// follow this one layout; each bucket is one reduce-scatter (or all-reduce) and, with the
// distributed optimizer, one all-gather of the updated parameters.
#pragma once

#include <cstddef>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::workload {

// Parameters whose gradient completes at once: the LM head with the final norm (layer =
// the layer count), one layer, or the embedding with the learned positions (layer -1).
struct GradientSource {
  double params = 0.0;  // on this rank: 1/tp of a split weight
  int layer = 0;
  // Of params, under expert parallelism: the local experts', whose gradients are summed
  // over the expert data-parallel group rather than dp x cp.
  double experts = 0.0;
};

// The sources of a rank of pipeline stage `stage`, LM head first, embedding last. `head`
// and `embedding`: whether the rank computes them (it holds the last or the first chunk).
std::vector<GradientSource> gradient_sources(const scenario::Scenario& s, int stage, bool head, bool embedding);

// Under expert parallelism: takes the experts' parameters out of `sources` (left with the
// dense ones, each keeping its `experts` figure) and returns them as sources of their own,
// in the same order. Empty without expert parallelism.
std::vector<GradientSource> split_experts(std::vector<GradientSource>& sources);

// The parameters whose optimizer state (and fp32 master copy) a rank keeps of the `params`
// it holds: all of them, or under ZeRO its share, the `experts` among them (expert
// parallelism's) over the ranks holding the same experts, the rest over ZeRO's group.
double optimizer_shard_params(const scenario::ParallelPlan& p, double params, double experts);

struct GradientBucket {
  double params = 0.0;
  int lowest = 0;          // the lowest layer of its sources (-1: the embedding)
  int above = 0;           // one past the highest
  std::size_t first = 0;   // its sources: [first, end)
  std::size_t end = 0;
};

// Consecutive sources, a bucket closing once it holds `bucket_bytes` at `bytes_per_param`;
// the last takes what is left.
std::vector<GradientBucket> gradient_buckets(const std::vector<GradientSource>& sources, double bytes_per_param,
                                             double bucket_bytes);

}  // namespace parasim::workload
