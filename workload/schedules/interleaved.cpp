// Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's
// forward_backward_pipelining_with_interleaving). Each stage holds v model chunks; the
// k-th forward of a stage works on chunk (k / p) mod v of micro-batch (k / (p·v))·p + k mod p,
// the k-th backward on chunk v - 1 - (k / p) mod v of the same micro-batch. Warm-up is
// (p - s - 1)·2 + (v - 1)·p forwards (every forward when m = p), capped at m·v; then one
// forward / one backward; then the remaining backwards. Needs m to be a multiple of p.
#include <algorithm>
#include <stdexcept>

#include "workload/schedule.hpp"

namespace parasim::workload::schedules {

std::vector<PipelineStep> interleaved(const PipelineShape& shape, int stage) {
  const int p = shape.stages;
  const int m = shape.micro_batches;
  const int v = shape.virtual_stages;
  if (m % p != 0) throw std::invalid_argument("interleaved 1F1B needs micro-batches to be a multiple of pp");
  const int total = m * v;
  const int warmup = m == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  auto micro_batch = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forward = [&](int k) { return PipelineStep{PipelineStep::Kind::forward, micro_batch(k), (k / p) % v}; };
  auto backward = [&](int k) { return PipelineStep{PipelineStep::Kind::backward, micro_batch(k), v - 1 - (k / p) % v}; };

  std::vector<PipelineStep> steps;
  int next_f = 0;
  int next_b = 0;
  for (; next_f < warmup; ++next_f) steps.push_back(forward(next_f));
  while (next_f < total) {
    steps.push_back(forward(next_f++));
    steps.push_back(backward(next_b++));
  }
  while (next_b < total) steps.push_back(backward(next_b++));
  return steps;
}

}  // namespace parasim::workload::schedules
