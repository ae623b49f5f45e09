#include "exec/generic_shard.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "workload/accounting.hpp"
#include "workload/schedule.hpp"

namespace parasim::exec {

using program::ComputeWhat;

GenericConfig generic_config(const scenario::Scenario& s) {
  GenericConfig cfg;
  cfg.batch = s.training.micro_batch;
  for (const scenario::GenericLayer& l : s.model.generic_layers) {
    const workload::Gemm g = workload::generic_layer_gemm(l, cfg.batch);
    GenericShape shape{g.m, g.n, workload::generic_layer_bias(l), std::max(1LL, std::llround(l.activations))};
    if (l.batch_norm.layers > 0) {
      shape.bn_layers = l.batch_norm.layers;
      shape.bn_channels = l.batch_norm.channels;
      shape.bn_values = std::min(shape.out, static_cast<std::int64_t>(std::llround(l.batch_norm.values)));
    }
    cfg.layers.push_back(shape);
  }
  return cfg;
}

GenericShard::GenericShard(Device& dev, const scenario::Scenario& s, int rank)
    : Shard(dev, s, rank), cfg_(generic_config(s)), layers_(s.model.layer_count()) {
  const scenario::ParallelPlan& p = s.plan;
  for (int chunk = 0; chunk < p.virtual_stages; ++chunk) {
    chunk_first_.push_back(workload::chunk_layers(layers_, pp_, p.virtual_stages, stage_, chunk).first);
  }
  std::size_t at = 0;
  std::int64_t widest = 0;
  for (int l : layers_held_) {
    slot_offset_[l] = at;
    offsets_[l] = lay_out_generic_layer(at, cfg_.layers[static_cast<std::size_t>(l)]);
    widest = std::max(widest, cfg_.gemm_values(l));
  }
  param_count_ = static_cast<std::int64_t>(at);
  // Weight and bias are contiguous in both layouts: one piece per layer.
  GenericNet<float> full(cfg_, seed_);
  full_count_ = full.param_count();
  std::int64_t channels = 0;
  for (int l : layers_held_) {
    const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(l)];
    const auto n = static_cast<std::size_t>(sh.side * sh.side + sh.bias + 2 * sh.bn_layers * sh.bn_channels);
    add_piece(offsets_[l].weight, n, full.offsets(l).weight, n, 1, n, true);
    channels = std::max(channels, sh.bn_channels);
  }
  init_parameters(full.params());
  // The GEMM's operand (and, backward, its gradient) and its output, reused by every layer.
  for (Buffer* b : {&scratch_x_, &scratch_y_}) *b = dev_.allocate_floats(static_cast<std::size_t>(widest));
  if (channels > 0) {
    bn_gathered_ = dev_.allocate_floats(static_cast<std::size_t>(dp_ * (2 * channels + 1)));
    bn_sums_ = dev_.allocate_floats(static_cast<std::size_t>(2 * channels));
  }
}

void GenericShard::load_batch(std::int64_t step) {
  if (!first_stage_ && !last_stage_) return;
  const ImageBatch batch = synthetic_images(cfg_.classes(), cfg_.input_width, global_batch_, seed_, step);
  inputs_.resize(static_cast<std::size_t>(micro_batches_));
  labels_.resize(static_cast<std::size_t>(micro_batches_));
  for (int mb = 0; mb < micro_batches_; ++mb) {
    const auto sample = static_cast<std::size_t>((dp_index_ * micro_batches_ + mb) * b_);
    if (first_stage_) {
      Buffer& in = inputs_[static_cast<std::size_t>(mb)];
      if (in.empty()) in = dev_.allocate_floats(static_cast<std::size_t>(cfg_.in(0)));
      dev_.upload(in.f(), batch.inputs.data() + sample * static_cast<std::size_t>(cfg_.input_width), in.bytes());
      round(in.f(), in.floats());
    }
    if (last_stage_) {
      Buffer& lb = labels_[static_cast<std::size_t>(mb)];
      if (lb.empty()) lb = dev_.allocate(static_cast<std::size_t>(b_) * sizeof(std::int32_t));
      dev_.upload(lb.i32(), batch.labels.data() + sample, lb.bytes());
    }
  }
}

void GenericShard::embedding_forward(int mb) {
  Buffer& in = need(in_[{0, mb}], static_cast<std::size_t>(cfg_.in(0)));
  dev_.copy(in.f(), inputs_[static_cast<std::size_t>(mb)].f(), cfg_.in(0));
}

// The inputs have no gradient to keep: layer 0's backward stops at its weights.
void GenericShard::embedding_backward(int) {}

// X = stretch(input), through a ReLU after the first layer.
void GenericShard::operand(int layer, int mb) {
  dev_.resample_forward(scratch_x_.f(), cfg_.gemm_values(layer), in_.at({layer, mb}).f(), cfg_.in(layer), layer > 0);
}

void GenericShard::forward_gemm(int layer, int mb) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const auto rows = static_cast<int>(sh.rows);
  const auto side = static_cast<int>(sh.side);
  operand(layer, mb);
  dev_.gemm(false, false, rows, side, side, 1.0F, scratch_x_.f(), side, w(offsets_.at(layer).weight), side, 0.0F,
            scratch_y_.f(), side);
  Buffer& out = need(in_[{layer + 1, mb}], static_cast<std::size_t>(cfg_.out(layer)));
  dev_.resample_forward(out.f(), cfg_.out(layer), scratch_y_.f(), cfg_.gemm_values(layer), false);
  if (sh.bn_layers > 0) {
    round(out.f(), out.floats());  // the BatchNorms' input, stored
    Buffer& in = need(bn_in_[{layer, mb}], out.floats());
    dev_.copy(in.f(), out.f(), cfg_.out(layer));
    need(bn_mean_invstd_[{layer, mb}], static_cast<std::size_t>(2 * sh.bn_layers * sh.bn_channels));
  }
}

void GenericShard::bn_forward_stats(int layer, int mb, int k, float* stats) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  dev_.bn_stats(stats, bn_in_.at({layer, mb}).f(), sh.bn_shape(k, b_));
}

void GenericShard::bn_forward_normalize(int layer, int mb, int k, const float* gathered, int members) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const GenericOffsets& o = offsets_.at(layer);
  const BnShape shape = sh.bn_shape(k, b_);
  float* mi = bn_mean_invstd_.at({layer, mb}).f() + 2 * k * sh.bn_channels;
  if (gathered != nullptr) dev_.bn_merge(mi, gathered, members, shape);
  const auto c = static_cast<std::size_t>(k * sh.bn_channels);
  dev_.bn_normalize(in_.at({layer + 1, mb}).f(), bn_in_.at({layer, mb}).f(), mi, w(o.gamma + c), w(o.beta + c), shape);
}

void GenericShard::forward_finish(int layer, int mb, bool recompute) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  Buffer& out = in_.at({layer + 1, mb});
  dev_.add_cyclic(out.f(), cfg_.out(layer), w(offsets_.at(layer).bias), sh.bias);
  round(out.f(), out.floats());
  if (layer + 1 == layers_) {
    Buffer& st = need(stats_[mb], static_cast<std::size_t>(b_) * 3);
    dev_.cross_entropy_stats(st.f(), out.f(), labels_[static_cast<std::size_t>(mb)].i32(), b_, cfg_.classes(), 0);
  }
  // Full recompute keeps only each chunk's input (and the BatchNorms' statistics) until the
  // backward runs the forward again.
  const bool chunk_input = std::find(chunk_first_.begin(), chunk_first_.end(), layer) != chunk_first_.end();
  if (recompute_ == scenario::Recompute::full && !recompute) {
    if (!chunk_input) in_.erase({layer, mb});
    bn_in_.erase({layer, mb});
  }
}

void GenericShard::layer_forward(int layer, int mb, ComputeWhat, bool recompute) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  forward_gemm(layer, mb);
  // The rank's own statistics (a recompute: those its forward merged).
  for (int k = 0; k < sh.bn_layers; ++k) {
    if (!recompute) bn_forward_stats(layer, mb, k, bn_gathered_.f());
    bn_forward_normalize(layer, mb, k, recompute ? nullptr : bn_gathered_.f(), 1);
  }
  forward_finish(layer, mb, recompute);
}

float* GenericShard::output_grad(int layer, int mb) {
  return layer + 1 == layers_ ? in_.at({layer + 1, mb}).f() : din_.at({layer + 1, mb}).f();
}

float* GenericShard::backward_begin(int layer, int mb) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  if (layer + 1 == layers_) {
    // The mean over the step's samples: b per micro-batch, m micro-batches, dp replicas.
    const float scale = loss_gradient_scale(static_cast<double>(b_) * micro_batches_ * dp_);
    Buffer& logits = in_.at({layer + 1, mb});
    dev_.cross_entropy_backward(logits.f(), loss_rows(mb, static_cast<std::size_t>(b_), true), logits.f(),
                                stats_.at(mb).f(), 1, labels_[static_cast<std::size_t>(mb)].i32(), b_, cfg_.classes(), 0,
                                scale);
    round(logits.f(), logits.floats());
    stats_.erase(mb);
  }
  float* dz = output_grad(layer, mb);
  dev_.cyclic_backward(g(offsets_.at(layer).bias), sh.bias, dz, cfg_.out(layer));
  return dz;
}

void GenericShard::bn_backward_sums(int layer, int mb, int k, float* sums) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const GenericOffsets& o = offsets_.at(layer);
  const auto c = static_cast<std::size_t>(k * sh.bn_channels);
  dev_.bn_backward_reduce(sums, g(o.gamma + c), g(o.beta + c), output_grad(layer, mb), bn_in_.at({layer, mb}).f(),
                          bn_mean_invstd_.at({layer, mb}).f() + 2 * c, sh.bn_shape(k, b_));
}

void GenericShard::bn_backward_input(int layer, int mb, int k, const float* sums, double samples) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const auto c = static_cast<std::size_t>(k * sh.bn_channels);
  float* dz = output_grad(layer, mb);
  dev_.bn_backward_input(dz, dz, bn_in_.at({layer, mb}).f(), bn_mean_invstd_.at({layer, mb}).f() + 2 * c,
                         w(offsets_.at(layer).gamma + c), sums, samples, sh.bn_shape(k, b_));
}

void GenericShard::backward_gemm(int layer, int mb) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const GenericOffsets& o = offsets_.at(layer);
  const std::int64_t gv = cfg_.gemm_values(layer);
  const auto rows = static_cast<int>(sh.rows);
  const auto side = static_cast<int>(sh.side);
  float* dz = output_grad(layer, mb);
  if (sh.bn_layers > 0) round(dz, static_cast<std::size_t>(cfg_.out(layer)));
  dev_.resample_backward(scratch_y_.f(), gv, dz, cfg_.out(layer), nullptr);  // dY
  operand(layer, mb);                                                        // X, again
  dev_.gemm(true, false, side, side, rows, 1.0F, scratch_x_.f(), side, scratch_y_.f(), side, 1.0F, g(o.weight), side);
  dev_.gemm(false, true, rows, side, side, 1.0F, scratch_y_.f(), side, w(o.weight), side, 0.0F, scratch_x_.f(), side);
  if (layer > 0) {
    // Back along the stretch and through the ReLU (masked where the input was <= 0).
    Buffer& din = need(din_[{layer, mb}], static_cast<std::size_t>(cfg_.in(layer)));
    dev_.resample_backward(din.f(), cfg_.in(layer), scratch_x_.f(), gv, in_.at({layer, mb}).f());
    round(din.f(), din.floats());
  }
  // Done with: the layer's input, its output and the output's gradient, its BatchNorms'.
  in_.erase({layer, mb});
  in_.erase({layer + 1, mb});
  din_.erase({layer + 1, mb});
  bn_in_.erase({layer, mb});
  bn_mean_invstd_.erase({layer, mb});
}

void GenericShard::layer_backward(int layer, int mb, ComputeWhat) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  backward_begin(layer, mb);
  for (int k = sh.bn_layers - 1; k >= 0; --k) {
    bn_backward_sums(layer, mb, k, bn_sums_.f());
    bn_backward_input(layer, mb, k, bn_sums_.f(), b_);
  }
  backward_gemm(layer, mb);
}

// SyncBN's pieces (workload/kernels.hpp, generic_layer_kernels): forward piece k merges BN
// k-1's gathered statistics and normalises, then computes BN k's; backward piece k takes
// BN k's summed sums for its input gradient, then computes BN k-1's sums.
void GenericShard::layer_piece(const program::Op& op) {
  const int layer = op.layer;
  const int mb = op.micro_batch;
  const int k = op.step;
  const int n = cfg_.layers[static_cast<std::size_t>(layer)].bn_layers;
  const auto stride = static_cast<std::size_t>(2 * cfg_.layers[static_cast<std::size_t>(layer)].bn_channels + 1);
  if (op.category != program::Category::backward) {
    if (k == 0) forward_gemm(layer, mb);
    if (k > 0) bn_forward_normalize(layer, mb, k - 1, bn_gathered_.f(), dp_);
    if (k < n) bn_forward_stats(layer, mb, k, bn_gathered_.f() + static_cast<std::size_t>(grad_index_) * stride);
    if (k == n) forward_finish(layer, mb, false);
    return;
  }
  if (k == n) backward_begin(layer, mb);
  if (k < n) bn_backward_input(layer, mb, k, bn_sums_.f(), static_cast<double>(b_) * dp_);
  if (k > 0) bn_backward_sums(layer, mb, k - 1, bn_sums_.f());
  if (k == 0) backward_gemm(layer, mb);
}

Shard::View GenericShard::batch_norm_buffer(const program::Op& collective) {
  const auto c = cfg_.layers[static_cast<std::size_t>(collective.layer)].bn_channels;
  if (collective.pass == program::Category::backward) return {bn_sums_.f(), 2 * c};
  return {bn_gathered_.f(), dp_ * (2 * c + 1)};
}

Shard::View GenericShard::boundary(int layer, int mb, bool gradient) {
  Buffer& b = need(gradient ? din_[{layer, mb}] : in_[{layer, mb}], static_cast<std::size_t>(cfg_.in(layer)));
  return {b.f(), cfg_.in(layer)};
}

void GenericShard::release_boundary(int layer, int mb, bool gradient) {
  (gradient ? din_ : in_).erase({layer, mb});
}

}  // namespace parasim::exec
