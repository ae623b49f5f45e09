// What the decoder's shard hands its collectives and transfers, and takes back: the
// buffers of its tensor-parallel sums and gathers (sequence parallelism's included) and
// what it does once one completes, its pipeline boundaries, and the tied embedding's
// gradients for the data-parallel reduction.
#include "exec/gpt_shard.hpp"

#include <stdexcept>

namespace parasim::exec {

using program::ComputeWhat;
using program::TpRole;

// --- tensor parallel sums -------------------------------------------------------------------------

Shard::View GptShard::tp_buffer(const program::Op& c) {
  if (c.piece == program::LayerPiece::row && c.step >= 0) return block_sum_buffer(c);
  const int mb = c.micro_batch;
  const std::int64_t rows = static_cast<std::int64_t>(n_) * h_;
  switch (c.tp_role) {
    case TpRole::loss_stats: {
      Acts& a = acts(layers_, mb);
      return {a.stats.f(), static_cast<std::int64_t>(a.stats.floats())};
    }
    case TpRole::replicated_grads: return replicated_grads(true);
    case TpRole::gather_input: return gather_input(c);
    case TpRole::pp_gather: return whole_boundary(c.layer, mb, c.gradient);
    case TpRole::sum:
      switch (c.what) {
        case ComputeWhat::embedding: return {(sp_ ? acts(0, mb).emb : acts(0, mb).x).f(), rows};
        case ComputeWhat::lm_head: return {acts(layers_, mb).part.f(), rows};
        case ComputeWhat::layer_attention:
        case ComputeWhat::layer_mlp: return {acts(c.layer, mb).part.f(), rows};
        default: break;
      }
      break;
    case TpRole::none:
    case TpRole::ring: break;
  }
  throw std::logic_error("a tensor parallel collective this model does not have");
}

// Sequence parallelism: the full input of the op `c` serves, from every rank's block of
// rows. Forward, this rank's block is the layer norm of its rows (run here, as the gather
// is posted); backward, its block of the output's gradient.
Shard::View GptShard::gather_input(const program::Op& c) {
  const int mb = c.micro_batch;
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  const auto NS = static_cast<std::size_t>(ns_);
  if (c.pass == program::Category::backward) {
    const Buffer& own = c.what == ComputeWhat::embedding  ? dx_.at({0, mb})
                        : c.what == ComputeWhat::layer_mlp ? dx_.at({c.layer + 1, mb})
                                                           : acts(c.layer, mb).dx1;
    Buffer& full = need(dfull_, N * H);
    dev_.copy(full.f() + own_rows(), own.f(), static_cast<std::int64_t>(NS * H));
    return {full.f(), static_cast<std::int64_t>(N * H)};
  }
  const bool head = c.what == ComputeWhat::lm_head;
  Acts& a = acts(head ? layers_ : c.layer, mb);
  Buffer* y = &a.lnf;
  Buffer* mean = &a.meanf;
  Buffer* rstd = &a.rstdf;
  const Buffer* x = &a.x;
  std::size_t gamma = lnfw_, beta = lnfb_;
  if (!head) {
    const LayerParams& p = layer_params_.at(c.layer);
    const bool attention = c.what == ComputeWhat::layer_attention;
    y = attention ? &a.ln1 : &a.ln2;
    mean = attention ? &a.mean1 : &a.mean2;
    rstd = attention ? &a.rstd1 : &a.rstd2;
    x = attention ? &a.x : &a.x1;
    gamma = attention ? p.ln1w : p.ln2w;
    beta = attention ? p.ln1b : p.ln2b;
  }
  need(*y, N * H);
  need(*mean, NS);
  need(*rstd, NS);
  float* block = y->f() + own_rows();
  dev_.layer_norm_forward(block, mean->f(), rstd->f(), x->f(), w(gamma), w(beta), ns_, h_);
  round(block, NS * H);
  return {y->f(), static_cast<std::int64_t>(N * H)};
}

// Sequence parallelism: the gradients of the tensors every tp rank holds whole but computed
// on its rows only (two norms and two biases per layer, the final norm), gathered into one
// buffer to be summed over tp (`gather`), or put back once summed.
Shard::View GptShard::replicated_grads(bool gather) {
  // (offset, values): a mixture of experts has the router (its tokens are each rank's rows)
  // where the dense MLP has its second bias (the experts' are summed with their outputs).
  const auto H = static_cast<std::size_t>(h_);
  std::vector<std::pair<std::size_t, std::size_t>> at;
  for (const auto& [l, p] : layer_params_) {
    for (std::size_t o : {p.ln1w, p.ln1b, p.projb, p.ln2w, p.ln2b}) at.emplace_back(o, H);
    at.emplace_back(moe_ ? p.router : p.fcprojb, moe_ ? H * static_cast<std::size_t>(experts_) : H);
  }
  if (last_stage_) at.insert(at.end(), {{lnfw_, H}, {lnfb_, H}});
  std::size_t total = 0;
  for (const auto& [o, n] : at) total += n;
  Buffer& buf = need(replicated_, total);
  std::size_t i = 0;
  for (const auto& [o, n] : at) {
    if (gather) {
      dev_.copy(buf.f() + i, g(o), static_cast<std::int64_t>(n));
    } else {
      dev_.copy(g(o), buf.f() + i, static_cast<std::int64_t>(n));
    }
    i += n;
  }
  return {buf.f(), static_cast<std::int64_t>(total)};
}

void GptShard::tp_finish(const program::Op& c) {
  if (moe_ && c.what == ComputeWhat::layer_mlp) return;  // the experts' gather and sum: its pieces go on
  if (c.piece == program::LayerPiece::row && c.step >= 0) {
    block_sum_finish(c);
    return;
  }
  const int mb = c.micro_batch;
  const bool backward = c.pass == program::Category::backward;
  switch (c.tp_role) {
    case TpRole::loss_stats:  // the gathered statistics are used by the head's backward
    case TpRole::gather_input:
    case TpRole::pp_gather: return;
    case TpRole::replicated_grads: replicated_grads(false); return;
    case TpRole::sum:
      switch (c.what) {
        case ComputeWhat::embedding: finish_embedding_forward(mb); return;
        case ComputeWhat::lm_head: finish_head_backward(mb); return;
        case ComputeWhat::layer_attention:
          if (backward) {
            finish_attention_backward(c.layer, mb);
          } else {
            finish_attention_forward(c.layer, mb, acts(c.layer, mb).part.f() + own_rows());
          }
          return;
        case ComputeWhat::layer_mlp:
          if (backward) {
            finish_mlp_backward(c.layer, mb);
          } else {
            finish_mlp_forward(c.layer, mb, c.pass == program::Category::recompute,
                               acts(c.layer, mb).part.f() + own_rows());
          }
          return;
        default: break;
      }
      break;
    case TpRole::none:
    case TpRole::ring: break;
  }
  throw std::logic_error("a tensor parallel collective this model does not have");
}

// --- pipeline boundaries ---------------------------------------------------------------------------

Shard::View GptShard::whole_boundary(int layer, int mb, bool gradient) {
  // This rank's rows (a sequence block under SP).
  Buffer& b = gradient ? dx_[{layer, mb}] : acts(layer, mb).x;
  need(b, static_cast<std::size_t>(ns_) * h_);
  return {b.f(), static_cast<std::int64_t>(ns_) * h_};
}

Shard::View GptShard::boundary(int layer, int mb, bool gradient) {
  const View whole = whole_boundary(layer, mb, gradient);
  if (!scatter_) return whole;
  const std::int64_t part = whole.count / tp_;  // h is divisible by tp, so n·h is
  return {whole.data + static_cast<std::size_t>(tp_index_) * static_cast<std::size_t>(part), part};
}

void GptShard::release_boundary(int layer, int mb, bool gradient) {
  if (gradient) {
    dx_.erase({layer, mb});
  } else if (auto it = acts_.find({layer, mb}); it != acts_.end()) {
    it->second.x = Buffer();
  }
}

// --- data parallel ----------------------------------------------------------------------------------

Shard::View GptShard::tied_embedding_grads() {
  const std::size_t at = first_stage_ ? wte_ : head_;
  return {grads_.f() + at, static_cast<std::int64_t>(vl_) * h_};
}

}  // namespace parasim::exec
