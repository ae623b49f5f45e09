// 1F1B (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's non-interleaved schedule).
// Stage s runs w = min(p - s - 1, m) warm-up forwards, then alternates one forward and one
// backward until the forwards run out, then drains the remaining backwards. A stage holds
// at most w + 1 <= p micro-batches of activations.
#include <algorithm>

#include "workload/schedule.hpp"

namespace parasim::workload::schedules {

std::vector<PipelineStep> one_f_one_b(const PipelineShape& shape, int stage) {
  const int m = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  std::vector<PipelineStep> steps;
  int next_f = 0;
  int next_b = 0;
  for (; next_f < warmup; ++next_f) steps.push_back({PipelineStep::Kind::forward, next_f, 0});
  while (next_f < m) {
    steps.push_back({PipelineStep::Kind::forward, next_f++, 0});
    steps.push_back({PipelineStep::Kind::backward, next_b++, 0});
  }
  while (next_b < m) steps.push_back({PipelineStep::Kind::backward, next_b++, 0});
  return steps;
}

}  // namespace parasim::workload::schedules
