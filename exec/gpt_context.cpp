// Context parallelism on the executor: the attention half's pieces around the cp ring
// (program/compile_layers.cpp, context_half, emits them with the ring's transfers), so that
// together they compute what layer_forward / layer_backward's attention half does, with
// ring attention (exec/model/ring_attention.hpp) in place of the whole sequence's.
//
// The ring's blocks live in ring_, keyed (layer, micro-batch, slot) with the slots of each
// pass (forward, recompute, backward) apart (ring_slot): slot j < cp holds the
// keys and values of step j (of cp rank (i - j) mod cp; j = 0 this rank's own); backward,
// slot cp + j this rank's share of step j's gradients, merged with what came from rank
// i - 1 (slot 2·cp + j - 1, sent at its step j - 1), and slot 3·cp - 1 this rank's own
// gradients come home. A pass's blocks are freed once its finish has run and every send
// from them has completed (a send in flight still reads its buffer).
#include <stdexcept>

#include "exec/gpt_shard.hpp"

namespace parasim::exec {

using program::Category;
using program::LayerPiece;

namespace {

int owner_of(int index, int step, int cp) {
  return ((index - step) % cp + cp) % cp;
}

int pass_of(Category c) { return c == Category::forward ? 0 : c == Category::recompute ? 1 : 2; }

}  // namespace

std::tuple<int, int, int> GptShard::ring_slot(int layer, int mb, program::Category pass, int slot) const {
  return {layer, mb, pass_of(pass) * 3 * cp_ + slot};
}

Shard::View GptShard::context_block(const program::Op& t) {
  const std::size_t kv = static_cast<std::size_t>(n_) * 2 * static_cast<std::size_t>(cl_);
  // Op::step is the sender's step: a send carries that step's block (or gradients), a
  // receive fills the next step's block (or the slot of the gradients rank i - 1 sent).
  const bool send = t.kind == program::OpKind::send;
  const int slot = t.gradient ? (send ? cp_ : 2 * cp_) + t.step : t.step + (send ? 0 : 1);
  if (send) ++ring_sends_[{t.layer, t.micro_batch, pass_of(t.pass)}];
  Buffer& b = need(ring_[ring_slot(t.layer, t.micro_batch, t.pass, slot)], kv);
  return {b.f(), static_cast<std::int64_t>(kv)};
}

void GptShard::ring_sent(const program::Op& send) {
  if (send.category != Category::cp_comm) return;
  const std::tuple<int, int, int> pass{send.layer, send.micro_batch, pass_of(send.pass)};
  if (--ring_sends_.at(pass) == 0 && ring_finished_.erase(pass) > 0) free_ring(send.layer, send.micro_batch, send.pass);
}

void GptShard::release_ring(int layer, int mb, program::Category pass) {
  const std::tuple<int, int, int> key{layer, mb, pass_of(pass)};
  if (ring_sends_[key] > 0) {
    ring_finished_.insert(key);  // freed by the last send's completion
  } else {
    free_ring(layer, mb, pass);
  }
}

void GptShard::free_ring(int layer, int mb, program::Category pass) {
  for (int slot = 0; slot < 3 * cp_; ++slot) ring_.erase(ring_slot(layer, mb, pass, slot));
  ring_sends_.erase({layer, mb, pass_of(pass)});
}

void GptShard::context_piece(const program::Op& op) {
  Acts& a = acts(op.layer, op.micro_batch);
  const auto N = static_cast<std::size_t>(n_);
  const auto CL = static_cast<std::size_t>(cl_);
  const std::size_t kv = N * 2 * CL;
  const int hl = heads_ / tp_;
  const std::span<const int> mine = positions_[static_cast<std::size_t>(cp_index_)];
  const bool backward = op.category == Category::backward;
  if (!backward) {
    switch (op.piece) {
      case LayerPiece::prepare: {  // the layer norm and QKV GEMM, as layer_forward's
        qkv_forward(op.layer, op.micro_batch);
        Buffer& own = need(ring_[ring_slot(op.layer, op.micro_batch, op.category, 0)], kv);
        dev_.kv_pack(own.f(), a.qkv.f(), static_cast<std::int64_t>(N), cl_);
        need(a.atty, N * CL);  // the running output until the finish
        need(a.lse, static_cast<std::size_t>(b_) * hl * tl_);
        need(a.rm, static_cast<std::size_t>(b_) * hl * tl_);
        need(a.rl, static_cast<std::size_t>(b_) * hl * tl_);
        dev_.ring_attention_begin(a.atty.f(), a.rm.f(), a.rl.f(), b_, tl_, hl, d_);
        return;
      }
      case LayerPiece::block: {
        const int owner = owner_of(cp_index_, op.step, cp_);
        const Buffer& block = ring_.at(ring_slot(op.layer, op.micro_batch, op.category, op.step));
        dev_.ring_attention_block(a.atty.f(), a.rm.f(), a.rl.f(), a.qkv.f(), block.f(), mine,
                                  positions_[static_cast<std::size_t>(owner)], b_, hl, d_);
        return;
      }
      case LayerPiece::finish:  // the output normalised, the projection (and without tp what follows its sum)
        dev_.ring_attention_end(a.atty.f(), a.lse.f(), a.atty.f(), a.rm.f(), a.rl.f(), b_, tl_, hl, d_);
        round(a.atty.f(), a.atty.floats());
        a.rm = Buffer();
        a.rl = Buffer();
        release_ring(op.layer, op.micro_batch, op.category);
        projection_forward(op.layer, op.micro_batch, tp_ == 1);
        return;
      default: break;
    }
    throw std::logic_error("not a piece of the attention under context parallelism");
  }
  const std::size_t widest = std::max<std::size_t>(fl_, 3 * CL);
  float* datty = need(scratch_a_, N * widest).f();
  float* dqkv = need(scratch_b_, N * widest).f();
  switch (op.piece) {
    case LayerPiece::prepare: {  // the projection's gradients, as layer_backward's
      projection_backward(op.layer, op.micro_batch, datty);
      dev_.zero(dqkv, static_cast<std::int64_t>(N * 3 * CL));
      // Step 0's block: this rank's own keys and values.
      Buffer& own = need(ring_[ring_slot(op.layer, op.micro_batch, op.category, 0)], kv);
      dev_.kv_pack(own.f(), a.qkv.f(), static_cast<std::int64_t>(N), cl_);
      return;
    }
    case LayerPiece::block: {  // this rank's share of the block's gradients, and of dQ
      const int owner = owner_of(cp_index_, op.step, cp_);
      const Buffer& block = ring_.at(ring_slot(op.layer, op.micro_batch, op.category, op.step));
      Buffer& grads = need(ring_[ring_slot(op.layer, op.micro_batch, op.category, cp_ + op.step)], kv);
      dev_.zero(grads.f(), static_cast<std::int64_t>(kv));
      dev_.ring_attention_block_backward(dqkv, grads.f(), datty, a.atty.f(), a.qkv.f(), block.f(), a.lse.f(), mine,
                                         positions_[static_cast<std::size_t>(owner)], b_, hl, d_);
      return;
    }
    case LayerPiece::merge:  // + the ranks before's shares, sent by rank i - 1 at its previous step
      dev_.accumulate(ring_.at(ring_slot(op.layer, op.micro_batch, op.category, cp_ + op.step)).f(),
                      ring_.at(ring_slot(op.layer, op.micro_batch, op.category, 2 * cp_ + op.step - 1)).f(), static_cast<std::int64_t>(kv));
      return;
    case LayerPiece::finish: {  // this rank's key and value gradients home; the QKV GEMM's gradients
      dev_.kv_unpack_add(dqkv, ring_.at(ring_slot(op.layer, op.micro_batch, op.category, 3 * cp_ - 1)).f(), static_cast<std::int64_t>(N),
                         cl_);
      release_ring(op.layer, op.micro_batch, op.category);
      qkv_backward(op.layer, op.micro_batch, dqkv, tp_ == 1);
      return;
    }
    default: break;
  }
  throw std::logic_error("not a piece of the attention under context parallelism");
}

}  // namespace parasim::exec
