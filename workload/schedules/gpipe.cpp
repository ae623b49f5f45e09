// GPipe (Huang et al. 2019): every micro-batch forward, then every backward. The last
// micro-batch's gradient is the first to come back, so backwards run in reverse order.
// A stage holds all m micro-batches' activations at its peak.
#include "workload/schedule.hpp"

namespace parasim::workload::schedules {

std::vector<PipelineStep> gpipe(const PipelineShape& shape, int /*stage*/) {
  std::vector<PipelineStep> steps;
  for (int mb = 0; mb < shape.micro_batches; ++mb) steps.push_back({PipelineStep::Kind::forward, mb, 0});
  for (int mb = shape.micro_batches - 1; mb >= 0; --mb) steps.push_back({PipelineStep::Kind::backward, mb, 0});
  return steps;
}

}  // namespace parasim::workload::schedules
