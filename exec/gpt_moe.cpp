// A mixture-of-experts MLP on a rank that holds every expert (tp 1, ep 1): the router's
// GEMM on the device, the top-k routing on the host (exec/model/moe.hpp's, so the shard
// routes exactly as the reference), each expert's GEMMs over the rows routed to it, and the
// gates' weighted sum; backward the experts' gradients, the gates' through a dot product
// per copy, and the router's. The rows move with the Device's copies, so both backends run
// it.
#include <algorithm>

#include "exec/gpt_shard.hpp"
#include "exec/model/moe.hpp"

namespace parasim::exec {

GptShard::ExpertOffsets GptShard::expert(int layer, int e) const {
  const LayerParams& p = layer_params_.at(layer);
  const std::size_t at = static_cast<std::size_t>(e) * p.expert_stride;
  return {p.fcw + at, p.fcb + at, p.fcprojw + at, p.fcprojb + at};
}

void GptShard::moe_forward(int layer, int mb) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const auto E = static_cast<std::size_t>(experts_);
  const auto K = static_cast<std::size_t>(top_k_);
  need(a.router, N * E);
  dev_.gemm(false, false, n_, experts_, h_, 1.0F, a.ln2.f(), h_, w(p.router), experts_, 0.0F, a.router.f(), experts_);
  std::vector<float> logits(N * E);
  dev_.download(logits.data(), a.router.f(), logits.size() * sizeof(float));
  MoeRoute& r = routes_[{layer, mb}];
  r.expert.assign(N * K, 0);
  r.gate.assign(N * K, 0.0F);
  moe::route(r.expert.data(), r.gate.data(), logits.data(), n_, experts_, top_k_);
  r.copies.assign(E, {});
  for (std::size_t c = 0; c < N * K; ++c)
    r.copies[static_cast<std::size_t>(r.expert[c])].push_back(static_cast<int>(c));
  r.first.assign(E + 1, 0);
  std::vector<float> pos(N * K);
  for (std::size_t e = 0; e < E; ++e) {
    r.first[e + 1] = r.first[e] + r.copies[e].size();
    for (std::size_t i = 0; i < r.copies[e].size(); ++i)
      pos[static_cast<std::size_t>(r.copies[e][i])] = static_cast<float>(r.first[e] + i);
  }
  const std::size_t rows = N * K;  // every copy once
  need(a.epos, rows);
  need(a.egate, rows);
  dev_.upload(a.epos.f(), pos.data(), rows * sizeof(float));
  dev_.upload(a.egate.f(), r.gate.data(), rows * sizeof(float));
  need(a.ein, rows * H);
  need(a.epre, rows * F);
  need(a.eact, rows * F);
  need(a.eout, rows * H);
  need(a.part, N * H);
  dev_.moe_permute(a.ein.f(), a.ln2.f(), a.epos.f(), nullptr, n_, top_k_, h_);
  for (std::size_t e = 0; e < E; ++e) {
    const int m = static_cast<int>(r.copies[e].size());
    if (m == 0) continue;
    const ExpertOffsets x = expert(layer, static_cast<int>(e));
    float* pre = a.epre.f() + r.first[e] * F;
    float* out = a.eout.f() + r.first[e] * H;
    dev_.gemm(false, false, m, fl_, h_, 1.0F, a.ein.f() + r.first[e] * H, h_, w(x.fcw), fl_, 0.0F, pre, fl_);
    dev_.bias_gelu_forward(pre, a.eact.f() + r.first[e] * F, w(x.fcb), m, fl_, storage_);
    dev_.gemm(false, false, m, h_, fl_, 1.0F, a.eact.f() + r.first[e] * F, fl_, w(x.projw), h_, 0.0F, out, h_);
    dev_.add_bias(out, w(x.projb), m, h_);
  }
  round(a.eout.f(), rows * H);
  // Each token's copies weighted by their gates, in order.
  dev_.moe_unpermute(a.part.f(), a.eout.f(), a.epos.f(), a.egate.f(), n_, top_k_, h_, false);
}

void GptShard::moe_backward(int layer, int mb, const float* dy) {
  const LayerParams& p = layer_params_.at(layer);
  Acts& a = acts(layer, mb);
  const MoeRoute& r = routes_.at({layer, mb});
  const auto N = static_cast<std::size_t>(n_);
  const auto H = static_cast<std::size_t>(h_);
  const auto F = static_cast<std::size_t>(fl_);
  const auto E = static_cast<std::size_t>(experts_);
  const auto K = static_cast<std::size_t>(top_k_);
  // Each gate's gradient: the output gradient's dot product with its expert's output.
  std::vector<float> dy_host(N * H), out_host(N * K * H);
  dev_.download(dy_host.data(), dy, dy_host.size() * sizeof(float));
  dev_.download(out_host.data(), a.eout.f(), out_host.size() * sizeof(float));
  std::vector<float> dgate(N * K, 0.0F);
  for (std::size_t e = 0; e < E; ++e) {
    for (std::size_t i = 0; i < r.copies[e].size(); ++i) {
      const auto c = static_cast<std::size_t>(r.copies[e][i]);
      const float* d = dy_host.data() + c / K * H;
      const float* o = out_host.data() + (r.first[e] + i) * H;
      double dot = 0.0;
      for (std::size_t j = 0; j < H; ++j) dot += static_cast<double>(d[j]) * o[j];
      dgate[c] = static_cast<float>(dot);
    }
  }
  float* dout = need(moe_a_, N * K * H).f();  // the copies' gated output gradients, in expert order
  float* din = need(moe_c_, N * K * H).f();   // and their input gradients
  need(moe_b_, 2 * N * K * F);
  dev_.moe_permute(dout, dy, a.epos.f(), a.egate.f(), n_, top_k_, h_);
  for (std::size_t e = 0; e < E; ++e) {
    const int m = static_cast<int>(r.copies[e].size());
    if (m == 0) continue;
    const auto M = static_cast<std::size_t>(m);
    const ExpertOffsets x = expert(layer, static_cast<int>(e));
    const float* d = dout + r.first[e] * H;
    float* dact = moe_b_.f();          // M x F
    float* dpre = moe_b_.f() + M * F;  // M x F
    dev_.bias_backward(g(x.projb), d, m, h_);
    dev_.gemm(true, false, fl_, h_, m, 1.0F, a.eact.f() + r.first[e] * F, fl_, d, h_, 1.0F, g(x.projw), h_);
    dev_.gemm(false, true, m, fl_, h_, 1.0F, d, h_, w(x.projw), h_, 0.0F, dact, fl_);
    dev_.zero(dpre, static_cast<std::int64_t>(M * F));
    dev_.gelu_backward(dpre, a.epre.f() + r.first[e] * F, dact, static_cast<std::int64_t>(M * F));
    dev_.gemm(true, false, h_, fl_, m, 1.0F, a.ein.f() + r.first[e] * H, h_, dpre, fl_, 1.0F, g(x.fcw), fl_);
    dev_.bias_backward(g(x.fcb), dpre, m, fl_);
    dev_.gemm(false, true, m, h_, fl_, 1.0F, dpre, fl_, w(x.fcw), fl_, 0.0F, din + r.first[e] * H, h_);
  }
  // ln2's gradient: each token's copies' input gradients, then the router's share.
  dev_.moe_unpermute(a.part.f(), din, a.epos.f(), nullptr, n_, top_k_, h_, false);
  std::vector<float> dlogits(N * E);
  moe::route_backward(dlogits.data(), r.expert.data(), r.gate.data(), dgate.data(), n_, experts_, top_k_);
  float* dz = need(moe_z_, N * E).f();
  dev_.upload(dz, dlogits.data(), dlogits.size() * sizeof(float));
  dev_.gemm(false, true, n_, h_, experts_, 1.0F, dz, experts_, w(p.router), experts_, 1.0F, a.part.f(), h_);
  dev_.gemm(true, false, h_, experts_, n_, 1.0F, a.ln2.f(), h_, dz, experts_, 1.0F, g(p.router), experts_);
}

}  // namespace parasim::exec
