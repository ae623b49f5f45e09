// A mixture-of-experts MLP: the router's GEMM on the device, the top-k routing on the host
// (exec/model/moe.hpp's, so the shard routes exactly as the reference), each expert's GEMMs
// over the rows routed to it (under fp8 with FP8 operands, each expert a linear layer of
// its own, as Transformer Engine's grouped linear layers; the router stays in 16 bits),
// and the gates' weighted sum; backward the experts' gradients,
// the gates' through a dot product per copy, and the router's. The rows move with the
// Device's copies, so both backends run it.
//
// With every expert on the rank (ep 1) the half is one op. Under expert parallelism it is
// Megatron-Core's all-to-all token dispatcher: each rank routes its own tokens, permutes the
// copies into expert order (each ep member's experts back to back), and the dispatch sends
// every member the rows of its experts, after the counts (Runner::exchange_tokens). The
// member puts the rows it received (member after member) in expert order, runs its experts
// and puts their outputs back in the order received; the combine returns them to their
// tokens' ranks, which weight them by the gates. Backward the same path carries the
// output gradients out and the input gradients back.
#include <algorithm>

#include "exec/gpt_shard.hpp"
#include "exec/model/moe.hpp"

namespace parasim::exec {

using program::Category;
using program::LayerPiece;

GptShard::ExpertOffsets GptShard::expert(int layer, int j) const {
  const LayerParams& p = layer_params_.at(layer);
  const std::size_t at = static_cast<std::size_t>(j) * p.expert_stride;
  return {p.fcw + at, p.fcb + at, p.fcprojw + at, p.fcprojb + at};
}

void GptShard::route(int layer, int mb) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const auto N = static_cast<std::size_t>(ns_);  // this rank's token rows
  const auto E = static_cast<std::size_t>(experts_);
  const auto K = static_cast<std::size_t>(top_k_);
  need(a.router, N * E);
  dev_.gemm(false, false, ns_, experts_, h_, 1.0F, a.ln2.f(), h_, w(p.router), experts_, 0.0F, a.router.f(), experts_);
  std::vector<float> logits(N * E);
  dev_.download(logits.data(), a.router.f(), logits.size() * sizeof(float));
  MoeRoute& r = routes_[{layer, mb}];
  r.expert.assign(N * K, 0);
  r.gate.assign(N * K, 0.0F);
  moe::route(r.expert.data(), r.gate.data(), logits.data(), ns_, experts_, top_k_);
  r.copies.assign(E, {});
  for (std::size_t c = 0; c < N * K; ++c)
    r.copies[static_cast<std::size_t>(r.expert[c])].push_back(static_cast<int>(c));
  r.first.assign(E + 1, 0);
  std::vector<float> pos(N * K);
  for (std::size_t e = 0; e < E; ++e) {
    r.first[e + 1] = r.first[e] + r.copies[e].size();
    for (std::size_t i = 0; i < r.copies[e].size(); ++i) {
      pos[static_cast<std::size_t>(r.copies[e][i])] = static_cast<float>(r.first[e] + i);
    }
  }
  need(a.epos, N * K);
  need(a.egate, N * K);
  dev_.upload(a.epos.f(), pos.data(), pos.size() * sizeof(float));
  dev_.upload(a.egate.f(), r.gate.data(), r.gate.size() * sizeof(float));
}

void GptShard::expert_forward(int layer, int j, int m, const float* in, float* pre, float* act, float* out) {
  if (m == 0) return;
  const ExpertOffsets x = expert(layer, j);
  dev_.gemm(false, false, m, fl_, h_, 1.0F, fp8_in(in, m, h_, false, 0, x.fcw), h_,
            fp8_in(w(x.fcw), h_, fl_, false, 1, x.fcw), fl_, 0.0F, pre, fl_);
  dev_.bias_gelu_forward(pre, act, w(x.fcb), m, fl_, storage_);
  dev_.gemm(false, false, m, h_, fl_, 1.0F, fp8_in(act, m, fl_, false, 0, x.projw), fl_,
            fp8_in(w(x.projw), fl_, h_, false, 1, x.projw), h_, 0.0F, out, h_);
  if (tp_index_ == 0) dev_.add_bias(out, w(x.projb), m, h_);  // once in the sum over tp
}

void GptShard::expert_backward(int layer, int j, int m, const float* d, const float* in, const float* pre,
                               const float* act, float* scratch, float* din) {
  if (m == 0) return;
  const ExpertOffsets x = expert(layer, j);
  const auto MF = static_cast<std::size_t>(m) * static_cast<std::size_t>(fl_);
  float* dact = scratch;
  float* dpre = scratch + MF;
  dev_.bias_backward(g(x.projb), d, m, h_);
  dev_.gemm(true, false, fl_, h_, m, 1.0F, fp8_in(act, fl_, m, false, 0, x.projw), fl_,
            fp8_in(d, m, h_, true, 1, x.projw), h_, 1.0F, g(x.projw), h_);
  dev_.gemm(false, true, m, fl_, h_, 1.0F, fp8_in(d, m, h_, true, 0, x.projw), h_,
            fp8_in(w(x.projw), h_, fl_, false, 1, x.projw), h_, 0.0F, dact, fl_);
  dev_.zero(dpre, static_cast<std::int64_t>(MF));
  dev_.gelu_backward(dpre, pre, dact, static_cast<std::int64_t>(MF));
  dev_.gemm(true, false, h_, fl_, m, 1.0F, fp8_in(in, h_, m, false, 0, x.fcw), h_, fp8_in(dpre, m, fl_, true, 1, x.fcw),
            fl_, 1.0F, g(x.fcw), fl_);
  dev_.bias_backward(g(x.fcb), dpre, m, fl_);
  dev_.gemm(false, true, m, h_, fl_, 1.0F, fp8_in(dpre, m, fl_, true, 0, x.fcw), fl_,
            fp8_in(w(x.fcw), fl_, h_, false, 1, x.fcw), fl_, 0.0F, din, h_);
}

// Each gate's gradient: the output gradient's dot product with its expert's output (a.eout,
// the copies in expert order).
std::vector<float> GptShard::gate_gradients(const Acts& a, const MoeRoute& r, const float* dy) {
  const auto N = static_cast<std::size_t>(ns_);  // this rank's token rows
  const auto H = static_cast<std::size_t>(h_);
  const auto K = static_cast<std::size_t>(top_k_);
  std::vector<float> dy_host(N * H), out_host(N * K * H);
  dev_.download(dy_host.data(), dy, dy_host.size() * sizeof(float));
  dev_.download(out_host.data(), a.eout.f(), out_host.size() * sizeof(float));
  std::vector<float> dgate(N * K, 0.0F);
  for (std::size_t e = 0; e < r.copies.size(); ++e) {
    for (std::size_t i = 0; i < r.copies[e].size(); ++i) {
      const auto c = static_cast<std::size_t>(r.copies[e][i]);
      const float* d = dy_host.data() + c / K * H;
      const float* o = out_host.data() + (r.first[e] + i) * H;
      double dot = 0.0;
      for (std::size_t k = 0; k < H; ++k) dot += static_cast<double>(d[k]) * o[k];
      dgate[c] = static_cast<float>(dot);
    }
  }
  return dgate;
}

void GptShard::router_backward(int layer, int mb, const std::vector<float>& dgate) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const MoeRoute& r = routes_.at({layer, mb});
  const auto N = static_cast<std::size_t>(ns_);  // this rank's token rows
  const auto E = static_cast<std::size_t>(experts_);
  std::vector<float> dlogits(N * E);
  moe::route_backward(dlogits.data(), r.expert.data(), r.gate.data(), dgate.data(), ns_, experts_, top_k_);
  float* dz = need(moe_z_, N * E).f();
  dev_.upload(dz, dlogits.data(), dlogits.size() * sizeof(float));
  dev_.gemm(false, true, ns_, h_, experts_, 1.0F, dz, experts_, w(p.router), experts_, 1.0F, a.part.f() + own_rows(),
            h_);
  dev_.gemm(true, false, h_, experts_, ns_, 1.0F, a.ln2.f(), h_, dz, experts_, 1.0F, g(p.router), experts_);
}

// --- every expert on the rank ------------------------------------------------------------------

void GptShard::moe_forward(int layer, int mb) {
  route(layer, mb);
  Acts& a = acts(layer, mb);
  const MoeRoute& r = routes_.at({layer, mb});
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const std::size_t rows = static_cast<std::size_t>(ns_) * static_cast<std::size_t>(top_k_);  // every copy once
  need(a.ein, rows * H);
  need(a.epre, rows * F);
  need(a.eact, rows * F);
  need(a.eout, rows * H);
  need(a.part, static_cast<std::size_t>(ns_) * H);
  dev_.moe_permute(a.ein.f(), a.ln2.f(), a.epos.f(), nullptr, ns_, top_k_, h_);
  for (std::size_t e = 0; e < r.copies.size(); ++e) {
    const std::size_t at = r.first[e];
    expert_forward(layer, static_cast<int>(e), static_cast<int>(r.copies[e].size()), a.ein.f() + at * H,
                   a.epre.f() + at * F, a.eact.f() + at * F, a.eout.f() + at * H);
  }
  round(a.eout.f(), rows * H);
  // Each token's copies weighted by their gates, in order.
  dev_.moe_unpermute(a.part.f(), a.eout.f(), a.epos.f(), a.egate.f(), ns_, top_k_, h_, false);
}

void GptShard::moe_backward(int layer, int mb, const float* dy) {
  Acts& a = acts(layer, mb);
  const MoeRoute& r = routes_.at({layer, mb});
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const std::size_t rows = static_cast<std::size_t>(ns_) * static_cast<std::size_t>(top_k_);
  const std::vector<float> dgate = gate_gradients(a, r, dy);
  float* dout = need(moe_a_, rows * H).f();  // the copies' gated output gradients, in expert order
  float* din = need(moe_c_, rows * H).f();   // and their input gradients
  float* scratch = fit(moe_b_, 2 * rows * F).f();
  dev_.moe_permute(dout, dy, a.epos.f(), a.egate.f(), ns_, top_k_, h_);
  for (std::size_t e = 0; e < r.copies.size(); ++e) {
    const std::size_t at = r.first[e];
    expert_backward(layer, static_cast<int>(e), static_cast<int>(r.copies[e].size()), dout + at * H, a.ein.f() + at * H,
                    a.epre.f() + at * F, a.eact.f() + at * F, scratch, din + at * H);
  }
  // ln2's gradient: each token's copies' input gradients, then the router's share.
  dev_.moe_unpermute(a.part.f(), din, a.epos.f(), nullptr, ns_, top_k_, h_, false);
  router_backward(layer, mb, dgate);
}

// --- expert and tensor parallelism of the experts -----------------------------------------------
//
// A rank's rows for its experts arrive in blocks: under ep one per ep member (what that
// member sent), under tp those of every tp member after the gather (each its ep blocks in
// turn). MoeRoute::rows holds each block's rows per held expert; xpos takes the rows from
// block order to expert order and back.

namespace {

bool is_gather(const program::Op& o) {
  return o.category == Category::tp_comm && o.collective == program::CollectiveOp::all_gather;
}

}  // namespace

void GptShard::set_rows(int layer, int mb, std::vector<std::int64_t> rows) {
  MoeRoute& r = routes_.at({layer, mb});
  Acts& a = acts(layer, mb);
  const auto held = static_cast<std::size_t>(held_);
  const std::size_t blocks = rows.size() / held;
  r.rows = std::move(rows);
  // Expert j's rows: block 0's, then block 1's, ...
  r.held_first.assign(held + 1, 0);
  for (std::size_t j = 0; j < held; ++j) {
    std::size_t n = 0;
    for (std::size_t b = 0; b < blocks; ++b) n += static_cast<std::size_t>(r.rows[b * held + j]);
    r.held_first[j + 1] = r.held_first[j] + n;
  }
  r.received = r.held_first[held];
  std::vector<float> pos;
  pos.reserve(r.received);
  std::vector<std::size_t> next(r.held_first.begin(), r.held_first.end() - 1);
  for (std::size_t b = 0; b < blocks; ++b) {
    for (std::size_t j = 0; j < held; ++j) {
      for (std::int64_t i = 0; i < r.rows[b * held + j]; ++i) pos.push_back(static_cast<float>(next[j]++));
    }
  }
  fit(a.xpos, r.received);
  if (!pos.empty()) dev_.upload(a.xpos.f(), pos.data(), pos.size() * sizeof(float));
}

// The dispatch: this rank's copies of each expert (every expert, each ep member's back to
// back). The tp gather: the rows this rank has for each expert it holds, per ep member.
std::vector<float> GptShard::expert_counts(const program::Op& o) {
  const MoeRoute& r = routes_.at({o.layer, o.micro_batch});
  std::vector<float> counts;
  if (is_gather(o)) {
    for (std::int64_t n : r.from_ep) counts.push_back(static_cast<float>(n));
  } else {
    for (const std::vector<int>& c : r.copies) counts.push_back(static_cast<float>(c.size()));
  }
  return counts;
}

void GptShard::expert_counts_received(const program::Op& o, std::span<const float> counts) {
  MoeRoute& r = routes_.at({o.layer, o.micro_batch});
  std::vector<std::int64_t> rows(counts.begin(), counts.end());
  if (!is_gather(o)) {
    r.from_ep = rows;
    if (tp_ == 1) set_rows(o.layer, o.micro_batch, std::move(rows));
    return;
  }
  // Every tp member's blocks, and where this rank's rows start among them.
  const std::size_t each = rows.size() / static_cast<std::size_t>(tp_);
  r.tp_rows.assign(static_cast<std::size_t>(tp_), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) r.tp_rows[i / each] += rows[i];
  r.tp_first = 0;
  for (int t = 0; t < tp_index_; ++t) r.tp_first += static_cast<std::size_t>(r.tp_rows[static_cast<std::size_t>(t)]);
  set_rows(o.layer, o.micro_batch, std::move(rows));
}

// The dispatch sends this rank's copies (ein) and receives its experts' rows; the combine
// sends their results back and receives this rank's copies' (into eout). The tp gather
// puts this rank's rows among every tp member's, the tp reduce-scatter sums each member's.
Shard::Exchange GptShard::exchange(const program::Op& x) {
  const MoeRoute& r = routes_.at({x.layer, x.micro_batch});
  Acts& a = acts(x.layer, x.micro_batch);
  const auto H = static_cast<std::size_t>(h_);
  if (x.category == Category::tp_comm) {
    std::vector<std::int64_t> parts;
    for (std::int64_t n : r.tp_rows) parts.push_back(n * h_);
    if (x.collective == program::CollectiveOp::reduce_scatter) return {moe_send_.f(), parts, moe_send_.f(), parts};
    float* all = fit(moe_gather_, r.received * H).f();
    const std::size_t mine = static_cast<std::size_t>(r.tp_rows[static_cast<std::size_t>(tp_index_)]);
    if (mine > 0)
      dev_.copy(all + r.tp_first * H, (ep_ > 1 ? moe_recv_ : a.ein).f(), static_cast<std::int64_t>(mine * H));
    return {all, parts, all, parts};
  }
  const auto held = static_cast<std::size_t>(held_);
  const std::size_t members = r.from_ep.size() / held;
  std::vector<std::int64_t> mine(members, 0),
      theirs(members, 0);  // per member: rows of this rank's copies, of its experts'
  std::size_t received = 0;
  for (std::size_t q = 0; q < members; ++q) {
    mine[q] = static_cast<std::int64_t>(r.first[(q + 1) * held] - r.first[q * held]) * h_;
    for (std::size_t j = 0; j < held; ++j) theirs[q] += r.from_ep[q * held + j] * h_;
    received += static_cast<std::size_t>(theirs[q]);
  }
  const std::size_t copies = static_cast<std::size_t>(ns_) * static_cast<std::size_t>(top_k_) * H;
  if (x.step == 0) return {a.ein.f(), std::move(mine), fit(moe_recv_, received).f(), std::move(theirs)};
  return {moe_send_.f() + r.tp_first * H, std::move(theirs), need(a.eout, copies).f(), std::move(mine)};
}

void GptShard::moe_piece(const program::Op& op) {
  const int layer = op.layer;
  const int mb = op.micro_batch;
  const bool backward = op.category == Category::backward;
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  MoeRoute& r = routes_[{layer, mb}];
  const auto N = static_cast<std::size_t>(n_);
  const auto NS = static_cast<std::size_t>(ns_);  // this rank's token rows
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const std::size_t copies = NS * static_cast<std::size_t>(top_k_);
  switch (op.piece) {
    case LayerPiece::prepare:
      need(a.ein, copies * H);
      if (backward) {  // the copies' gated output gradients, and the gates'
        const float* dy = dx_.at({layer + 1, mb}).f();
        r.dgate = gate_gradients(a, r, dy);
        dev_.moe_permute(a.ein.f(), dy, a.epos.f(), a.egate.f(), ns_, top_k_, h_);
        return;
      }
      need(a.ln2, NS * H);  // this rank's rows
      need(a.mean2, NS);
      need(a.rstd2, NS);
      dev_.layer_norm_forward(a.ln2.f(), a.mean2.f(), a.rstd2.f(), a.x1.f(), w(p.ln2w), w(p.ln2b), ns_, h_);
      round(a.ln2.f(), NS * H);
      route(layer, mb);
      dev_.moe_permute(a.ein.f(), a.ln2.f(), a.epos.f(), nullptr, ns_, top_k_, h_);
      r.tp_first = 0;
      if (ep_ == 1) {  // no dispatch: this rank's copies are its rows for its experts
        r.from_ep.clear();
        for (const std::vector<int>& c : r.copies) r.from_ep.push_back(static_cast<std::int64_t>(c.size()));
      }
      return;
    case LayerPiece::experts: {
      const std::size_t rows = r.received;
      const float* in = (tp_ > 1 ? moe_gather_ : moe_recv_).f();
      float* out = fit(moe_send_, rows * H).f();  // back in block order
      if (!backward) {
        if (op.category == Category::forward && !expert_rows_.empty()) {
          expert_rows_[static_cast<std::size_t>(layer) * static_cast<std::size_t>(micro_batches_) +
                       static_cast<std::size_t>(mb)] = static_cast<double>(rows);
        }
        fit(a.xin, rows * H);
        fit(a.epre, rows * F);
        fit(a.eact, rows * F);
        float* y = fit(moe_c_, rows * H).f();
        if (rows > 0) dev_.moe_permute(a.xin.f(), in, a.xpos.f(), nullptr, static_cast<int>(rows), 1, h_);
        for (int j = 0; j < held_; ++j) {
          const std::size_t at = r.held_first[static_cast<std::size_t>(j)];
          expert_forward(layer, j, static_cast<int>(r.held_first[static_cast<std::size_t>(j) + 1] - at),
                         a.xin.f() + at * H, a.epre.f() + at * F, a.eact.f() + at * F, y + at * H);
        }
        if (rows > 0) dev_.moe_unpermute(out, y, a.xpos.f(), nullptr, static_cast<int>(rows), 1, h_, false);
        return;
      }
      float* d = fit(moe_a_, rows * H).f();
      float* din = fit(moe_c_, rows * H).f();
      std::size_t widest = 0;
      for (int j = 0; j < held_; ++j) {
        widest =
            std::max(widest, r.held_first[static_cast<std::size_t>(j) + 1] - r.held_first[static_cast<std::size_t>(j)]);
      }
      float* scratch = fit(moe_b_, 2 * widest * F).f();
      if (rows > 0) dev_.moe_permute(d, in, a.xpos.f(), nullptr, static_cast<int>(rows), 1, h_);
      for (int j = 0; j < held_; ++j) {
        const std::size_t at = r.held_first[static_cast<std::size_t>(j)];
        expert_backward(layer, j, static_cast<int>(r.held_first[static_cast<std::size_t>(j) + 1] - at), d + at * H,
                        a.xin.f() + at * H, a.epre.f() + at * F, a.eact.f() + at * F, scratch, din + at * H);
      }
      if (rows > 0) dev_.moe_unpermute(out, din, a.xpos.f(), nullptr, static_cast<int>(rows), 1, h_, false);
      return;
    }
    case LayerPiece::finish:
      need(a.part, N * H);
      // Without a combine (ep 1) this rank's copies' results are its block of the tp sums.
      if (ep_ == 1)
        dev_.copy(need(a.eout, copies * H).f(), moe_send_.f() + r.tp_first * H, static_cast<std::int64_t>(copies * H));
      if (backward) {  // ln2's gradient: each token's copies' input gradients (eout), then the router's share
        dev_.moe_unpermute(a.part.f() + own_rows(), a.eout.f(), a.epos.f(), nullptr, ns_, top_k_, h_, false);
        router_backward(layer, mb, r.dgate);
        finish_mlp_backward(layer, mb);
        return;
      }
      round(a.eout.f(), copies * H);
      dev_.moe_unpermute(a.part.f() + own_rows(), a.eout.f(), a.epos.f(), a.egate.f(), ns_, top_k_, h_, false);
      finish_mlp_forward(layer, mb, op.category == Category::recompute, a.part.f() + own_rows());
      return;
    default: break;
  }
  throw std::logic_error("a mixture-of-experts piece this model does not have");
}

}  // namespace parasim::exec
