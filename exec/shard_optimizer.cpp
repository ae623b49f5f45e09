// The end of a shard's step: gradients rounded where they accumulate in 16 bits, the
// gradient norm over each rank's owned ranges (and the rank a bad step comes from), faults
// injected into gradients for the tests, and the optimizer step (AdamW, SGD, 8-bit AdamW;
// fp16's loss scaling, clipping, ZeRO's shards) with the weights' compute copy refreshed.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "exec/model/adam8bit.hpp"
#include "exec/shard.hpp"

namespace parasim::exec {

void Shard::gradients_accumulated(int slot) {
  if (topology::dtype_bytes(training_.grad_dtype) != 2) return;
  auto round_slot = [&](const std::map<int, std::size_t>& slots, std::size_t region_end) {
    const auto it = slots.find(slot);
    if (it == slots.end()) return;
    const auto next = std::next(it);
    const std::size_t end = next == slots.end() ? region_end : next->second;
    if (end > it->second)
      dev_.round_to(training_.grad_dtype, grads_.f() + it->second, static_cast<std::int64_t>(end - it->second));
  };
  round_slot(slot_offset_, dense_end());
  round_slot(expert_slot_offset_, static_cast<std::size_t>(param_count_));
}

void Shard::gradients_reduced(View v) {
  if (topology::dtype_bytes(training_.grad_dtype) == 2 && v.count > 0)
    dev_.round_to(training_.grad_dtype, v.data, v.count);
}

void Shard::before_reduce(View v) {
  injected_ = true;
  inject(v);
  if (source_tracked_) source_norm2_ += dev_.sum_squares(v.data, v.count);
}

void Shard::inject(View v) {
  for (const scenario::Injection& in : injections_) {
    if ((in.step != 0 && in.step != step_index_ + 1) || v.count == 0) continue;  // steps counted from 1
    const auto factor = static_cast<float>(in.factor);
    switch (in.kind) {
      case scenario::InjectKind::scale: dev_.scale(v.data, factor, v.count); break;
      case scenario::InjectKind::zero: dev_.zero(v.data, v.count); break;
      case scenario::InjectKind::nan: dev_.scale(v.data, std::numeric_limits<float>::quiet_NaN(), v.count); break;
      case scenario::InjectKind::random: {
        // Noise of the gradients' own scale: normal, with factor x their RMS.
        const double rms = std::sqrt(dev_.sum_squares(v.data, v.count) / static_cast<double>(v.count));
        std::mt19937_64 gen(seed_ ^ (static_cast<std::uint64_t>(step_index_) << 20) ^
                            static_cast<std::uint64_t>(v.count));
        std::normal_distribution<float> noise(0.0F, static_cast<float>(rms * in.factor));
        std::vector<float> host(static_cast<std::size_t>(v.count));
        for (float& x : host) x = noise(gen);
        dev_.upload(v.data, host.data(), host.size() * sizeof(float));
        break;
      }
      case scenario::InjectKind::delay: break;  // the runner's
    }
  }
}

void Shard::compute_norm_ranges() {
  // The local values this rank holds first among the model-parallel ranks (pieces), in
  // order and merged.
  std::vector<std::pair<std::size_t, std::size_t>> unique;
  for (const Piece& pc : pieces_) {
    if (!pc.unique) continue;
    if (pc.local_stride == pc.cols) {
      unique.emplace_back(pc.local, pc.local + pc.rows * pc.cols);
      continue;
    }
    for (std::size_t r = 0; r < pc.rows; ++r)
      unique.emplace_back(pc.local + r * pc.local_stride, pc.local + r * pc.local_stride + pc.cols);
  }
  std::sort(unique.begin(), unique.end());
  auto merged = [](std::vector<std::pair<std::size_t, std::size_t>>& v) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& r : v) {
      if (!out.empty() && r.first <= out.back().second) {
        out.back().second = std::max(out.back().second, r.second);
      } else if (r.second > r.first) {
        out.push_back(r);
      }
    }
    v = std::move(out);
  };
  merged(unique);
  // Of the values this rank updates, those no other data-parallel rank counts: without
  // ZeRO every replica holds the same sum (the first counts it), with it each rank its share
  // (hybrid sharding: the first shard group's).
  norm_ranges_.clear();
  for (const auto& [b, e] : owned_) {
    const bool experts = b >= dense_end();
    const bool counts = experts ? (zero_ == 0 || expert_group_ == 1 ? expert_index_ == 0 : true)
                                : (zero_ == 0 || shard_ == 1 ? grad_index_ == 0 : grad_index_ < shard_);
    if (!counts) continue;
    for (const auto& [ub, ue] : unique) {
      const std::size_t from = std::max(b, ub), to = std::min(e, ue);
      if (to > from) norm_ranges_.emplace_back(from, to);
    }
  }
  merged(norm_ranges_);
  norm_ready_ = true;
}

void Shard::optimizer_step() {
  last_skipped_ = false;
  update_fp8_scales();  // every cast of the step is done
  // Without data-parallel reductions, a fault injected into this rank's gradients lands here.
  if (!injected_) inject({grads_.f(), param_count_});
  if (precision_ == scenario::Dtype::fp16 && training_.loss_scaling) {
    // Every rank's overflow count, summed over the job: all skip or none does.
    double overflow[1] = {0.0};
    for (const auto& [begin, end] : owned_) {
      overflow[0] +=
          static_cast<double>(dev_.count_nonfinite(grads_.f() + begin, static_cast<std::int64_t>(end - begin)));
    }
    dev_.sum_to_all(overflow);
    if (overflow[0] > 0.0) {
      last_skipped_ = true;
      good_steps_ = 0;
      loss_scale_ = std::max(1.0, loss_scale_ / 2.0);
      grad_norm_ = std::numeric_limits<double>::infinity();
      local_norm2_ = grad_norm_;
      if (!injected_ || !source_tracked_) source_norm2_ = local_norm2_;
      clip_factor_ = 1.0;
      return;
    }
    for (const auto& [begin, end] : owned_) {
      dev_.scale(grads_.f() + begin, static_cast<float>(1.0 / loss_scale_), static_cast<std::int64_t>(end - begin));
    }
    if (++good_steps_ == scale_window_) {
      good_steps_ = 0;
      loss_scale_ *= 2.0;
    }
  }
  // The global gradient norm, each value once over the job, and clipping (Megatron's:
  // scaled by clip / (norm + 1e-6) when that is below 1).
  if (!norm_ready_) compute_norm_ranges();
  local_norm2_ = 0.0;
  for (const auto& [begin, end] : norm_ranges_)
    local_norm2_ += dev_.sum_squares(grads_.f() + begin, static_cast<std::int64_t>(end - begin));
  if (!injected_ || !source_tracked_) source_norm2_ = local_norm2_;  // no reduction, or not tracked
  double total[1] = {local_norm2_};
  dev_.sum_to_all(total);
  grad_norm_ = std::sqrt(total[0]);
  clip_factor_ = 1.0;
  if (training_.grad_clip > 0.0 && training_.grad_clip / (grad_norm_ + 1e-6) < 1.0) {
    clip_factor_ = training_.grad_clip / (grad_norm_ + 1e-6);
    for (const auto& [begin, end] : owned_) {
      dev_.scale(grads_.f() + begin, static_cast<float>(clip_factor_), static_cast<std::int64_t>(end - begin));
    }
  }
  lr_ = scenario::learning_rate_at(training_, step_);
  ++step_;
  std::size_t state = 0;
  std::int64_t block = 0;
  for (const auto& [begin, end] : owned_) {
    const auto n = static_cast<std::int64_t>(end - begin);
    if (eight_bit_) {
      auto* m = reinterpret_cast<std::uint8_t*>(adam_m_.f()) + state;
      auto* v = reinterpret_cast<std::uint8_t*>(adam_v_.f()) + state;
      dev_.adamw8bit(params_.f() + begin, grads_.f() + begin, m, v, m_max_.f() + block, v_max_.f() + block, n, lr_, 0.9,
                     0.95, 1e-8, 0.0, step_);
      block += adam8bit::blocks(n);
    } else {
      dev_.adamw(params_.f() + begin, grads_.f() + begin, adam_m_.f() + state, adam_v_.f() + state, n, lr_, 0.9, 0.95,
                 1e-8, 0.0, step_);
    }
    state += end - begin;
  }
  // Without fp32 master weights the update lands in the 16-bit weights themselves: what
  // rounds away is lost.
  if (!training_.master_weights && weights_ != &params_) {
    for (const auto& [begin, end] : owned_) round(params_.f() + begin, end - begin);
  }
  if (zero_ == 0 || dp_ == 1) {
    refresh_weights(0, static_cast<std::size_t>(param_count_));
  } else if (expert_group_ == 1) {  // ZeRO-1 gathers no experts that only this rank holds
    refresh_weights(dense_end(), static_cast<std::size_t>(param_count_));
  }
  // ZeRO-3 keeps only its share between uses: the rest is made NaN, so that a unit used
  // without its all-gather shows in the loss.
  if (zero_ == 3 && shard_ > 1) {
    std::size_t at = 0;
    auto poison = [&](std::size_t begin, std::size_t end) {
      if (end <= begin) return;
      const auto n = static_cast<std::int64_t>(end - begin);
      dev_.scale(params_.f() + begin, std::numeric_limits<float>::quiet_NaN(), n);
      refresh_weights(begin, end);  // the 16-bit copy too
    };
    for (const auto& [begin, end] : owned_) {
      poison(at, begin);
      at = end;
    }
    poison(at, static_cast<std::size_t>(param_count_));
  }
}

}  // namespace parasim::exec
