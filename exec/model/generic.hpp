// A generic (layer list) model run as GEMM-equivalent layers: what the executor trains for
// a scenario with model.kind: generic (CNNs), since a layer given only by its parameters,
// FLOPs and activations has no real operator to run. Each layer l is
//
//   X = stretch(input, rows·S)    the input laid out as the GEMM's rows x S operand, through
//                                 a ReLU after the first layer (relu commutes with stretch)
//   Y = X · W                     W: S x S, the layer's weight (workload::generic_layer_gemm)
//   u = stretch(Y, out)           out: the layer's stored activations per sample
//   z = BN(u) + bias              bias added cyclically
//
// BN: with BatchNorm layers (GenericShape::bn_layers, each of bn_channels channels), BN
// layer k normalises its share of the first bn_values values of each sample
// (model/batch_norm.hpp; values [k·V/n, (k+1)·V/n), each channel a contiguous run of
// them as in NCHW) with its own scale γ and shift β; the other values pass through. Statistics are those of the
// forward's group: one micro-batch, or under SyncBN the same micro-batch of every dp
// replica (forward() takes them together).
//
// and z is the next layer's input (the last layer's z are the logits, one per class),
// stretch() being the nearest-neighbour resampling of kernels.hpp, so each sample's values
// stay in its own stretch of every tensor. The layer performs the GEMM of the Program's
// FLOPs, holds exactly the layer's parameters (S² + bias) and hands the next layer (or the
// next pipeline stage) the layer's activation count: the same FLOPs, parameters and
// boundary bytes, not the same operator. Every output of a run says so.
//
// The last layer's output count per sample is the number of classes; the loss is the mean
// cross-entropy against synthetic_images() labels. One seed initialises everything:
// weights normal(0, sqrt(2/S)) (sqrt(1/S) for the last layer), biases 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/model/batch_norm.hpp"

namespace parasim::exec {

// One layer for a micro-batch.
struct GenericShape {
  std::int64_t rows = 1;  // GEMM rows
  std::int64_t side = 1;  // the weight is side x side
  std::int64_t bias = 0;  // bias values
  std::int64_t out = 1;   // output values per sample
  int bn_layers = 0;      // BatchNorm layers (0: none)
  std::int64_t bn_channels = 0;
  std::int64_t bn_values = 0;  // values per sample they normalise, together
  // BN layer k's values in a micro-batch of `samples`.
  [[nodiscard]] BnShape bn_shape(int k, std::int64_t samples) const {
    const std::int64_t begin = bn_values * k / bn_layers;
    return {samples, out, begin, bn_values * (k + 1) / bn_layers - begin, bn_channels};
  }
};

struct GenericConfig {
  std::vector<GenericShape> layers;
  int batch = 1;           // samples per micro-batch
  int input_width = 256;   // values per input sample
  [[nodiscard]] int classes() const { return static_cast<int>(layers.back().out); }
  // Values entering layer l for one micro-batch.
  [[nodiscard]] std::int64_t in(int l) const {
    return (l == 0 ? input_width : layers[static_cast<std::size_t>(l) - 1].out) * batch;
  }
  [[nodiscard]] std::int64_t out(int l) const { return layers[static_cast<std::size_t>(l)].out * batch; }
  // The GEMM's operand X (and output Y): rows x side values.
  [[nodiscard]] std::int64_t gemm_values(int l) const {
    const GenericShape& s = layers[static_cast<std::size_t>(l)];
    return s.rows * s.side;
  }
};

// Where layer l's tensors start in a flat parameter buffer: the weight (side x side, stored
// [in x out]), the bias, then the BatchNorms' scales (bn_layers x bn_channels) and shifts.
// Advances `at` past the layer.
struct GenericOffsets {
  std::size_t weight = 0;
  std::size_t bias = 0;
  std::size_t gamma = 0;
  std::size_t beta = 0;
};
GenericOffsets lay_out_generic_layer(std::size_t& at, const GenericShape& shape);

template <class T>
class GenericNet {
 public:
  GenericNet(const GenericConfig& config, std::uint64_t seed);

  [[nodiscard]] const GenericConfig& config() const { return cfg_; }
  [[nodiscard]] std::span<T> params() { return params_; }
  [[nodiscard]] std::span<T> grads() { return grads_; }
  [[nodiscard]] std::int64_t param_count() const { return static_cast<std::int64_t>(params_.size()); }
  [[nodiscard]] const GenericOffsets& offsets(int l) const { return offsets_[static_cast<std::size_t>(l)]; }

  // Forward over a group of micro-batches (inputs: group x batch x input_width, labels:
  // group x batch), each its own GEMMs, their BatchNorms sharing statistics (SyncBN's dp
  // replicas; a group of one otherwise); returns the mean loss over the group's samples
  // and keeps what backward() needs.
  T forward(std::span<const T> inputs, std::span<const std::int32_t> labels);
  // Adds d(loss)/d(params) of the last forward into grads().
  void backward();
  void zero_grad();

 private:
  GenericConfig cfg_;
  std::vector<T> params_, grads_;
  std::vector<GenericOffsets> offsets_;
  // Per micro-batch of the group, per layer: its input, GEMM operand and BatchNorm input;
  // in_[m][L]: the logits.
  std::vector<std::vector<std::vector<T>>> in_, x_, u_;
  std::vector<std::vector<T>> mean_invstd_;  // per layer and BN layer (2C each, back to back)
  std::vector<std::vector<T>> dlogits_;
};

// Deterministic labelled inputs a classifier can learn: one prototype per class drawn from
// the seed (normal(0, 1) values), and each sample its class's prototype plus normal(0, 0.5)
// noise, the class and noise drawn per (step, sample).
struct ImageBatch {
  std::vector<float> inputs;          // batch x width
  std::vector<std::int32_t> labels;   // batch
};
ImageBatch synthetic_images(int classes, int width, int batch, std::uint64_t seed, std::int64_t step);

}  // namespace parasim::exec
