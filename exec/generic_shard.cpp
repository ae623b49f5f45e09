#include "exec/generic_shard.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "plan/accounting.hpp"
#include "plan/schedule.hpp"

namespace parasim::exec {

using plan::ComputeWhat;

GenericConfig generic_config(const plan::Scenario& s) {
  GenericConfig cfg;
  cfg.batch = s.training.micro_batch;
  for (const plan::GenericLayer& l : s.model.generic_layers) {
    const plan::Gemm g = plan::generic_layer_gemm(l, cfg.batch);
    cfg.layers.push_back({g.m, g.n, plan::generic_layer_bias(l), std::max(1LL, std::llround(l.activations))});
  }
  return cfg;
}

GenericShard::GenericShard(Device& dev, const plan::Scenario& s, int rank)
    : Shard(dev, s, rank), cfg_(generic_config(s)), layers_(s.model.layer_count()) {
  const plan::ParallelPlan& p = s.plan;
  for (int chunk = 0; chunk < p.virtual_stages; ++chunk) {
    chunk_first_.push_back(plan::chunk_layers(layers_, pp_, p.virtual_stages, stage_, chunk).first);
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
  for (int l : layers_held_) {
    const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(l)];
    const auto n = static_cast<std::size_t>(sh.side * sh.side + sh.bias);
    add_piece(offsets_[l].weight, n, full.offsets(l).weight, n, 1, n, true);
  }
  init_parameters(full.params());
  // The GEMM's operand (and, backward, its gradient) and its output, reused by every layer.
  for (Buffer* b : {&scratch_x_, &scratch_y_}) *b = dev_.allocate_floats(static_cast<std::size_t>(widest));
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

void GenericShard::layer_forward(int layer, int mb, ComputeWhat, bool recompute) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const GenericOffsets& o = offsets_.at(layer);
  const std::int64_t gv = cfg_.gemm_values(layer);
  const auto rows = static_cast<int>(sh.rows);
  const auto side = static_cast<int>(sh.side);
  operand(layer, mb);
  dev_.gemm(false, false, rows, side, side, 1.0F, scratch_x_.f(), side, w(o.weight), side, 0.0F, scratch_y_.f(), side);
  Buffer& out = need(in_[{layer + 1, mb}], static_cast<std::size_t>(cfg_.out(layer)));
  dev_.resample_forward(out.f(), cfg_.out(layer), scratch_y_.f(), gv, false);
  dev_.add_cyclic(out.f(), cfg_.out(layer), w(o.bias), sh.bias);
  round(out.f(), out.floats());
  if (layer + 1 == layers_) {
    Buffer& st = need(stats_[mb], static_cast<std::size_t>(b_) * 3);
    dev_.cross_entropy_stats(st.f(), out.f(), labels_[static_cast<std::size_t>(mb)].i32(), b_, cfg_.classes(), 0);
  }
  // Full recompute keeps only each chunk's input until the backward runs the forward again.
  const bool chunk_input = std::find(chunk_first_.begin(), chunk_first_.end(), layer) != chunk_first_.end();
  if (recompute_ == plan::Recompute::full && !recompute && !chunk_input) in_.erase({layer, mb});
}

void GenericShard::layer_backward(int layer, int mb, ComputeWhat) {
  const GenericShape& sh = cfg_.layers[static_cast<std::size_t>(layer)];
  const GenericOffsets& o = offsets_.at(layer);
  const std::int64_t gv = cfg_.gemm_values(layer);
  const auto rows = static_cast<int>(sh.rows);
  const auto side = static_cast<int>(sh.side);
  float* dz = nullptr;  // the gradient of the layer's output
  if (layer + 1 == layers_) {
    // The mean over the step's samples: b per micro-batch, m micro-batches, dp replicas.
    const float scale = loss_gradient_scale(static_cast<double>(b_) * micro_batches_ * dp_);
    Buffer& logits = in_.at({layer + 1, mb});
    Buffer loss = dev_.allocate_floats(static_cast<std::size_t>(b_));
    dev_.cross_entropy_backward(logits.f(), loss.f(), logits.f(), stats_.at(mb).f(), 1,
                                labels_[static_cast<std::size_t>(mb)].i32(), b_, cfg_.classes(), 0, scale);
    round(logits.f(), logits.floats());
    loss_rows_.resize(static_cast<std::size_t>(b_));
    dev_.download(loss_rows_.data(), loss.f(), loss.bytes());
    for (float l : loss_rows_) loss_sum_ += l;
    loss_tokens_ += b_;
    stats_.erase(mb);
    dz = logits.f();
  } else {
    dz = din_.at({layer + 1, mb}).f();
  }
  dev_.cyclic_backward(g(o.bias), sh.bias, dz, cfg_.out(layer));
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
  // Done with: the layer's input, its output and the output's gradient.
  in_.erase({layer, mb});
  in_.erase({layer + 1, mb});
  din_.erase({layer + 1, mb});
}

Shard::View GenericShard::boundary(int layer, int mb, bool gradient) {
  Buffer& b = need(gradient ? din_[{layer, mb}] : in_[{layer, mb}], static_cast<std::size_t>(cfg_.in(layer)));
  return {b.f(), cfg_.in(layer)};
}

void GenericShard::release_boundary(int layer, int mb, bool gradient) {
  (gradient ? din_ : in_).erase({layer, mb});
}

}  // namespace parasim::exec
