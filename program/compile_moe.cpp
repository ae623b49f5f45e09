// A mixture-of-experts layer's MLP half as ops, around its token exchanges
// (Megatron-Core's all-to-all token dispatcher): each rank routes its tokens (b·s/tp of
// them under sequence parallelism), sends each copy to the ep rank holding its expert,
// gathers its tp group's copies (the experts are tp-split as the dense layers are), runs
// its local experts, sums their partial outputs back over tp and returns every copy to its
// token's rank, which combines them.
#include "program/compile_builder.hpp"

namespace parasim::program::detail {

void Builder::make_moe_sets(const std::vector<workload::Gemm>& layer) {
  // layer: the attention's GEMMs, then the router, the experts' two and the shared
  // experts' two (when the model has them), which run in the prepare piece.
  const auto mlp = static_cast<std::size_t>(workload::attention_gemm_count(m_));
  const std::vector<workload::Gemm> router{layer[mlp]};
  const std::vector<workload::Gemm> experts{layer[mlp + 1], layer[mlp + 2]};
  const std::vector<workload::Gemm> shared(layer.begin() + static_cast<std::ptrdiff_t>(mlp) + 3, layer.end());
  const double e = e_;
  for (int b = 0; b < 2; ++b) {
    const bool backward = b == 1;
    const workload::MoeKernels k = moe_kernels(kernel_plan_, backward);
    MoePieces& pc = moe_[b];
    pc.prepare = add_kernels(k.prepare);
    std::vector<workload::Kernel> casts = weight_cast_kernels(kernel_plan_, workload::LayerPart::mlp);
    casts.insert(casts.end(), k.prepare.begin(), k.prepare.end());
    pc.prepare_first = !backward && casts.size() > k.prepare.size() ? add_kernels(std::move(casts)) : pc.prepare;
    pc.experts = add_kernels(k.experts);
    pc.finish = add_kernels(k.finish);
    // Forward: the router before the exchange; backward (each GEMM twice) after it. The
    // shared experts in the prepare piece, or with tp in their own.
    const double x = backward ? 2.0 : 1.0;
    std::vector<workload::Gemm> first = backward ? std::vector<workload::Gemm>{} : router;
    if (k.shared.empty()) first.insert(first.end(), shared.begin(), shared.end());
    if (!k.shared.empty()) {
      pc.shared = add_kernels(k.shared);
      pc.shared_gemms = add_set(piece_runs(shared, backward));
      pc.shared_flops = x * sum_flops(shared);
      double traffic = 0.0;
      for (const workload::Kernel& kn : k.shared) traffic += kn.kind == workload::KernelKind::memory ? kn.bytes : 0.0;
      pc.shared_bytes = x * gemm_io_bytes(shared, static_cast<int>(e)) + traffic;
    }
    const std::vector<workload::Gemm>& last = backward ? router : std::vector<workload::Gemm>{};
    pc.prepare_gemms = first.empty() ? -1 : add_set(piece_runs(first, backward));
    pc.finish_gemms = last.empty() ? -1 : add_set(piece_runs(last, backward));
    pc.experts_gemms = add_set(piece_runs(experts, backward));
    pc.prepare_flops = x * sum_flops(first);
    pc.experts_flops = x * sum_flops(experts);
    pc.finish_flops = x * sum_flops(last);
    double traffic[3] = {0.0, 0.0, 0.0};
    const std::vector<workload::Kernel>* parts[3] = {&k.prepare, &k.experts, &k.finish};
    for (int i = 0; i < 3; ++i) {
      for (const workload::Kernel& kn : *parts[i])
        traffic[i] += kn.kind == workload::KernelKind::memory ? kn.bytes : 0.0;
    }
    pc.prepare_bytes = x * gemm_io_bytes(first, static_cast<int>(e)) + traffic[0];
    pc.experts_bytes = x * gemm_io_bytes(experts, static_cast<int>(e)) + traffic[1];
    pc.finish_bytes = x * gemm_io_bytes(last, static_cast<int>(e)) + traffic[2];
  }
  const double tokens = static_cast<double>(m_.seq_len / p_.cp) * t_.micro_batch;
  const double copies = tokens * m_.top_k * m_.expert_load();
  moe_tokens_bytes_ = copies * m_.hidden * e_;
  moe_a2a_bytes_ = moe_tokens_bytes_ / p_.tp;
}

// Forward: prepare, [the shared experts between a tp all-gather and reduce-scatter of the
// layer's tokens], dispatch, [tp all-gather], experts, [tp reduce-scatter], combine,
// finish. Backward the same chain carries the gradients (the combine's backward is a
// dispatch of the output gradients, the dispatch's a combine of the input gradients).
void Builder::moe_half(int layer, int mb, int chunk, Category cat) {
  const bool backward = cat == Category::backward;
  const MoePieces& pc = moe_[backward ? 1 : 0];
  const ComputeWhat part = ComputeWhat::layer_mlp;
  const std::vector<std::int64_t> deps = take_pending();
  const int prepare_set = cat == Category::forward && mb == 0 ? pc.prepare_first : pc.prepare;
  std::int64_t at = piece(part, cat, LayerPiece::prepare, -1, prepare_set, pc.prepare_gemms, pc.prepare_flops,
                          pc.prepare_bytes, mb, chunk, layer, deps);
  auto exchange = [&](int step, std::int64_t after) {
    if (p_.ep == 1) return after;
    const std::int64_t a2a = collective_in(ep_groups, CollectiveOp::all_to_all, Category::ep_comm, Stream::tp,
                                           moe_a2a_bytes_, mb, layer, layer + 1, std::span(&after, 1));
    Op& o = prog_.ops[static_cast<std::size_t>(a2a)];
    o.what = part;
    o.pass = cat;
    o.step = static_cast<std::int16_t>(step);
    return a2a;
  };
  auto over_tp = [&](CollectiveOp what, std::int64_t after) {
    if (p_.tp == 1) return after;
    const std::int64_t c = collective(scenario::Dim::tp, what, Category::tp_comm, Stream::tp, moe_tokens_bytes_, mb,
                                      layer, layer + 1, std::span(&after, 1));
    tag_tp(c, TpRole::sum, part, cat);
    return c;
  };
  if (pc.shared >= 0) {  // Megatron-Core's SharedExpertMLP: a tp-split MLP over the gathered tokens
    auto tokens_over_tp = [&](CollectiveOp what, std::int64_t after) {
      const std::int64_t c = collective(scenario::Dim::tp, what, Category::tp_comm, Stream::tp, activation_bytes_, mb,
                                        layer, layer + 1, std::span(&after, 1));
      tag_tp(c, what == CollectiveOp::all_gather ? TpRole::gather_input : TpRole::sum, part, cat);
      return c;
    };
    at = tokens_over_tp(CollectiveOp::all_gather, at);
    at = piece(part, cat, LayerPiece::shared, -1, pc.shared, pc.shared_gemms, pc.shared_flops, pc.shared_bytes, mb,
               chunk, layer, std::span(&at, 1));
    at = tokens_over_tp(CollectiveOp::reduce_scatter, at);
  }
  at = over_tp(CollectiveOp::all_gather, exchange(0, at));
  at = piece(part, cat, LayerPiece::experts, -1, pc.experts, pc.experts_gemms, pc.experts_flops, pc.experts_bytes, mb,
             chunk, layer, std::span(&at, 1));
  at = exchange(1, over_tp(CollectiveOp::reduce_scatter, at));
  piece(part, cat, LayerPiece::finish, -1, pc.finish, pc.finish_gemms, pc.finish_flops, pc.finish_bytes, mb, chunk,
        layer, std::span(&at, 1));
}

}  // namespace parasim::program::detail
