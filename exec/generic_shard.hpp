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
//
// BatchNorm: a layer's BN layers normalise with the statistics of the rank's micro-batch
// (one op per pass), or under SyncBN with those of the same micro-batch on every dp
// replica: the pass runs as the Program's pieces (workload/kernels.hpp, generic_layer_kernels),
// each BN layer's statistics all-gathered between two forward pieces and its gradient
// sums all-reduced between two backward ones (batch_norm_buffer). A recompute normalises
// with the statistics its forward kept, so it needs no collective.
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
GenericConfig generic_config(const scenario::Scenario& s);

class GenericShard final : public Shard {
 public:
  GenericShard(Device& dev, const scenario::Scenario& s, int rank);

  void embedding_forward(int mb) override;
  void embedding_backward(int mb) override;
  void layer_forward(int layer, int mb, program::ComputeWhat part, bool recompute) override;
  void layer_backward(int layer, int mb, program::ComputeWhat part) override;
  void layer_piece(const program::Op& op) override;
  View batch_norm_buffer(const program::Op& collective) override;
  // The values entering layer `boundary`, or their gradient.
  View boundary(int boundary, int mb, bool gradient) override;
  void release_boundary(int boundary, int mb, bool gradient) override;

 private:
  void load_batch(std::int64_t step) override;
  void operand(int layer, int mb);  // the layer's GEMM operand X into scratch_x_
  // A pass's parts: forward the GEMM into the layer's output (its BatchNorms' input kept),
  // then BN k's statistics into `stats` and its normalisation from the merged statistics
  // of `members` blocks (none: those the forward kept), then the bias and the loss's
  // statistics; backward the loss's and bias's gradients, BN k's sums and its input
  // gradient from the sums of `samples` samples, then the GEMM's gradients.
  void forward_gemm(int layer, int mb);
  void bn_forward_stats(int layer, int mb, int k, float* stats);
  void bn_forward_normalize(int layer, int mb, int k, const float* gathered, int members);
  void forward_finish(int layer, int mb, bool recompute);
  float* backward_begin(int layer, int mb);  // returns the output's gradient
  void bn_backward_sums(int layer, int mb, int k, float* sums);
  void bn_backward_input(int layer, int mb, int k, const float* sums, double samples);
  void backward_gemm(int layer, int mb);
  [[nodiscard]] float* output_grad(int layer, int mb);

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
  // BatchNorm: per (layer, micro-batch) its BN layers' input and their merged statistics
  // (mean and invstd, 2C per BN layer); the forward's gathered statistics (dp blocks of
  // 2C + 1) and the backward's sums (2C), reused by every BN layer.
  std::map<std::pair<int, int>, Buffer> bn_in_, bn_mean_invstd_;
  Buffer bn_gathered_, bn_sums_;
};

}  // namespace parasim::exec
