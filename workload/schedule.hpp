// Pipeline schedules: the order in which one pipeline stage runs the forward and backward
// passes of its micro-batches (and, interleaved, of its model chunks). A schedule fixes
// only the order on each stage; the waiting between stages, and so the bubble, comes from
// the dependencies when the order is executed (by the simulator or the executor):
//
//   forward  (mb, chunk c) on stage s  after forward  (mb, c) on s-1,
//                                      or on s = 0 after forward (mb, c-1) on the last stage
//   backward (mb, chunk c) on stage s  after backward (mb, c) on s+1,
//                                      or on the last stage after forward (mb, c) there and,
//                                      for c < v-1, backward (mb, c+1) on stage 0
//
// Schedules (one file each under schedules/, found by the scenario's name):
//   gpipe             all forwards, then all backwards (in reverse micro-batch order)
//   1f1b              Megatron: min(p - s - 1, m) warm-up forwards, then one forward / one
//                     backward, then the remaining backwards
//   interleaved-1f1b  Megatron with v chunks per stage: warm-up (p - s - 1)·2 + (v - 1)·p
//                     (all m·v when m = p), chunks cycled every p micro-batches
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::workload {

struct PipelineStep {
  enum class Kind { forward, backward };
  Kind kind = Kind::forward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk on this stage, 0 .. virtual_stages-1
  bool operator==(const PipelineStep&) const = default;
};

struct PipelineShape {
  int stages = 1;          // p
  int micro_batches = 1;   // m
  int virtual_stages = 1;  // v
};

// The ordered steps of `stage` (0 .. p-1).
std::vector<PipelineStep> stage_schedule(scenario::Schedule schedule, const PipelineShape& shape, int stage);

// Layers [first, last) of model chunk `chunk` on `stage`: Megatron gives chunk c of stage s
// the (c·p + s)-th of p·v equal slices of the layer list (the first slices take one more
// layer when they do not divide evenly, for generic models).
std::pair<int, int> chunk_layers(int layers, int pp, int virtual_stages, int stage, int chunk);

// Most (micro-batch, chunk) activations held at once by a stage running `steps`: forwards
// done minus backwards done, at its highest.
int peak_in_flight(const std::vector<PipelineStep>& steps);

// What `stage` holds after each step of its schedule, as (activations of (micro-batch,
// chunk) pairs held, of which the last chunk's), each distinct pair once in the order it
// first occurs: the points where a sum of the two at any non-negative weights first peaks.
// Memoised per thread (the memory model asks for every plan the planner scores).
const std::vector<std::pair<int, int>>& stage_holdings(scenario::Schedule schedule, const PipelineShape& shape,
                                                       int stage);

namespace schedules {
std::vector<PipelineStep> gpipe(const PipelineShape& shape, int stage);
std::vector<PipelineStep> one_f_one_b(const PipelineShape& shape, int stage);
std::vector<PipelineStep> interleaved(const PipelineShape& shape, int stage);
}  // namespace schedules

}  // namespace parasim::workload
