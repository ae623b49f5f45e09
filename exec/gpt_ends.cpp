// The decoder's ends on a rank: its part of the batch (under context parallelism its
// positions of each sequence), the vocabulary-parallel embedding with the position
// embedding added where the rank's positions are, and the LM head with its
// vocabulary-parallel cross-entropy.
#include "exec/gpt_shard.hpp"

namespace parasim::exec {

// --- the batch -----------------------------------------------------------------------------------

void GptShard::load_batch(std::int64_t step) {
  if (!first_stage_ && !last_stage_) return;
  const Batch batch = synthetic_batch(vocab_, global_batch_, t_, seed_, step);
  tokens_.resize(static_cast<std::size_t>(micro_batches_));
  targets_.resize(static_cast<std::size_t>(micro_batches_));
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n_));
  std::vector<std::int32_t> targets(tokens.size());
  const std::vector<int>& mine = positions_[static_cast<std::size_t>(cp_index_)];
  for (int mb = 0; mb < micro_batches_; ++mb) {
    const auto row = static_cast<std::size_t>((dp_index_ * micro_batches_ + mb) * b_) * static_cast<std::size_t>(t_);
    const auto bytes = static_cast<std::size_t>(n_) * sizeof(std::int32_t);
    // This rank's positions of each sequence (all of them without context parallelism).
    for (int bi = 0; bi < b_; ++bi) {
      for (int i = 0; i < tl_; ++i) {
        const std::size_t from = row + static_cast<std::size_t>(bi) * t_ + static_cast<std::size_t>(mine[static_cast<std::size_t>(i)]);
        tokens[static_cast<std::size_t>(bi * tl_ + i)] = batch.tokens[from];
        targets[static_cast<std::size_t>(bi * tl_ + i)] = batch.targets[from];
      }
    }
    auto& tok = tokens_[static_cast<std::size_t>(mb)];
    auto& tgt = targets_[static_cast<std::size_t>(mb)];
    if (tok.empty()) tok = dev_.allocate(bytes);
    if (tgt.empty()) tgt = dev_.allocate(bytes);
    dev_.upload(tok.i32(), tokens.data(), bytes);
    dev_.upload(tgt.i32(), targets.data(), bytes);
  }
}

// --- embedding --------------------------------------------------------------------------------

void GptShard::embedding_forward(int mb) {
  Acts& a = acts(0, mb);
  if (sp_) {
    // The slice's rows, reduce-scattered by sequence; positions added to the rank's block.
    need(a.emb, static_cast<std::size_t>(n_) * h_);
    dev_.embedding_forward(a.emb.f(), tokens_[static_cast<std::size_t>(mb)].i32(), w(wte_), nullptr, b_, tl_, h_, v0_,
                           vl_);
    return;
  }
  need(a.x, static_cast<std::size_t>(n_) * h_);
  // With tp > 1 the slices' rows are summed first and the positions added after (tp_finish);
  // under context parallelism the rank's positions are not 0..tl-1 (add_positions).
  const bool whole = tp_ == 1 && cp_ == 1;
  dev_.embedding_forward(a.x.f(), tokens_[static_cast<std::size_t>(mb)].i32(), w(wte_), whole ? w(wpe_) : nullptr,
                         b_, tl_, h_, v0_, vl_);
  if (tp_ == 1 && cp_ > 1) add_positions(a.x.f(), 0, n_);
  if (tp_ == 1) round(a.x.f(), a.x.floats());
}

void GptShard::embedding_backward(int mb) {
  const float* dx = sp_ ? dfull_.f() : dx_.at({0, mb}).f();  // SP: gathered from every rank
  if (cp_ == 1) {
    dev_.embedding_backward(g(wte_), g(wpe_), dx, tokens_[static_cast<std::size_t>(mb)].i32(), b_, t_, h_, v0_, vl_);
  } else {  // the positions' gradients row by row, where the rank's positions are
    Buffer local = dev_.allocate_floats(static_cast<std::size_t>(tl_) * h_);
    dev_.zero(local.f(), static_cast<std::int64_t>(tl_) * h_);
    dev_.embedding_backward(g(wte_), local.f(), dx, tokens_[static_cast<std::size_t>(mb)].i32(), b_, tl_, h_, v0_, vl_);
    position_grads(local.f());
  }
  dx_.erase({0, mb});
}

// The embedding's rows after the tp sum (tp_finish): the positions added.
void GptShard::finish_embedding_forward(int mb) {
  Acts& a = acts(0, mb);
  if (!sp_) {
    add_positions(a.x.f(), 0, n_);
    round(a.x.f(), a.x.floats());
    return;
  }
  // This rank's rows of the summed embedding, plus the position of each.
  need(a.x, static_cast<std::size_t>(ns_) * h_);
  dev_.copy(a.x.f(), a.emb.f() + own_rows(), static_cast<std::int64_t>(ns_) * h_);
  add_positions(a.x.f(), r0_, ns_);
  round(a.x.f(), a.x.floats());
  a.emb = Buffer();
}

int GptShard::position(int row) const {
  return positions_[static_cast<std::size_t>(cp_index_)][static_cast<std::size_t>(row % tl_)];
}

void GptShard::add_positions(float* x, int r0, int rows) {
  // Runs of rows whose positions follow one another: one add each.
  for (int r = r0; r < r0 + rows;) {
    const int pos = position(r);
    int run = 1;
    while (r + run < r0 + rows && (r + run) % tl_ != 0 && position(r + run) == pos + run) ++run;
    dev_.accumulate(x + static_cast<std::size_t>(r - r0) * h_, w(wpe_) + static_cast<std::size_t>(pos) * h_,
                    static_cast<std::int64_t>(run) * h_);
    r += run;
  }
}

void GptShard::position_grads(const float* dx) {
  // dx: the gradient of each of the tl_ local positions, summed over the micro-batch's sequences.
  for (int r = 0; r < tl_;) {
    const int pos = position(r);
    int run = 1;
    while (r + run < tl_ && position(r + run) == pos + run) ++run;
    dev_.accumulate(g(wpe_) + static_cast<std::size_t>(pos) * h_, dx + static_cast<std::size_t>(r) * h_,
                    static_cast<std::int64_t>(run) * h_);
    r += run;
  }
}

// --- LM head ---------------------------------------------------------------------------------------

void GptShard::head_forward(int mb) {
  Acts& a = acts(layers_, mb);
  const auto N = static_cast<std::size_t>(n_);
  need(a.logits, N * vl_);
  need(a.stats, static_cast<std::size_t>(tp_) * N * 3);
  need(a.part, N * h_);
  if (!sp_) {  // under SP the final norm ran on each rank's rows before the gather
    need(a.lnf, N * h_);
    need(a.meanf, N);
    need(a.rstdf, N);
    dev_.layer_norm_forward(a.lnf.f(), a.meanf.f(), a.rstdf.f(), a.x.f(), w(lnfw_), w(lnfb_), n_, h_);
    round(a.lnf.f(), a.lnf.floats());
  }
  dev_.gemm(false, true, n_, vl_, h_, 1.0F, a.lnf.f(), h_, w(head_), h_, 0.0F, a.logits.f(), vl_);
  round(a.logits.f(), a.logits.floats());
  dev_.cross_entropy_stats(a.stats.f() + static_cast<std::size_t>(tp_index_) * N * 3, a.logits.f(),
                           targets_[static_cast<std::size_t>(mb)].i32(), n_, vl_, v0_);
}

void GptShard::head_backward(int mb) {
  Acts& a = acts(layers_, mb);
  const auto N = static_cast<std::size_t>(n_);
  // The mean over the step's tokens: this micro-batch's n tokens, m micro-batches, dp replicas.
  const float scale = loss_gradient_scale(static_cast<double>(n_) * micro_batches_ * dp_);
  float* dlogits = a.logits.f();  // in place
  dev_.cross_entropy_backward(dlogits, loss_rows(mb, N, tp_index_ == 0), a.logits.f(), a.stats.f(), tp_,
                              targets_[static_cast<std::size_t>(mb)].i32(), n_, vl_, v0_, scale);
  round(dlogits, N * static_cast<std::size_t>(vl_));
  dev_.gemm(false, false, n_, h_, vl_, 1.0F, dlogits, vl_, w(head_), h_, 0.0F, a.part.f(), h_);
  dev_.gemm(true, false, vl_, h_, n_, 1.0F, dlogits, vl_, a.lnf.f(), h_, 1.0F, g(head_), h_);
  if (tp_ == 1) finish_head_backward(mb);
}

void GptShard::finish_head_backward(int mb) {
  Acts& a = acts(layers_, mb);
  Buffer& dx = dx_[{layers_, mb}];
  need(dx, static_cast<std::size_t>(ns_) * h_);
  dev_.zero(dx.f(), static_cast<std::int64_t>(ns_) * h_);
  dev_.layer_norm_backward(dx.f(), g(lnfw_), g(lnfb_), a.part.f() + own_rows(), a.x.f(), a.meanf.f(), a.rstdf.f(),
                           w(lnfw_), ns_, h_);
  acts_.erase({layers_, mb});
}

}  // namespace parasim::exec
