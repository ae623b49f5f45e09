#include "exec/gpt_shard.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "exec/model/gpt.hpp"
#include "exec/model/ring_attention.hpp"
#include "workload/kernels.hpp"
#include "workload/schedule.hpp"

namespace parasim::exec {

using program::ComputeWhat;
using program::TpRole;

GptShard::GptShard(Device& dev, const scenario::Scenario& s, int rank) : Shard(dev, s, rank) {
  const scenario::ParallelPlan& p = s.plan;
  const scenario::Coord c = scenario::coord_of(p, rank);
  tp_ = p.tp;
  tp_index_ = c.tp;
  t_ = s.model.seq_len;
  h_ = s.model.hidden;
  heads_ = s.model.heads;
  d_ = h_ / heads_;
  vocab_ = s.model.vocab;
  layers_ = s.model.layers;
  cl_ = h_ / tp_;
  moe_ = s.model.moe();
  experts_ = s.model.experts;
  top_k_ = s.model.top_k;
  fl_ = (moe_ ? s.model.expert_ffn_hidden : 4 * h_) / tp_;
  vl_ = vocab_ / tp_;
  v0_ = tp_index_ * vl_;
  // Context parallelism: this rank holds tl_ of each sequence's positions (two chunks).
  cp_ = p.cp;
  cp_index_ = c.cp;
  tl_ = t_ / cp_;
  for (int i = 0; i < cp_; ++i) positions_.push_back(ring::positions(t_, cp_, i));
  n_ = b_ * tl_;
  // Sequence parallelism: each tp rank holds a block of ns_ of the n_ token rows outside
  // the tensor-parallel GEMMs (norms, residuals, biases after the sums).
  sp_ = p.sequence_parallel && tp_ > 1;
  flash_ = scenario::fused(s.training.attention);
  pack16_ = storage_ == scenario::Dtype::bf16 || storage_ == scenario::Dtype::fp16;
  ns_ = sp_ ? n_ / tp_ : n_;
  r0_ = sp_ ? tp_index_ * ns_ : 0;
  splits_ = workload::overlap_splits(workload::kernel_plan(s));
  // Megatron's scatter-gather: pipeline transfers carry this rank's 1/tp of the boundary,
  // and a tp all-gather (TpRole::pp_gather) completes it on the receiver.
  scatter_ = tp_ > 1 && !sp_ && p.pp_scatter_gather;

  // Layout of the flat buffers, by layer slot: -1 (wte slice, wpe), the layers, L (final
  // norm, and the head's copy of the wte slice when the head is on another stage).
  const auto H = static_cast<std::size_t>(h_);
  std::size_t at = 0;
  auto take = [&](std::size_t n) {
    const std::size_t o = at;
    at += n;
    return o;
  };
  if (first_stage_) {
    slot_offset_[-1] = at;
    wte_ = take(static_cast<std::size_t>(vl_) * H);
    wpe_ = take(static_cast<std::size_t>(t_) * H);
  }
  const auto CL = static_cast<std::size_t>(cl_);
  const auto FL = static_cast<std::size_t>(fl_);
  // Expert parallelism: this rank's experts / ep experts of each layer in a region after
  // the dense parameters (their buckets sum over other ranks), laid out from 0 and moved
  // there once the dense size is known.
  held_ = moe_ ? experts_ / ep_ : 0;
  std::size_t expert_at = 0;
  for (int l : layers_held_) {
    slot_offset_[l] = at;
    if (ep_ > 1) expert_slot_offset_[l] = expert_at;
    layer_params_[l] = lay_out_layer(at, H, CL, FL, moe_ ? static_cast<std::size_t>(experts_) : 0,
                                     static_cast<std::size_t>(held_), ep_ > 1 ? &expert_at : nullptr);
  }
  if (last_stage_) {
    slot_offset_[layers_] = at;
    lnfw_ = take(H);
    lnfb_ = take(H);
    head_ = pp_ > 1 ? take(static_cast<std::size_t>(vl_) * H) : wte_;
  }
  expert_begin_ = at;
  for (auto& [l, offset] : expert_slot_offset_) {
    offset += expert_begin_;
    LayerParams& lp = layer_params_[l];
    for (std::size_t* o : {&lp.fcw, &lp.fcb, &lp.fcprojw, &lp.fcprojb}) *o += expert_begin_;
  }
  param_count_ = static_cast<std::int64_t>(at + expert_at);

  // Where each local tensor comes from in the full model.
  // Each rank draws only what it holds (GptInitialValues), the values Gpt<float> has.
  GptConfig cfg{vocab_, t_, layers_, h_, heads_};
  if (moe_) {
    cfg.experts = experts_;
    cfg.top_k = top_k_;
    cfg.expert_ffn = s.model.expert_ffn_hidden;
  }
  const GptLayout full(cfg);
  full_count_ = static_cast<std::int64_t>(full.count);
  const bool tp_owner = tp_index_ == 0;  // of replicated tensors
  auto vector_piece = [&](std::size_t local, std::size_t from, std::size_t n, bool canonical) {
    add_piece(local, n, from, n, 1, n, canonical);
  };
  if (first_stage_) {
    add_piece(wte_, H, full.wte + static_cast<std::size_t>(v0_) * H, H, static_cast<std::size_t>(vl_), H, true);
    vector_piece(wpe_, full.wpe, static_cast<std::size_t>(t_) * H, tp_owner);
  }
  for (const auto& [l, lp] : layer_params_) {
    const auto& f = full.layers[static_cast<std::size_t>(l)];
    const std::size_t h0 = static_cast<std::size_t>(tp_index_) * CL;  // first q/k/v column of this rank
    const std::size_t f0 = static_cast<std::size_t>(tp_index_) * FL;
    vector_piece(lp.ln1w, f.ln1w, H, tp_owner);
    vector_piece(lp.ln1b, f.ln1b, H, tp_owner);
    for (std::size_t part = 0; part < 3; ++part) {
      add_piece(lp.qkvw + part * CL, 3 * CL, f.qkvw + part * H + h0, 3 * H, H, CL, true);
      vector_piece(lp.qkvb + part * CL, f.qkvb + part * H + h0, CL, true);
    }
    add_piece(lp.projw, H, f.projw + h0 * H, H, CL, H, true);
    vector_piece(lp.projb, f.projb, H, tp_owner);
    vector_piece(lp.ln2w, f.ln2w, H, tp_owner);
    vector_piece(lp.ln2b, f.ln2b, H, tp_owner);
    if (moe_) {  // the router whole; each expert held (experts / ep of them) split over tp as the dense MLP is
      const auto E = static_cast<std::size_t>(experts_);
      const std::size_t F = FL * static_cast<std::size_t>(tp_);
      vector_piece(lp.router, f.router, H * E, tp_owner);
      for (int j = 0; j < held_; ++j) {
        const ExpertOffsets x = expert(l, j);
        const std::size_t e = static_cast<std::size_t>(ep_index_ * held_ + j) * f.expert_stride;  // in the full model
        add_piece(x.fcw, FL, f.fcw + e + f0, F, H, FL, true, ep_ > 1);
        add_piece(x.fcb, FL, f.fcb + e + f0, FL, 1, FL, true, ep_ > 1);
        add_piece(x.projw, H, f.fcprojw + e + f0 * H, H, FL, H, true, ep_ > 1);
        add_piece(x.projb, H, f.fcprojb + e, H, 1, H, tp_owner, ep_ > 1);
      }
      continue;
    }
    add_piece(lp.fcw, FL, f.fcw + f0, 4 * H, H, FL, true);
    vector_piece(lp.fcb, f.fcb + f0, FL, true);
    add_piece(lp.fcprojw, H, f.fcprojw + f0 * H, H, FL, H, true);
    vector_piece(lp.fcprojb, f.fcprojb, H, tp_owner);
  }
  if (last_stage_) {
    vector_piece(lnfw_, full.lnfw, H, tp_owner);
    vector_piece(lnfb_, full.lnfb, H, tp_owner);
    // The head's own copy of the slice (pp > 1) is the first stage's, reported there.
    if (pp_ > 1) add_piece(head_, H, full.wte + static_cast<std::size_t>(v0_) * H, H, static_cast<std::size_t>(vl_), H, false);
  }

  const GptInitialValues initial(cfg, seed_);
  init_parameters([&initial](std::size_t i) { return static_cast<float>(initial(i)); });
}

GptShard::Acts& GptShard::acts(int layer, int mb) {
  Acts& a = acts_[{layer, mb}];
  if (a.packed) unpack(a);
  return a;
}

void GptShard::pack(Acts& a) {
  if (!pack16_ || a.packed) return;
  for (Buffer Acts::*m : stored16) {
    Buffer& b = a.*m;
    if (b.empty()) continue;
    Buffer h = dev_.allocate(b.floats() * sizeof(std::uint16_t));
    dev_.pack_16(storage_, h.u16(), b.f(), static_cast<std::int64_t>(b.floats()));
    b = std::move(h);
  }
  a.packed = true;
}

void GptShard::unpack(Acts& a) {
  a.packed = false;
  for (Buffer Acts::*m : stored16) {
    Buffer& h = a.*m;
    if (h.empty()) continue;
    const std::size_t count = h.bytes() / sizeof(std::uint16_t);
    Buffer b = dev_.allocate_floats(count);
    dev_.unpack_16(storage_, b.f(), h.u16(), static_cast<std::int64_t>(count));
    h = std::move(b);
  }
}

// --- layers -------------------------------------------------------------------------------------

void GptShard::attention_core_forward(Acts& a) {
  const auto T = static_cast<std::int64_t>(t_);
  const int hl = heads_ / tp_;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d_));
  need(a.atty, static_cast<std::size_t>(n_) * cl_);
  if (flash_) {  // no t x t tensor: the rows' log-sum-exp for the backward
    need(a.lse, static_cast<std::size_t>(b_) * hl * t_);
    dev_.flash_attention_forward(a.atty.f(), a.lse.f(), a.qkv.f(), b_, t_, hl, d_);
    round(a.atty.f(), a.atty.floats());
    return;
  }
  need(a.att, static_cast<std::size_t>(b_) * hl * t_ * t_);
  for (int bi = 0; bi < b_; ++bi) {
    const float* q = a.qkv.f() + bi * T * 3 * cl_;
    float* att = a.att.f() + bi * hl * T * T;
    // scores = Q K^T per head, then the causal softmax in place
    dev_.gemm_batched(false, true, t_, t_, d_, 1.0F, q, 3 * cl_, d_, q + cl_, 3 * cl_, d_, 0.0F, att, t_, T * T, hl);
    dev_.causal_softmax_forward(att, att, hl, t_, scale);
    round(att, static_cast<std::size_t>(hl * T * T));
    dev_.gemm_batched(false, false, t_, d_, t_, 1.0F, att, t_, T * T, q + 2 * cl_, 3 * cl_, d_, 0.0F,
                      a.atty.f() + bi * T * cl_, cl_, d_, hl);
  }
  round(a.atty.f(), a.atty.floats());
}

void GptShard::layer_forward(int layer, int mb, ComputeWhat part, bool recompute) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  if (part == ComputeWhat::layer || part == ComputeWhat::layer_attention) {
    qkv_forward(layer, mb);
    attention_core_forward(a);
    // Selective recompute keeps Q, K, V and the attention output, not the s x s scores.
    if (recompute_ == scenario::Recompute::selective) a.att = Buffer();
    projection_forward(layer, mb, part == ComputeWhat::layer || tp_ == 1);
  }
  if (part == ComputeWhat::layer || part == ComputeWhat::layer_mlp) {
    if (!sp_) {
      need(a.ln2, N * H);
      need(a.mean2, N);
      need(a.rstd2, N);
      dev_.layer_norm_forward(a.ln2.f(), a.mean2.f(), a.rstd2.f(), a.x1.f(), w(p.ln2w), w(p.ln2b), n_, h_);
      round(a.ln2.f(), N * H);
    }
    if (moe_) {
      moe_forward(layer, mb);
      finish_mlp_forward(layer, mb, recompute, a.part.f());
      return;
    }
    need(a.fch, N * fl_);
    need(a.fcg, N * fl_);
    dev_.gemm(false, false, n_, fl_, h_, 1.0F, fp8_in(a.ln2.f(), n_, h_, false, 0, p.fcw), h_,
              fp8_in(w(p.fcw), h_, fl_, false, 1, p.fcw), fl_, 0.0F, a.fch.f(), fl_);
    dev_.bias_gelu_forward(a.fch.f(), a.fcg.f(), w(p.fcb), n_, fl_, storage_);
    dev_.gemm(false, false, n_, h_, fl_, 1.0F, fp8_in(a.fcg.f(), n_, fl_, false, 0, p.fcprojw), fl_,
              fp8_in(w(p.fcprojw), fl_, h_, false, 1, p.fcprojw), h_, 0.0F, a.part.f(), h_);
    if (part == ComputeWhat::layer || tp_ == 1) finish_mlp_forward(layer, mb, recompute, a.part.f() + own_rows());
  }
}

void GptShard::qkv_forward(int layer, int mb) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  need(a.qkv, N * 3 * cl_);
  need(a.part, N * H);
  if (!sp_) {  // under SP the norm ran on each rank's rows before the gather (gather_input)
    need(a.ln1, N * H);
    need(a.mean1, N);
    need(a.rstd1, N);
    dev_.layer_norm_forward(a.ln1.f(), a.mean1.f(), a.rstd1.f(), a.x.f(), w(p.ln1w), w(p.ln1b), n_, h_);
    round(a.ln1.f(), N * H);
  }
  dev_.gemm(false, false, n_, 3 * cl_, h_, 1.0F, fp8_in(a.ln1.f(), n_, h_, false, 0, p.qkvw), h_,
            fp8_in(w(p.qkvw), h_, 3 * cl_, false, 1, p.qkvw), 3 * cl_, 0.0F, a.qkv.f(), 3 * cl_);
  dev_.add_bias(a.qkv.f(), w(p.qkvb), n_, 3 * cl_);
  round(a.qkv.f(), a.qkv.floats());
}

void GptShard::projection_forward(int layer, int mb, bool finish) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  dev_.gemm(false, false, n_, h_, cl_, 1.0F, fp8_in(a.atty.f(), n_, cl_, false, 0, p.projw), cl_,
            fp8_in(w(p.projw), cl_, h_, false, 1, p.projw), h_, 0.0F, a.part.f(), h_);
  if (finish) finish_attention_forward(layer, mb, a.part.f() + own_rows());
}

void GptShard::projection_backward(int layer, int mb, float* datty) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const float* dx1 = sp_ ? dfull_.f() : a.dx1.f();
  need(a.part, static_cast<std::size_t>(n_) * h_);
  dev_.bias_backward(g(p.projb), dx1 + own_rows(), ns_, h_);
  dev_.gemm(true, false, cl_, h_, n_, 1.0F, fp8_in(a.atty.f(), cl_, n_, false, 0, p.projw), cl_, fp8_in(dx1, n_, h_, true, 1, p.projw),
            h_, 1.0F, g(p.projw), h_);
  dev_.gemm(false, true, n_, cl_, h_, 1.0F, fp8_in(dx1, n_, h_, true, 0, p.projw), h_, fp8_in(w(p.projw), h_, cl_, false, 1, p.projw), h_,
            0.0F, datty, cl_);
}

void GptShard::qkv_backward(int layer, int mb, const float* dqkv, bool finish) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  dev_.gemm(true, false, h_, 3 * cl_, n_, 1.0F, fp8_in(a.ln1.f(), h_, n_, false, 0, p.qkvw), h_,
            fp8_in(dqkv, n_, 3 * cl_, true, 1, p.qkvw), 3 * cl_, 1.0F, g(p.qkvw), 3 * cl_);
  dev_.bias_backward(g(p.qkvb), dqkv, n_, 3 * cl_);
  dev_.gemm(false, true, n_, h_, 3 * cl_, 1.0F, fp8_in(dqkv, n_, 3 * cl_, true, 0, p.qkvw), 3 * cl_,
            fp8_in(w(p.qkvw), 3 * cl_, h_, false, 1, p.qkvw), 3 * cl_, 0.0F, a.part.f(), h_);
  if (finish) finish_attention_backward(layer, mb);
}

void GptShard::finish_attention_forward(int layer, int mb, const float* sum) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  // This rank's rows (all of them without SP) of the summed projection.
  need(a.x1, static_cast<std::size_t>(ns_) * h_);
  dev_.add(a.x1.f(), a.x.f(), sum, static_cast<std::int64_t>(ns_) * h_);
  dev_.add_bias(a.x1.f(), w(p.projb), ns_, h_);
  round(a.x1.f(), a.x1.floats());
}

void GptShard::finish_mlp_forward(int layer, int mb, bool recompute, const float* sum) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  Buffer& out = need(acts(layer + 1, mb).x, static_cast<std::size_t>(ns_) * h_);
  dev_.add(out.f(), a.x1.f(), sum, static_cast<std::int64_t>(ns_) * h_);
  if (!moe_) dev_.add_bias(out.f(), w(p.fcprojb), ns_, h_);  // the experts add their own
  round(out.f(), out.floats());
  // The partial sums are scratch (Megatron keeps none between passes): backward takes its
  // own, so a layer's stored activations are those memory.hpp counts.
  a.part = Buffer();
  // Full recompute keeps only the layer's input until its backward runs the forward again.
  if (recompute_ == scenario::Recompute::full && !recompute) {
    Buffer x = std::move(a.x);
    a = Acts{};
    a.x = std::move(x);
  }
  // What stays until the backward, in the storage type (a recompute's is used at once).
  if (!recompute) pack(a);
}

void GptShard::recompute_attention_core(int layer, int mb) { attention_core_forward(acts(layer, mb)); }

void GptShard::layer_backward(int layer, int mb, ComputeWhat part) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const auto N = static_cast<std::size_t>(n_);
  if (part == ComputeWhat::layer || part == ComputeWhat::layer_mlp) {
    // The output's gradient, every row (under SP gathered from the ranks' blocks).
    const float* dy = sp_ ? dfull_.f() : dx_.at({layer + 1, mb}).f();
    need(a.part, N * static_cast<std::size_t>(h_));
    if (moe_) {
      moe_backward(layer, mb, dy);
      finish_mlp_backward(layer, mb);  // tp 1
    }
  }
  if (!moe_ && (part == ComputeWhat::layer || part == ComputeWhat::layer_mlp)) {
    const float* dy = sp_ ? dfull_.f() : dx_.at({layer + 1, mb}).f();
    need(a.part, N * static_cast<std::size_t>(h_));
    need(scratch_a_, N * std::max<std::size_t>(fl_, 3 * cl_));
    need(scratch_b_, N * std::max<std::size_t>(fl_, 3 * cl_));
    float* dfcg = scratch_a_.f();
    float* dfch = scratch_b_.f();
    dev_.bias_backward(g(p.fcprojb), dy + own_rows(), ns_, h_);  // SP: this rank's rows (summed later)
    dev_.gemm(true, false, fl_, h_, n_, 1.0F, fp8_in(a.fcg.f(), fl_, n_, false, 0, p.fcprojw), fl_, fp8_in(dy, n_, h_, true, 1, p.fcprojw),
              h_, 1.0F, g(p.fcprojw), h_);
    dev_.gemm(false, true, n_, fl_, h_, 1.0F, fp8_in(dy, n_, h_, true, 0, p.fcprojw), h_, fp8_in(w(p.fcprojw), h_, fl_, false, 1, p.fcprojw),
              h_, 0.0F, dfcg, fl_);
    dev_.zero(dfch, static_cast<std::int64_t>(N * fl_));
    dev_.gelu_backward(dfch, a.fch.f(), dfcg, static_cast<std::int64_t>(N * fl_));
    dev_.gemm(true, false, h_, fl_, n_, 1.0F, fp8_in(a.ln2.f(), h_, n_, false, 0, p.fcw), h_, fp8_in(dfch, n_, fl_, true, 1, p.fcw),
              fl_, 1.0F, g(p.fcw), fl_);
    dev_.bias_backward(g(p.fcb), dfch, n_, fl_);
    dev_.gemm(false, true, n_, h_, fl_, 1.0F, fp8_in(dfch, n_, fl_, true, 0, p.fcw), fl_, fp8_in(w(p.fcw), fl_, h_, false, 1, p.fcw),
              fl_, 0.0F, a.part.f(), h_);
    if (part == ComputeWhat::layer || tp_ == 1) finish_mlp_backward(layer, mb);
  }
  if (part == ComputeWhat::layer || part == ComputeWhat::layer_attention) {
    need(scratch_a_, N * std::max<std::size_t>(fl_, 3 * cl_));
    need(scratch_b_, N * std::max<std::size_t>(fl_, 3 * cl_));
    float* datty = scratch_a_.f();
    float* dqkv = scratch_b_.f();
    projection_backward(layer, mb, datty);
    attention_core_backward(a, datty, dqkv);
    qkv_backward(layer, mb, dqkv, part == ComputeWhat::layer || tp_ == 1);
  }
}

// The attention core's backward: dQ, dK, dV (into dqkv) from the output's gradient datty.
void GptShard::attention_core_backward(Acts& a, const float* datty, float* dqkv) {
  const auto T = static_cast<std::int64_t>(t_);
  const int hl = heads_ / tp_;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d_));
  if (flash_) dev_.flash_attention_backward(dqkv, datty, a.atty.f(), a.qkv.f(), a.lse.f(), b_, t_, hl, d_);
  const Buffer& datt = flash_ ? scratch_att_ : need(scratch_att_, static_cast<std::size_t>(hl) * t_ * t_);
  for (int bi = 0; bi < b_ && !flash_; ++bi) {
    const float* q = a.qkv.f() + bi * T * 3 * cl_;
    const float* att = a.att.f() + bi * hl * T * T;
    const float* dout = datty + bi * T * cl_;
    float* dq = dqkv + bi * T * 3 * cl_;
    // dP = dO V^T; dV = P^T dO; dS = softmax backward; dQ = dS K; dK = dS^T Q
    dev_.gemm_batched(false, true, t_, t_, d_, 1.0F, dout, cl_, d_, q + 2 * cl_, 3 * cl_, d_, 0.0F, datt.f(), t_,
                      T * T, hl);
    dev_.gemm_batched(true, false, t_, d_, t_, 1.0F, att, t_, T * T, dout, cl_, d_, 0.0F, dq + 2 * cl_, 3 * cl_, d_,
                      hl);
    dev_.causal_softmax_backward(datt.f(), att, datt.f(), hl, t_, scale);
    dev_.gemm_batched(false, false, t_, d_, t_, 1.0F, datt.f(), t_, T * T, q + cl_, 3 * cl_, d_, 0.0F, dq, 3 * cl_,
                      d_, hl);
    dev_.gemm_batched(true, false, t_, d_, t_, 1.0F, datt.f(), t_, T * T, q, 3 * cl_, d_, 0.0F, dq + cl_, 3 * cl_,
                      d_, hl);
  }
}

void GptShard::finish_mlp_backward(int layer, int mb) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const Buffer& dy = dx_.at({layer + 1, mb});
  need(a.dx1, static_cast<std::size_t>(ns_) * h_);
  dev_.copy(a.dx1.f(), dy.f(), static_cast<std::int64_t>(ns_) * h_);
  dev_.layer_norm_backward(a.dx1.f(), g(p.ln2w), g(p.ln2b), a.part.f() + own_rows(), a.x1.f(), a.mean2.f(),
                           a.rstd2.f(), w(p.ln2w), ns_, h_);
}

void GptShard::finish_attention_backward(int layer, int mb) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  Buffer& dx = dx_[{layer, mb}];
  need(dx, static_cast<std::size_t>(ns_) * h_);
  dev_.copy(dx.f(), a.dx1.f(), static_cast<std::int64_t>(ns_) * h_);
  dev_.layer_norm_backward(dx.f(), g(p.ln1w), g(p.ln1b), a.part.f() + own_rows(), a.x.f(), a.mean1.f(), a.rstd1.f(),
                           w(p.ln1w), ns_, h_);
  round(dx.f(), static_cast<std::size_t>(ns_) * h_);  // the gradient between layers, stored in 16 bits
  // The layer is done with: its activations, the gradient it consumed, and the activation
  // that left the chunk after it (if it was sent on).
  acts_.erase({layer, mb});
  dx_.erase({layer + 1, mb});
  acts_.erase({layer + 1, mb});
}

}  // namespace parasim::exec
