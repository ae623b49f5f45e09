// A layer's passes as ops: its compute, with the tensor-parallel collectives that close
// each half (or, under tp communication overlap, the rings that replace them).
#include "plan/compile_builder.hpp"

namespace parasim::plan::detail {

void Builder::layer_forward(int layer, int mb, int chunk, Category cat) {
  if (m_.kind == ModelKind::generic) {
    const GenericLayer& g = m_.generic_layers[static_cast<std::size_t>(layer)];
    const int set = generic_sets_[static_cast<std::size_t>(layer)];
    auto deps = take_pending();
    next_kernels(generic_kernels_[static_cast<std::size_t>(layer)][0]);
    compute(ComputeWhat::layer, cat, set, sum_flops(prog_.gemm_sets[static_cast<std::size_t>(set)]),
            gemm_io_bytes(prog_.gemm_sets[static_cast<std::size_t>(set)], e_) + g.activations * t_.micro_batch * e_,
            mb, chunk, layer, deps);
    return;
  }
  const auto& sets = prog_.gemm_sets;
  if (p_.tp == 1) {
    auto deps = take_pending();
    next_kernels(cat == Category::forward && mb == 0 ? first_kernels_[0] : layer_kernels_[0][0]);
    compute(ComputeWhat::layer, cat, layer_set_, sum_flops(sets[static_cast<std::size_t>(layer_set_)]),
            gemm_io_bytes(sets[static_cast<std::size_t>(layer_set_)], e_) + elementwise_bytes_, mb, chunk, layer, deps);
    return;
  }
  const bool sp = p_.sequence_parallel;
  for (int half = 0; half < 2; ++half) {
    const int set = half == 0 ? attention_set_ : mlp_set_;
    const ComputeWhat part = half == 0 ? ComputeWhat::layer_attention : ComputeWhat::layer_mlp;
    if (overlap_) {
      overlapped_half(layer, mb, chunk, cat, part);
      continue;
    }
    if (sp) tp_collective(CollectiveOp::all_gather, mb, layer, TpRole::gather_input, part, cat);
    auto deps = take_pending();
    next_kernels(cat == Category::forward && mb == 0 ? first_kernels_[half + 1] : layer_kernels_[0][half + 1]);
    compute(part, cat, set, sum_flops(sets[static_cast<std::size_t>(set)]),
            gemm_io_bytes(sets[static_cast<std::size_t>(set)], e_) + elementwise_bytes_ / 2, mb, chunk, layer, deps);
    tp_collective(sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, mb, layer, TpRole::sum, part, cat);
  }
}

void Builder::layer_backward(int layer, int mb, int chunk) {
  if (m_.kind == ModelKind::generic) {
    const GenericLayer& g = m_.generic_layers[static_cast<std::size_t>(layer)];
    const int set = generic_sets_[static_cast<std::size_t>(layer)];
    auto deps = take_pending();
    next_kernels(generic_kernels_[static_cast<std::size_t>(layer)][1]);
    grad_ready_[static_cast<std::size_t>(layer)] =
        compute(ComputeWhat::layer, Category::backward, set, 2 * sum_flops(prog_.gemm_sets[static_cast<std::size_t>(set)]),
                2 * gemm_io_bytes(prog_.gemm_sets[static_cast<std::size_t>(set)], e_) +
                    g.activations * t_.micro_batch * e_,
                mb, chunk, layer, deps);
    return;
  }
  const auto& sets = prog_.gemm_sets;
  if (p_.tp == 1) {
    auto deps = take_pending();
    next_kernels(layer_kernels_[1][0]);
    grad_ready_[static_cast<std::size_t>(layer)] =
        compute(ComputeWhat::layer, Category::backward, layer_set_, 2 * sum_flops(sets[static_cast<std::size_t>(layer_set_)]),
                2 * gemm_io_bytes(sets[static_cast<std::size_t>(layer_set_)], e_) + elementwise_bytes_, mb, chunk,
                layer, deps);
    return;
  }
  const bool sp = p_.sequence_parallel;
  if (overlap_) {
    overlapped_half(layer, mb, chunk, Category::backward, ComputeWhat::layer_mlp);
    overlapped_half(layer, mb, chunk, Category::backward, ComputeWhat::layer_attention);
    // The weight gradients end with the last piece, the norms' with the last sum.
    grad_ready_[static_cast<std::size_t>(layer)] = last_compute_;
    grad_also_[static_cast<std::size_t>(layer)] = pending_;
    return;
  }
  for (int half = 0; half < 2; ++half) {
    const int set = half == 0 ? mlp_set_ : attention_set_;
    const ComputeWhat part = half == 0 ? ComputeWhat::layer_mlp : ComputeWhat::layer_attention;
    if (sp) tp_collective(CollectiveOp::all_gather, mb, layer, TpRole::gather_input, part, Category::backward);
    auto deps = take_pending();
    next_kernels(layer_kernels_[1][half == 0 ? 2 : 1]);
    compute(part, Category::backward, set, 2 * sum_flops(sets[static_cast<std::size_t>(set)]),
            2 * gemm_io_bytes(sets[static_cast<std::size_t>(set)], e_) + elementwise_bytes_ / 2, mb, chunk, layer,
            deps);
    tp_collective(sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, mb, layer, TpRole::sum, part,
                  Category::backward);
  }
  // The layer's gradients are complete once its last tp sum is: the first layer norm's
  // backward needs the summed input gradient.
  grad_ready_[static_cast<std::size_t>(layer)] = pending_;
}

// --- tensor-parallel communication overlap ---------------------------------------------------

void Builder::make_overlap_sets(const std::vector<Gemm>& layer) {
  const long long tp = p_.tp;
  splits_ = overlap_splits(kernel_plan_);
  for (int b = 0; b < 2; ++b) {
    for (int half = 0; half < 2; ++half) {
      const OverlapKernels k =
          overlap_kernels(kernel_plan_, half == 0 ? LayerPart::attention : LayerPart::mlp, b == 1, splits_);
      Pieces& pc = pieces_[b][half];
      pc.prepare = add_kernels(k.prepare);
      // fp8: the forward's first micro-batch casts the half's weights first.
      std::vector<Kernel> casts = weight_cast_kernels(kernel_plan_, half == 0 ? LayerPart::attention : LayerPart::mlp);
      casts.insert(casts.end(), k.prepare.begin(), k.prepare.end());
      pc.prepare_first = b == 0 && casts.size() > k.prepare.size() ? add_kernels(std::move(casts)) : pc.prepare;
      pc.column = add_kernels(k.column);
      pc.middle = add_kernels(k.middle);
      pc.row = add_kernels(k.row);
      pc.row_last = b == 0 ? add_kernels(k.row_last) : -1;
      pc.wgrad = b == 1 ? add_kernels(k.wgrad) : -1;
      // The half's column-parallel GEMM (QKV, MLP-up) and row-parallel one (projection,
      // MLP-down). Forward the ring feeds the first and the second's blocks are summed;
      // backward the ring feeds the second's data gradient and the first's is summed. The
      // middle holds the attention core (twice backward) and backward the second's weight
      // gradient; the first's weight gradient runs under the backward's reduce-scatter.
      const Gemm& first = layer[half == 0 ? 0 : 4];
      const Gemm& second = layer[half == 0 ? 3 : 5];
      Gemm column = b == 0 ? first : second;
      Gemm row = b == 0 ? second : first;
      column.m /= tp;
      if (b == 0) row.m /= splits_;
      std::vector<Gemm> middle;
      for (int i = 0; i < (half == 0 ? b + 1 : 0); ++i) middle.insert(middle.end(), {layer[1], layer[2]});
      if (b == 1) middle.push_back(second);
      pc.column_gemms = add_set({column});
      pc.row_gemms = add_set({row});
      pc.middle_gemms = add_set(middle);
      pc.wgrad_gemms = b == 1 ? add_set({first}) : -1;
      pc.column_flops = column.flops();
      pc.row_flops = row.flops();
      pc.middle_flops = sum_flops(middle);
      pc.wgrad_flops = b == 1 ? first.flops() : 0.0;
      pc.middle_bytes = gemm_io_bytes(middle, e_) + elementwise_bytes_ / 2;
      pc.column_bytes = column.io_bytes(e_);
      pc.row_bytes = row.io_bytes(e_);
      pc.wgrad_bytes = b == 1 ? first.io_bytes(e_) : 0.0;
    }
  }
}

std::int64_t Builder::piece(ComputeWhat part, Category cat, LayerPiece which, int step, int kernels, int gemms,
                            double flops, double bytes, int mb, int chunk, int layer, std::span<const std::int64_t> deps) {
  next_kernels(kernels);
  const std::int64_t id = compute(part, cat, gemms, flops, bytes, mb, chunk, layer, deps);
  Op& o = prog_.ops[static_cast<std::size_t>(id)];
  o.piece = which;
  o.step = static_cast<std::int16_t>(step);
  return id;
}

std::int64_t Builder::ring_transfer(OpKind kind, int peer, std::int64_t ring, int step, ComputeWhat part, Category cat,
                                    int mb, int layer, std::span<const std::int64_t> deps) {
  // A point-to-point transfer of one sequence block on the pp-comm stream (posted in order,
  // completing independently), made the ring's.
  const std::int64_t id = p2p(kind, peer, activation_bytes_ / p_.tp, mb, -1, false, deps);
  Op& op = prog_.ops[static_cast<std::size_t>(id)];
  const int sender = kind == OpKind::send ? rank_ : peer;
  op.category = Category::tp_comm;
  op.host_sync = false;  // TE's loop issues it without a host synchronisation
  op.tp_role = TpRole::ring;
  op.what = part;
  op.pass = cat;
  op.piece = LayerPiece::column;
  op.step = static_cast<std::int16_t>(step);
  op.layer = layer;
  op.layer_end = layer + 1;
  // Apart from the pipeline transfers' ids (bit 62); the same on both ends.
  op.match = (std::int64_t{1} << 62) + (ring * prog_.world + sender) * p_.tp + step;
  return id;
}

// The ring: rank i (tp index) holds at step j the sequence block (i - j) mod tp of the
// column GEMM's input; it runs that block's GEMM while passing the block on to rank i + 1
// and receiving the next from rank i - 1. Every receive waits for the half's first piece
// (the buffer it lands in is free by then). Forward, the row GEMM then runs in `splits_`
// blocks, each block's reduce-scatter (of the rows it computed for every rank) running
// under the next block's GEMM. Backward, the row GEMM runs whole, and its reduce-scatter
// runs under the weight gradients.
void Builder::overlapped_half(int layer, int mb, int chunk, Category cat, ComputeWhat part) {
  const bool backward = cat == Category::backward;
  const Pieces& pc = pieces_[backward ? 1 : 0][part == ComputeWhat::layer_mlp ? 1 : 0];
  const int tp = p_.tp;
  Coord c = coord_;
  c.tp = (coord_.tp + 1) % tp;
  const int next = rank_of(p_, c);
  c.tp = (coord_.tp + tp - 1) % tp;
  const int prev = rank_of(p_, c);
  const std::int64_t ring = rings_++;
  const std::vector<std::int64_t> deps = take_pending();
  const int prepare_set = cat == Category::forward && mb == 0 ? pc.prepare_first : pc.prepare;
  const std::int64_t prepare = piece(part, cat, LayerPiece::prepare, -1, prepare_set, -1, 0.0, 0.0, mb, chunk, layer, deps);
  std::int64_t have = prepare;  // where block j's input comes from
  for (int j = 0; j < tp; ++j) {
    std::int64_t arrived = -1;
    if (j + 1 < tp) {
      ring_transfer(OpKind::send, next, ring, j, part, cat, mb, layer, std::span(&have, 1));
      arrived = ring_transfer(OpKind::recv, prev, ring, j, part, cat, mb, layer, std::span(&prepare, 1));
    }
    piece(part, cat, LayerPiece::column, j, pc.column, pc.column_gemms, pc.column_flops, pc.column_bytes, mb, chunk, layer,
          std::span(&have, 1));
    have = arrived;
  }
  piece(part, cat, LayerPiece::middle, -1, pc.middle, pc.middle_gemms, pc.middle_flops, pc.middle_bytes, mb, chunk,
        layer, {});
  const int blocks = backward ? 1 : splits_;
  for (int j = 0; j < blocks; ++j) {
    const int kernels = backward || j + 1 < blocks ? pc.row : pc.row_last;
    const std::int64_t gemm = piece(part, cat, LayerPiece::row, backward ? -1 : j, kernels, pc.row_gemms, pc.row_flops,
                                    pc.row_bytes, mb, chunk, layer, {});
    const std::int64_t rs = collective(Dim::tp, CollectiveOp::reduce_scatter, Category::tp_comm, Stream::tp,
                                       activation_bytes_ / blocks, mb, layer, layer + 1, std::span(&gemm, 1));
    tag_tp(rs, TpRole::sum, part, cat);
    Op& o = prog_.ops[static_cast<std::size_t>(rs)];
    o.piece = LayerPiece::row;
    o.step = static_cast<std::int16_t>(backward ? -1 : j);
    pending_ = rs;  // the half's output is complete with its last block's sum
  }
  if (backward) {
    piece(part, cat, LayerPiece::wgrad, -1, pc.wgrad, pc.wgrad_gemms, pc.wgrad_flops, pc.wgrad_bytes, mb, chunk, layer,
          {});
  }
}

}  // namespace parasim::plan::detail
