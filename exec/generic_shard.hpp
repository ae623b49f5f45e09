// One rank's part of a generic (layer list) model under a plan, run as the GEMM-equivalent
// layers of model/generic.hpp: the layers of its pipeline chunks, whole (generic models
// have no tensor parallelism), replicated over data-parallel ranks.
//
// The Program's ops map onto it directly: the first chunk's "embedding" loads the
// micro-batch's synthetic inputs, each layer op runs the layer's GEMM and element-wise
// work (the last layer also its loss: cross-entropy forward, its gradient backward), and a
// pipeline boundary carries the layer's activations, as many values as the model file says
// it stores. Parameters start from the full GenericNet<float> of the run's seed, so every
// plan computes the serial model's gradients to rounding.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "exec/model/generic.hpp"
#include "exec/shard.hpp"

namespace parasim::exec {

// The GEMM-equivalent layers of a generic model for the scenario's micro-batch.
GenericConfig generic_config(const plan::Scenario& s);

class GenericShard final : public Shard {
 public:
  GenericShard(Device& dev, const plan::Scenario& s, int rank);

  void embedding_forward(int mb) override;
  void embedding_backward(int mb) override;
  void layer_forward(int layer, int mb, plan::ComputeWhat part, bool recompute) override;
  void layer_backward(int layer, int mb, plan::ComputeWhat part) override;
  // The values entering layer `boundary`, or their gradient.
  View boundary(int boundary, int mb, bool gradient) override;
  void release_boundary(int boundary, int mb, bool gradient) override;

 private:
  void load_batch(std::int64_t step) override;
  void operand(int layer, int mb);  // the layer's GEMM operand X into scratch_x_

  GenericConfig cfg_;
  int layers_ = 0;
  std::map<int, GenericOffsets> offsets_;
  // Per (layer, micro-batch): the values entering the layer (the previous layer's output
  // before its ReLU, or the batch's inputs; the logits at index L), and their gradient.
  std::map<std::pair<int, int>, Buffer> in_, din_;
  std::vector<int> chunk_first_;            // the first layer of each of this rank's chunks
  std::vector<Buffer> inputs_, labels_;     // per micro-batch, on the first / last stage
  std::map<int, Buffer> stats_;             // cross-entropy statistics per micro-batch
  Buffer scratch_x_, scratch_y_;
  std::vector<float> loss_rows_;
};

}  // namespace parasim::exec
