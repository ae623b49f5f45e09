// Tensor-parallel communication overlap on the executor: the pieces a layer half is split
// into (workload/kernels.hpp, OverlapKernels; program/compile_layers.cpp emits them with their
// ring transfers and reduce-scatters), on the buffers of the unsplit half, so that the
// pieces together compute exactly what layer_forward / layer_backward do under sequence
// parallelism.
//
// The ring: at step j rank i holds sequence block (i - j) mod tp of the gathered input (the
// layer norm's output forward, the output's gradient backward), in its place in the full
// buffer, so the blocks gather there as the ring turns. Forward, the row GEMM's block j
// computes rows j·sub .. (j+1)·sub of every rank's block (sub = rows per rank / splits),
// packed rank by rank so that the block's reduce-scatter leaves each rank its own rows.
#include <algorithm>
#include <stdexcept>

#include "exec/gpt_shard.hpp"

namespace parasim::exec {

using program::Category;
using program::ComputeWhat;
using program::LayerPiece;

namespace {

std::size_t block_of(int tp_index, int step, int tp) { return static_cast<std::size_t>(((tp_index - step) % tp + tp) % tp); }

}  // namespace

void GptShard::layer_piece(const program::Op& op) {
  if (moe_ && op.what == ComputeWhat::layer_mlp) {
    moe_piece(op);
  } else if (cp_ > 1 && op.what == ComputeWhat::layer_attention) {
    context_piece(op);
  } else if (op.what == ComputeWhat::layer_attention) {
    attention_piece(op);
  } else {
    mlp_piece(op);
  }
}

Shard::View GptShard::ring_block(const program::Op& t) {
  if (t.category == Category::cp_comm) return context_block(t);
  const int sender = t.kind == program::OpKind::send ? tp_index_ : (tp_index_ + tp_ - 1) % tp_;
  const std::size_t rows = static_cast<std::size_t>(ns_) * static_cast<std::size_t>(h_);
  float* base = nullptr;
  if (t.pass == Category::backward) {
    base = dfull_.f();
  } else {
    Acts& a = acts(t.layer, t.micro_batch);
    base = (t.what == ComputeWhat::layer_attention ? a.ln1 : a.ln2).f();
  }
  return {base + block_of(sender, t.step, tp_) * rows, static_cast<std::int64_t>(rows)};
}

// What both halves' first piece does: its input gathered (forward: the layer norm of this
// rank's rows into its block; backward: this rank's block of the output's gradient, see
// gather_input), and the buffers the half writes.
void GptShard::prepare_piece(const program::Op& op) {
  const auto N = static_cast<std::size_t>(n_);
  const bool backward = op.category == Category::backward;
  program::Op gather = op;
  gather.pass = backward ? Category::backward : Category::forward;
  gather_input(gather);
  need(acts(op.layer, op.micro_batch).part, N * static_cast<std::size_t>(h_));
  if (backward) {
    const std::size_t widest = std::max<std::size_t>(fl_, 3 * static_cast<std::size_t>(cl_));
    need(scratch_a_, N * widest);
    need(scratch_b_, N * widest);
  }
}

// A column piece's first row: its block's, (tp index - step) mod tp.
std::size_t GptShard::column_row(const program::Op& op) const {
  return op.piece == LayerPiece::column ? block_of(tp_index_, op.step, tp_) * static_cast<std::size_t>(ns_) : 0;
}

void GptShard::attention_piece(const program::Op& op) {
  const LayerParams& p = layer_params_.at(op.layer);
  Acts& a = acts(op.layer, op.micro_batch);
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  const auto Q = static_cast<std::size_t>(3 * cl_);
  const bool backward = op.category == Category::backward;
  const std::size_t r = column_row(op);
  float* datty = scratch_a_.f();
  float* dqkv = scratch_b_.f();
  switch (op.piece) {
    case LayerPiece::prepare:
      prepare_piece(op);
      if (!backward) need(a.qkv, N * Q);
      return;
    case LayerPiece::column:
      if (backward) {
        dev_.gemm(false, true, ns_, cl_, h_, 1.0F, fp8_in(dfull_.f() + r * H, ns_, h_, true, 0, p.projw), h_,
                  fp8_in(w(p.projw), h_, cl_, false, 1, p.projw), h_, 0.0F, datty + r * cl_, cl_);
      } else {
        float* qkv = a.qkv.f() + r * Q;
        dev_.gemm(false, false, ns_, 3 * cl_, h_, 1.0F, fp8_in(a.ln1.f() + r * H, ns_, h_, false, 0, p.qkvw), h_,
                  fp8_in(w(p.qkvw), h_, 3 * cl_, false, 1, p.qkvw), 3 * cl_, 0.0F, qkv, 3 * cl_);
        dev_.add_bias(qkv, w(p.qkvb), ns_, 3 * cl_);
        round(qkv, static_cast<std::size_t>(ns_) * Q);
      }
      return;
    case LayerPiece::middle:
      if (backward) {
        dev_.bias_backward(g(p.projb), dfull_.f() + own_rows(), ns_, h_);
        dev_.gemm(true, false, cl_, h_, n_, 1.0F, fp8_in(a.atty.f(), cl_, n_, false, 0, p.projw), cl_,
                  fp8_in(dfull_.f(), n_, h_, true, 1, p.projw), h_, 1.0F, g(p.projw), h_);
        attention_core_backward(a, datty, dqkv);
      } else {
        attention_core_forward(a);
        if (recompute_ == scenario::Recompute::selective) a.att = Buffer();
      }
      return;
    case LayerPiece::row:
      if (backward) {
        dev_.gemm(false, true, n_, h_, 3 * cl_, 1.0F, fp8_in(dqkv, n_, 3 * cl_, true, 0, p.qkvw), 3 * cl_,
                  fp8_in(w(p.qkvw), 3 * cl_, h_, false, 1, p.qkvw), 3 * cl_, 0.0F, a.part.f(), h_);
      } else {
        row_block(op, a.atty.f(), cl_, p.projw);
      }
      return;
    case LayerPiece::wgrad:
      dev_.gemm(true, false, h_, 3 * cl_, n_, 1.0F, fp8_in(a.ln1.f(), h_, n_, false, 0, p.qkvw), h_,
                fp8_in(dqkv, n_, 3 * cl_, true, 1, p.qkvw), 3 * cl_, 1.0F, g(p.qkvw), 3 * cl_);
      dev_.bias_backward(g(p.qkvb), dqkv, n_, 3 * cl_);
      return;
    case LayerPiece::whole:
    case LayerPiece::block:
    case LayerPiece::finish:
    case LayerPiece::merge:
    case LayerPiece::experts:
    case LayerPiece::shared: break;
  }
  throw std::logic_error("not a piece of a layer half");
}

void GptShard::mlp_piece(const program::Op& op) {
  const LayerParams& p = layer_params_.at(op.layer);
  Acts& a = acts(op.layer, op.micro_batch);
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const bool backward = op.category == Category::backward;
  const std::size_t r = column_row(op);
  float* dfcg = scratch_a_.f();
  float* dfch = scratch_b_.f();
  switch (op.piece) {
    case LayerPiece::prepare:
      prepare_piece(op);
      if (!backward) {
        need(a.fch, N * F);
        need(a.fcg, N * F);
      }
      return;
    case LayerPiece::column:
      if (backward) {
        dev_.gemm(false, true, ns_, fl_, h_, 1.0F, fp8_in(dfull_.f() + r * H, ns_, h_, true, 0, p.fcprojw), h_,
                  fp8_in(w(p.fcprojw), h_, fl_, false, 1, p.fcprojw), h_, 0.0F, dfcg + r * F, fl_);
      } else {
        dev_.gemm(false, false, ns_, fl_, h_, 1.0F, fp8_in(a.ln2.f() + r * H, ns_, h_, false, 0, p.fcw), h_,
                  fp8_in(w(p.fcw), h_, fl_, false, 1, p.fcw), fl_, 0.0F, a.fch.f() + r * F, fl_);
      }
      return;
    case LayerPiece::middle:
      if (backward) {
        const float* dy = dfull_.f();
        dev_.bias_backward(g(p.fcprojb), dy + own_rows(), ns_, h_);
        dev_.gemm(true, false, fl_, h_, n_, 1.0F, fp8_in(a.fcg.f(), fl_, n_, false, 0, p.fcprojw), fl_,
                  fp8_in(dy, n_, h_, true, 1, p.fcprojw), h_, 1.0F, g(p.fcprojw), h_);
        dev_.zero(dfch, static_cast<std::int64_t>(N * F));
        dev_.gelu_backward(dfch, a.fch.f(), dfcg, static_cast<std::int64_t>(N * F));
      } else {
        dev_.bias_gelu_forward(a.fch.f(), a.fcg.f(), w(p.fcb), n_, fl_, storage_);
      }
      return;
    case LayerPiece::row:
      if (backward) {
        dev_.gemm(false, true, n_, h_, fl_, 1.0F, fp8_in(dfch, n_, fl_, true, 0, p.fcw), fl_,
                  fp8_in(w(p.fcw), fl_, h_, false, 1, p.fcw), fl_, 0.0F, a.part.f(), h_);
      } else {
        row_block(op, a.fcg.f(), fl_, p.fcprojw);
      }
      return;
    case LayerPiece::wgrad:
      dev_.gemm(true, false, h_, fl_, n_, 1.0F, fp8_in(a.ln2.f(), h_, n_, false, 0, p.fcw), h_, fp8_in(dfch, n_, fl_, true, 1, p.fcw),
                fl_, 1.0F, g(p.fcw), fl_);
      dev_.bias_backward(g(p.fcb), dfch, n_, fl_);
      return;
    case LayerPiece::whole:
    case LayerPiece::block:
    case LayerPiece::finish:
    case LayerPiece::merge:
    case LayerPiece::experts:
    case LayerPiece::shared: break;
  }
  throw std::logic_error("not a piece of a layer half");
}

// Block j of the forward's row GEMM: `in` (n x k) times the weight (k x h), the rows
// j·sub .. (j+1)·sub of every rank's block, packed rank by rank at the block's place in
// a.part (its reduce-scatter's buffer).
void GptShard::row_block(const program::Op& op, const float* in, int k, std::size_t weight) {
  Acts& a = acts(op.layer, op.micro_batch);
  const auto sub = static_cast<std::size_t>(ns_ / splits_);
  const auto j = static_cast<std::size_t>(op.step);
  const auto K = static_cast<std::size_t>(k);
  const auto H = static_cast<std::size_t>(h_);
  const float* x = fp8_in(in, n_, k, false, 0, weight);  // fp8: the whole operand's scale, as unsplit
  dev_.gemm_batched(false, false, static_cast<int>(sub), h_, k, 1.0F, x + j * sub * K, k,
                    static_cast<std::int64_t>(ns_) * k, fp8_in(w(weight), k, h_, false, 1, weight), h_, 0, 0.0F,
                    a.part.f() + j * tp_ * sub * H, h_, static_cast<std::int64_t>(sub * H), tp_);
}

Shard::View GptShard::block_sum_buffer(const program::Op& c) {
  const auto sub = static_cast<std::size_t>(ns_ / splits_);
  const auto rows = static_cast<std::size_t>(tp_) * sub;
  return {acts(c.layer, c.micro_batch).part.f() + static_cast<std::size_t>(c.step) * rows * static_cast<std::size_t>(h_),
          static_cast<std::int64_t>(rows * static_cast<std::size_t>(h_))};
}

// A block's sum: this rank's rows of it into their place among its own rows; after the
// last block, what follows the sum.
void GptShard::block_sum_finish(const program::Op& c) {
  const auto sub = static_cast<std::size_t>(ns_ / splits_);
  const auto H = static_cast<std::size_t>(h_);
  const auto j = static_cast<std::size_t>(c.step);
  need(summed_, static_cast<std::size_t>(ns_) * H);
  const View block = block_sum_buffer(c);
  dev_.copy(summed_.f() + j * sub * H, block.data + static_cast<std::size_t>(tp_index_) * sub * H,
            static_cast<std::int64_t>(sub * H));
  if (c.step + 1 < splits_) return;
  if (c.what == ComputeWhat::layer_attention) {
    finish_attention_forward(c.layer, c.micro_batch, summed_.f());
  } else {
    finish_mlp_forward(c.layer, c.micro_batch, c.pass == Category::recompute, summed_.f());
  }
}

}  // namespace parasim::exec
