#include "exec/shard.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "exec/generic_shard.hpp"
#include "exec/gpt_shard.hpp"
#include "exec/model/adam8bit.hpp"
#include "exec/model/fp8.hpp"
#include "workload/schedule.hpp"

namespace parasim::exec {

std::string unsupported_reason(const scenario::Scenario& s) {
  const scenario::ModelSpec& m = s.model;
  if (s.training.optimizer == scenario::Optimizer::sgd) {
    return "the executor trains with AdamW (training.optimizer: adamw or adamw8bit)";
  }
  for (const scenario::Injection& in : s.run.inject) {
    if (in.kind == scenario::InjectKind::delay) continue;
    if (s.plan.zero >= 2 || s.plan.hybrid_shard()) {
      return "run.inject changes a rank's gradients before their data-parallel reduction, once a step: under ZeRO-2/3 "
             "and hybrid sharding they are reduced piece by piece (use zero 0 or 1)";
    }
  }
  if (s.plan.offloads()) {
    return "offloading to host memory (plan.offload_optimizer / offload_params / offload_activations) is simulated "
           "only: the executor keeps the optimizer, the parameters and the activations on the device";
  }
  if (m.kind == scenario::ModelKind::generic) return "";  // as GEMM equivalents; the plan checks refuse tp > 1
  if (m.moe() && m.shared_expert_ffn_hidden > 0) {
    return "the executor's mixture of experts has no shared experts (model.shared_expert_ffn_hidden); they are "
           "simulated only";
  }
  if (m.moe() && m.dense_layers > 0) {
    return "the executor's mixture of experts has experts in every layer; dense first layers (model.dense_layers) are "
           "simulated only";
  }
  if (m.mlp != scenario::Mlp::gelu) return "the executor's decoder has a GELU MLP (GPT layout); model.mlp is swiglu";
  if (m.kv_heads != m.heads) return "the executor's decoder has as many key/value heads as heads (no grouped-query attention)";
  if (m.ffn_hidden != 4 * m.hidden) return fmt::format("the executor's decoder has an MLP 4 x hidden wide ({}), model.ffn_hidden is {}", 4 * m.hidden, m.ffn_hidden);
  if (!m.tie_embeddings) return "the executor's decoder ties the LM head to the embedding (model.tie_embeddings: true)";
  // Sequence parallelism needs seq_len divisible by tp (the plan's checks), so a
  // micro-batch's b·seq_len token rows split evenly.
  if (m.vocab % s.plan.tp != 0) return fmt::format("the vocabulary ({}) must divide over tp = {} for the vocabulary-parallel embedding", m.vocab, s.plan.tp);
  return "";
}

Shard::Shard(Device& dev, const scenario::Scenario& s, int rank) : dev_(dev) {
  if (const std::string why = unsupported_reason(s); !why.empty()) throw std::invalid_argument(why);
  const scenario::ParallelPlan& p = s.plan;
  const scenario::Coord c = scenario::coord_of(p, rank);
  precision_ = s.training.precision;
  storage_ = topology::storage_dtype(precision_);
  dp_ = p.grad_ranks();
  grad_index_ = scenario::grad_index(p, c);
  dp_index_ = c.dp;
  shard_ = p.shard_size();
  shard_index_ = grad_index_ % shard_;
  if (s.model.moe() && p.ep > 1) {
    ep_ = p.ep;
    ep_index_ = grad_index_ % ep_;
    expert_group_ = p.expert_grad_ranks();
    expert_index_ = grad_index_ / ep_;
  }
  pp_ = p.pp;
  stage_ = c.pp;
  first_stage_ = stage_ == 0;
  last_stage_ = stage_ == pp_ - 1;
  micro_batches_ = s.micro_batches();
  b_ = s.training.micro_batch;
  recompute_ = s.training.recompute;
  zero_ = p.zero;
  eight_bit_ = s.training.optimizer == scenario::Optimizer::adamw8bit;
  fp8_delayed_ = precision_ == scenario::Dtype::fp8 && s.training.fp8_recipe == scenario::Fp8Recipe::delayed;
  seed_ = s.run.seed;
  global_batch_ = s.training.global_batch;
  lr_ = s.training.learning_rate;
  training_ = s.training;
  for (const scenario::Injection& in : s.run.inject) {
    if (in.rank == rank && in.kind != scenario::InjectKind::delay) injections_.push_back(in);
  }
  if (precision_ == scenario::Dtype::fp16 && s.training.loss_scaling) loss_scale_ = s.training.loss_scale;
  scale_window_ = s.training.loss_scale_window;
  dev_.set_gemm_precision(precision_);
  for (int chunk = 0; chunk < p.virtual_stages; ++chunk) {
    const auto [first, last] = workload::chunk_layers(s.model.layer_count(), pp_, p.virtual_stages, stage_, chunk);
    for (int l = first; l < last; ++l) layers_held_.push_back(l);
  }
  std::sort(layers_held_.begin(), layers_held_.end());
  model_layers_ = static_cast<int>(s.model.layer_count());
}

std::string model_description(const scenario::Scenario& s) {
  if (s.model.kind == scenario::ModelKind::transformer) {
    return s.model.moe() ? fmt::format("GPT decoder with {} experts per MLP (top {}), no dropout", s.model.experts, s.model.top_k)
                         : "GPT decoder, no dropout";
  }
  const GenericConfig cfg = generic_config(s);
  return fmt::format("GEMM equivalents of {}'s {} layers (same FLOPs and parameters; synthetic {}-value inputs, {} classes)",
                     s.model.name, cfg.layers.size(), cfg.input_width, cfg.classes());
}

std::unique_ptr<Shard> make_shard(Device& dev, const scenario::Scenario& s, int rank) {
  if (s.model.kind == scenario::ModelKind::generic) return std::make_unique<GenericShard>(dev, s, rank);
  return std::make_unique<GptShard>(dev, s, rank);
}

void Shard::init_parameters(const std::function<float(std::size_t)>& value) {
  params_ = dev_.allocate_floats(static_cast<std::size_t>(param_count_));
  grads_ = dev_.allocate_floats(static_cast<std::size_t>(param_count_));
  // The rows of every piece, split over up to 8 threads when there are millions of values
  // (each value depends on its index alone, so any split gives the same shard).
  std::vector<float> host(static_cast<std::size_t>(param_count_), 0.0F);
  std::vector<std::pair<const Piece*, std::size_t>> rows;
  for (const Piece& pc : pieces_) {
    for (std::size_t r = 0; r < pc.rows; ++r) rows.emplace_back(&pc, r);
  }
  auto fill = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto [pc, r] = rows[i];
      float* out = host.data() + pc->local + r * pc->local_stride;
      const std::size_t from = pc->full + r * pc->full_stride;
      for (std::size_t j = 0; j < pc->cols; ++j) out[j] = value(from + j);
    }
  };
  const unsigned threads =
      param_count_ < (std::int64_t{1} << 22) ? 1U : std::clamp(std::thread::hardware_concurrency(), 1U, 8U);
  std::vector<std::thread> workers;
  unsigned started = 1;
  try {
    for (; started < threads; ++started) {
      workers.emplace_back(fill, rows.size() * started / threads, rows.size() * (started + 1) / threads);
    }
  } catch (const std::system_error&) {
    // The system refused a thread (a pids limit): this one fills what is left.
  }
  fill(0, rows.size() / threads);
  if (started < threads) fill(rows.size() * started / threads, rows.size());
  for (std::thread& w : workers) w.join();
  dev_.upload(params_.f(), host.data(), host.size() * sizeof(float));
  if (storage_ == scenario::Dtype::bf16 || storage_ == scenario::Dtype::fp16) {
    rounded_ = dev_.allocate(static_cast<std::size_t>(param_count_) * sizeof(std::uint16_t));
    weights_ = &rounded_;
    half_weights_ = true;
    refresh_weights(0, static_cast<std::size_t>(param_count_));
  } else {
    weights_ = &params_;
  }
}

void Shard::begin_step(std::int64_t step) {
  step_index_ = step;
  injected_ = false;
  // A CPU rank (which runs each kernel to its end) or a run with faults injected sums its own
  // gradients' squares before they are reduced: what names the rank a bad step comes from.
  source_tracked_ = dev_.multiprocessors() == 0 || !injections_.empty();
  source_norm2_ = 0.0;
  dev_.zero(grads_.f(), param_count_);
  loss_sum_ = 0.0;
  loss_tokens_ = 0.0;
  losses_written_.clear();
  if (ep_ > 1) expert_rows_.assign(static_cast<std::size_t>(model_layers_) * static_cast<std::size_t>(micro_batches_), 0.0);
  load_batch(step);
}

float* Shard::loss_rows(int mb, std::size_t rows, bool counted) {
  if (rows > loss_stride_) {
    // Sized once for the run (a micro-batch's rows do not change between steps).
    loss_stride_ = rows;
    step_losses_ = Buffer();
    step_losses_ = dev_.allocate_floats(static_cast<std::size_t>(micro_batches_) * loss_stride_);
  }
  if (counted) {
    losses_written_.emplace_back(mb, rows);
    loss_tokens_ += static_cast<double>(rows);
  }
  return step_losses_.f() + static_cast<std::size_t>(mb) * loss_stride_;
}

void Shard::end_step() {
  if (losses_written_.empty()) return;
  losses_host_.resize(step_losses_.floats());
  dev_.download(losses_host_.data(), step_losses_.f(), step_losses_.bytes());
  for (const auto& [mb, rows] : losses_written_) {
    const float* l = losses_host_.data() + static_cast<std::size_t>(mb) * loss_stride_;
    for (std::size_t r = 0; r < rows; ++r) loss_sum_ += l[r];
  }
}

// Ops only one of the models has: the Program never asks the other for them.
void Shard::recompute_attention_core(int, int) { throw std::logic_error("this model has no attention core"); }
void Shard::head_forward(int) { throw std::logic_error("this model has no separate head"); }
void Shard::head_backward(int) { throw std::logic_error("this model has no separate head"); }
Shard::View Shard::tp_buffer(const program::Op&) {
  throw std::logic_error("this model has no tensor parallel sums");
}
void Shard::tp_finish(const program::Op&) {
  throw std::logic_error("this model has no tensor parallel sums");
}
void Shard::layer_piece(const program::Op&) {
  throw std::logic_error("this model has no tensor parallel overlap");
}
Shard::View Shard::ring_block(const program::Op&) {
  throw std::logic_error("this model has no tensor parallel overlap");
}
Shard::View Shard::batch_norm_buffer(const program::Op&) {
  throw std::logic_error("this model has no BatchNorm");
}
Shard::View Shard::tied_embedding_grads() { throw std::logic_error("this model has no tied embedding"); }
std::vector<float> Shard::expert_counts(const program::Op&) {
  throw std::logic_error("this model has no experts");
}
void Shard::expert_counts_received(const program::Op&, std::span<const float>) {
  throw std::logic_error("this model has no experts");
}
Shard::Exchange Shard::exchange(const program::Op&) {
  throw std::logic_error("this model has no experts");
}

void Shard::set_buckets(std::vector<int> lows, std::vector<int> expert_lows) {
  auto highest_first = [](std::vector<int>& v) {
    std::sort(v.rbegin(), v.rend());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  highest_first(lows);
  highest_first(expert_lows);
  bucket_lows_ = std::move(lows);
  expert_lows_ = std::move(expert_lows);
  // The optimizer state covers what this rank updates: everything, or under ZeRO its
  // share of each bucket (the dense ones over ZeRO's group, the experts' over their
  // holders).
  owned_.clear();
  auto own = [&](const std::vector<int>& buckets, bool experts, std::size_t begin, std::size_t end, int group) {
    if (zero_ == 0 || group == 1 || buckets.empty()) {
      if (end > begin) owned_.emplace_back(begin, end);
      return;
    }
    for (int lo : buckets) {
      const View mine = owned_part(lo, experts);
      const auto from = static_cast<std::size_t>(mine.data - grads_.f());
      owned_.emplace_back(from, from + static_cast<std::size_t>(mine.count));
    }
  };
  own(bucket_lows_, false, 0, dense_end(), shard_);
  own(expert_lows_, true, dense_end(), static_cast<std::size_t>(param_count_), expert_group_);
  std::sort(owned_.begin(), owned_.end());
  std::size_t state = 0;
  std::int64_t blocks = 0;  // 8-bit: each owned range's moments quantized in their own blocks
  for (const auto& [b, e] : owned_) {
    state += e - b;
    blocks += adam8bit::blocks(static_cast<std::int64_t>(e - b));
  }
  if (eight_bit_) {
    // A byte per moment (any code: a block's zero maximum makes it zero), a maximum per block.
    adam_m_ = dev_.zeroed_floats((state + 3) / 4);
    adam_v_ = dev_.zeroed_floats((state + 3) / 4);
    m_max_ = dev_.zeroed_floats(static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1)));
    v_max_ = dev_.zeroed_floats(static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1)));
  } else {
    adam_m_ = dev_.zeroed_floats(state);
    adam_v_ = dev_.zeroed_floats(state);
  }
}


Buffer& Shard::need(Buffer& b, std::size_t floats) {
  if (b.empty()) b = dev_.allocate_floats(floats);
  return b;
}

Buffer& Shard::fit(Buffer& b, std::size_t floats) {
  if (b.floats() >= std::max<std::size_t>(floats, 1)) return b;
  // A power of two: the sizes a step asks for vary, so the allocators' caches (by size)
  // would otherwise keep one block of every size ever asked for.
  b = dev_.allocate_floats(std::bit_ceil(std::max<std::size_t>(floats, 1)));
  return b;
}


void Shard::round(float* p, std::size_t n) { dev_.round_to(storage_, p, static_cast<std::int64_t>(n)); }

const float* Shard::fp8_in(const float* x, int rows, int cols, bool gradient, int slot, std::size_t linear) {
  if (precision_ != scenario::Dtype::fp8) return x;
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  Buffer& b = fp8_scratch_[slot];
  if (b.floats() < count) b = dev_.allocate_floats(count);  // the largest operand so far
  if (!fp8_delayed_) {
    dev_.fake_quantize_fp8(b.f(), x, static_cast<std::int64_t>(count), gradient);
    return b.f();
  }
  const int role = gradient ? 2 : x == w(linear) ? 1 : 0;  // the output's gradient, the weight, the input
  const auto [it, fresh] = fp8_slot_.try_emplace({linear, role}, fp8_slot_.size());
  if (fresh) {
    if (it->second >= fp8_amax_.floats()) {  // room for more tensors: the amaxes so far kept
      Buffer more = dev_.zeroed_floats(2 * it->second + 16);
      if (!fp8_amax_.empty()) dev_.copy(more.f(), fp8_amax_.f(), static_cast<std::int64_t>(fp8_amax_.floats()));
      fp8_amax_ = std::move(more);
    }
    fp8_history_.emplace_back();
    fp8_scale_.push_back(1.0F);
  }
  dev_.fake_quantize_fp8_scaled(b.f(), x, static_cast<std::int64_t>(count), gradient, fp8_scale_[it->second],
                                fp8_amax_.f() + it->second);
  return b.f();
}

void Shard::update_fp8_scales() {
  if (!fp8_delayed_ || fp8_slot_.empty()) return;
  std::vector<float> amax(fp8_slot_.size());
  dev_.download(amax.data(), fp8_amax_.f(), amax.size() * sizeof(float));
  dev_.zero(fp8_amax_.f(), static_cast<std::int64_t>(fp8_amax_.floats()));
  for (const auto& [key, slot] : fp8_slot_) {
    std::vector<float>& h = fp8_history_[slot];
    h.push_back(amax[slot]);
    if (h.size() > fp8_history_length) h.erase(h.begin());
    const fp8::Format f = key.second == 2 ? fp8::e5m2 : fp8::e4m3;
    fp8_scale_[slot] = fp8::scale_for(*std::max_element(h.begin(), h.end()), f);
  }
}


void Shard::refresh_weights(std::size_t begin, std::size_t end) {
  if (weights_ == &params_ || end <= begin) return;
  dev_.pack_16(storage_, rounded_.u16() + begin, params_.f() + begin, static_cast<std::int64_t>(end - begin));
  for (Unpacked& u : unpacked_) {
    if (u.begin < end && begin < u.end) u.begin = u.end = 0;
  }
}

std::pair<std::size_t, std::size_t> Shard::weight_range(std::size_t offset) const {
  if (range_starts_.empty()) {
    range_starts_.push_back(0);
    for (const auto& [slot, at] : slot_offset_) range_starts_.push_back(at);
    for (const auto& [slot, at] : expert_slot_offset_) range_starts_.push_back(at);
    if (!expert_slot_offset_.empty()) range_starts_.push_back(expert_begin_);
    range_starts_.push_back(static_cast<std::size_t>(param_count_));
    std::sort(range_starts_.begin(), range_starts_.end());
    range_starts_.erase(std::unique(range_starts_.begin(), range_starts_.end()), range_starts_.end());
  }
  const auto next = std::upper_bound(range_starts_.begin(), range_starts_.end(), offset);
  if (next == range_starts_.begin() || next == range_starts_.end()) {
    throw std::out_of_range(fmt::format("weight offset {} outside the rank's {} parameters", offset, param_count_));
  }
  return {*(next - 1), *next};
}

float* Shard::unpacked_weights(std::size_t offset) const {
  const auto [begin, end] = weight_range(offset);
  Unpacked* slot = &unpacked_[0];
  for (Unpacked& u : unpacked_) {
    if (u.begin == begin && u.end == end && end > begin) {
      u.used = ++uses_;
      return u.data.f() + (offset - begin);
    }
    if (u.used < slot->used) slot = &u;  // the least recently used
  }
  const std::size_t n = end - begin;
  if (slot->data.floats() < n || slot->data.floats() > 2 * n) slot->data = dev_.allocate_floats(n);
  dev_.unpack_16(storage_, slot->data.f(), rounded_.u16() + begin, static_cast<std::int64_t>(n));
  slot->begin = begin;
  slot->end = end;
  slot->used = ++uses_;
  return slot->data.f() + (offset - begin);
}


std::pair<std::size_t, std::size_t> Shard::bucket_range(int lowest_layer, bool experts) const {
  // Buckets split their region of the rank's buffer (the dense parameters', or the
  // experts') at their lowest layer; the highest runs to the region's end, the lowest from
  // its start.
  const std::vector<int>& lows = experts ? expert_lows_ : bucket_lows_;
  const std::map<int, std::size_t>& slots = experts ? expert_slot_offset_ : slot_offset_;
  const auto it = std::find(lows.begin(), lows.end(), lowest_layer);
  if (it == lows.end()) {
    throw std::logic_error(fmt::format("no data-parallel {}bucket starts at layer {}", experts ? "expert " : "", lowest_layer));
  }
  const std::size_t i = static_cast<std::size_t>(it - lows.begin());
  const std::size_t region_begin = experts ? dense_end() : 0;
  const std::size_t region_end = experts ? static_cast<std::size_t>(param_count_) : dense_end();
  const std::size_t begin = i + 1 == lows.size() ? region_begin : slots.at(lowest_layer);
  const std::size_t end = i == 0 ? region_end : slots.at(lows[i - 1]);
  return {begin, end};
}


std::vector<std::int64_t> Shard::bucket_parts(int lowest_layer, bool experts) const {
  const auto [begin, end] = bucket_range(lowest_layer, experts);
  const auto n = static_cast<std::int64_t>(end - begin);
  const int group = experts ? expert_group_ : shard_;
  std::vector<std::int64_t> parts;
  for (int i = 0; i < group; ++i) parts.push_back(n / group + (i < n % group ? 1 : 0));
  return parts;
}

Shard::View Shard::owned_part(int lowest_layer, bool experts) {
  const std::vector<std::int64_t> parts = bucket_parts(lowest_layer, experts);
  const int index = experts ? expert_index_ : shard_index_;
  std::size_t from = bucket_range(lowest_layer, experts).first;
  for (int i = 0; i < index; ++i) from += static_cast<std::size_t>(parts[static_cast<std::size_t>(i)]);
  return {grads_.f() + from, parts[static_cast<std::size_t>(index)]};
}


Shard::View Shard::bucket(int lowest_layer, bool params, bool experts) {
  const auto [begin, end] = bucket_range(lowest_layer, experts);
  return {(params ? params_.f() : grads_.f()) + begin, static_cast<std::int64_t>(end - begin)};
}


void Shard::bucket_gathered(int lowest_layer, bool experts) {
  const auto [begin, end] = bucket_range(lowest_layer, experts);
  refresh_weights(begin, end);
}


void Shard::bucket_reduced(int lowest_layer) {
  if (zero_ < 2 || shard_ == 1) return;  // (ZeRO-2/3 shard no experts: plan checks)
  const auto [begin, end] = bucket_range(lowest_layer, false);
  const View mine = owned_part(lowest_layer);
  float* const first = grads_.f() + begin;
  float* const after_mine = mine.data + mine.count;
  if (mine.data > first) dev_.zero(first, mine.data - first);
  if (grads_.f() + end > after_mine) dev_.zero(after_mine, grads_.f() + end - after_mine);
}

void Shard::add_to_full(std::span<float> full, bool grads) const {
  std::vector<float> host(static_cast<std::size_t>(param_count_));
  dev_.download(host.data(), (grads ? grads_ : params_).f(), host.size() * sizeof(float));
  for (const Piece& pc : pieces_) {
    if (!pc.canonical) continue;
    for (std::size_t r = 0; r < pc.rows; ++r) {
      for (std::size_t c = 0; c < pc.cols; ++c) full[pc.full + r * pc.full_stride + c] += host[pc.local + r * pc.local_stride + c];
    }
  }
}

}  // namespace parasim::exec
