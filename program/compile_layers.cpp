// A layer's passes as ops: its compute, with the tensor-parallel collectives that close
// each half (or, under tp communication overlap, the rings that replace them).
#include "program/compile_builder.hpp"

namespace parasim::program::detail {

void Builder::layer_forward(int layer, int mb, int chunk, Category cat) {
  if (m_.kind == scenario::ModelKind::generic) {
    generic_layer(layer, mb, chunk, cat);
    return;
  }
  const auto& sets = prog_.gemm_sets;
  const LayerSets& ls = sets_of(layer);
  if (p_.tp == 1 && p_.cp == 1 && !ls.moe_split) {
    auto deps = take_pending();
    next_kernels(cat == Category::forward && mb == 0 ? ls.first[0] : ls.kernels[0][0]);
    compute(ComputeWhat::layer, cat, ls.whole, sum_flops(sets[static_cast<std::size_t>(ls.whole)]),
            gemm_io_bytes(sets[static_cast<std::size_t>(ls.whole)], e_) + ls.elementwise, mb, chunk, layer, deps);
    return;
  }
  const bool sp = p_.sequence_parallel;
  for (int half = 0; half < 2; ++half) {
    const int set = half == 0 ? ls.attention : ls.mlp;
    const ComputeWhat part = half == 0 ? ComputeWhat::layer_attention : ComputeWhat::layer_mlp;
    if (overlap_) {
      overlapped_half(layer, mb, chunk, cat, part);
      continue;
    }
    if (half == 1 && ls.moe_split) {  // its own exchanges replace the sequence gather and the sum
      moe_half(layer, mb, chunk, cat);
      continue;
    }
    if (sp) tp_collective(CollectiveOp::all_gather, mb, layer, TpRole::gather_input, part, cat);
    if (half == 0 && p_.cp > 1) {
      context_half(layer, mb, chunk, cat);
    } else {
      auto deps = take_pending();
      next_kernels(cat == Category::forward && mb == 0 ? ls.first[half + 1] : ls.kernels[0][half + 1]);
      compute(part, cat, set, sum_flops(sets[static_cast<std::size_t>(set)]),
              gemm_io_bytes(sets[static_cast<std::size_t>(set)], e_) + ls.elementwise / 2, mb, chunk, layer, deps);
    }
    if (p_.tp > 1) {
      tp_collective(sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, mb, layer, TpRole::sum, part, cat);
    }
  }
}

void Builder::layer_backward(int layer, int mb, int chunk) {
  if (m_.kind == scenario::ModelKind::generic) {
    generic_layer(layer, mb, chunk, Category::backward);
    return;
  }
  const auto& sets = prog_.gemm_sets;
  const LayerSets& ls = sets_of(layer);
  if (p_.tp == 1 && p_.cp == 1 && !ls.moe_split) {
    auto deps = take_pending();
    next_kernels(ls.kernels[1][0]);
    grad_ready_[static_cast<std::size_t>(layer)] = compute(
        ComputeWhat::layer, Category::backward, ls.whole, 2 * sum_flops(sets[static_cast<std::size_t>(ls.whole)]),
        2 * gemm_io_bytes(sets[static_cast<std::size_t>(ls.whole)], e_) + ls.elementwise, mb, chunk, layer, deps);
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
    const int set = half == 0 ? ls.mlp : ls.attention;
    const ComputeWhat part = half == 0 ? ComputeWhat::layer_mlp : ComputeWhat::layer_attention;
    if (half == 0 && ls.moe_split) {
      moe_half(layer, mb, chunk, Category::backward);
      continue;
    }
    if (sp) tp_collective(CollectiveOp::all_gather, mb, layer, TpRole::gather_input, part, Category::backward);
    if (half == 1 && p_.cp > 1) {
      context_half(layer, mb, chunk, Category::backward);
    } else {
      auto deps = take_pending();
      next_kernels(ls.kernels[1][half == 0 ? 2 : 1]);
      compute(part, Category::backward, set, 2 * sum_flops(sets[static_cast<std::size_t>(set)]),
              2 * gemm_io_bytes(sets[static_cast<std::size_t>(set)], e_) + ls.elementwise / 2, mb, chunk, layer, deps);
    }
    if (p_.tp > 1) {
      tp_collective(sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, mb, layer, TpRole::sum, part,
                    Category::backward);
    }
  }
  // The layer's gradients are complete once its last tp sum is: the first layer norm's
  // backward needs the summed input gradient. Without tp (cp > 1), with its last piece.
  grad_ready_[static_cast<std::size_t>(layer)] = p_.tp > 1 ? pending_ : last_compute_;
}

// --- generic layers ---------------------------------------------------------------------------

void Builder::generic_layer(int layer, int mb, int chunk, Category cat) {
  const scenario::GenericLayer& g = m_.generic_layers[static_cast<std::size_t>(layer)];
  const GenericSets& sets = generic_[static_cast<std::size_t>(layer)];
  const bool backward = cat == Category::backward;
  const double flops = sum_flops(prog_.gemm_sets[static_cast<std::size_t>(sets.gemm)]);
  const double gemm_bytes = gemm_io_bytes(prog_.gemm_sets[static_cast<std::size_t>(sets.gemm)], e_);
  const double passes = backward ? 2.0 : 1.0;
  // Each BatchNorm layer's traffic (workload/kernels.hpp): statistics and normalisation
  // forward (3 passes over its values), reduction and input gradient backward (5).
  const int n = g.batch_norm.layers;
  const double bn = n > 0 ? g.batch_norm.values / n * t_.micro_batch * e_ : 0.0;
  const double bn_passes = backward ? 5.0 : cat == Category::recompute ? 2.0 : 3.0;
  const double act = g.activations * t_.micro_batch * e_;
  if (sets.pieces[0].empty() || cat == Category::recompute) {
    auto deps = take_pending();
    next_kernels(backward ? sets.backward : cat == Category::recompute ? sets.recompute : sets.forward);
    const std::int64_t id = compute(ComputeWhat::layer, cat, sets.gemm, passes * flops,
                                    passes * gemm_bytes + act + n * bn_passes * bn, mb, chunk, layer, deps);
    if (backward) grad_ready_[static_cast<std::size_t>(layer)] = id;
    return;
  }
  // SyncBN: piece k of n + 1 (forward in order 0..n, backward n..0), a collective of BN k
  // (forward) or k - 1 (backward) on the dp group between consecutive pieces.
  const double stats = 4.0 * (2.0 * g.batch_norm.channels + 1.0) * p_.dp;  // every member's (2C + 1) fp32 values
  const double sums = 4.0 * 2.0 * g.batch_norm.channels;
  for (int i = 0; i <= n; ++i) {
    const int k = backward ? n - i : i;
    const bool gemm = k == 0;
    const double bytes = (gemm ? passes * gemm_bytes : 0.0) + (k == n ? act : 0.0) +
                         (backward ? (k < n ? 3.0 : 0.0) + (k > 0 ? 2.0 : 0.0) : (k > 0 ? 2.0 : 0.0) + (k < n ? 1.0 : 0.0)) * bn;
    const int set = gemm ? (backward ? sets.gemm_twice : sets.gemm) : -1;
    const std::int64_t id = piece(ComputeWhat::layer, cat, LayerPiece::block, k,
                                  sets.pieces[backward ? 1 : 0][static_cast<std::size_t>(k)], set,
                                  gemm ? passes * flops : 0.0, bytes, mb, chunk, layer, take_pending());
    if (i == n) {
      if (backward) grad_ready_[static_cast<std::size_t>(layer)] = id;
      break;
    }
    const std::int64_t c =
        collective(scenario::Dim::dp, backward ? CollectiveOp::all_reduce : CollectiveOp::all_gather, Category::bn_comm,
                   Stream::dp, backward ? sums : stats, mb, layer, layer + 1, std::span<const std::int64_t>(&id, 1));
    Op& o = prog_.ops[static_cast<std::size_t>(c)];
    o.pass = cat;
    o.step = static_cast<std::int16_t>(backward ? k - 1 : k);
    // PyTorch's SyncBatchNorm drops the statistics of members with no samples by a boolean
    // mask on the gathered counts, which waits on the host for the all-gather.
    o.host_sync = !backward;
    pending_ = c;
  }
}

// --- tensor-parallel communication overlap ---------------------------------------------------

void Builder::make_overlap_sets(const std::vector<workload::Gemm>& layer) {
  const long long tp = p_.tp;
  splits_ = overlap_splits(kernel_plan_);
  for (int b = 0; b < 2; ++b) {
    for (int half = 0; half < 2; ++half) {
      const workload::OverlapKernels k = overlap_kernels(
          kernel_plan_, half == 0 ? workload::LayerPart::attention : workload::LayerPart::mlp, b == 1, splits_);
      Pieces& pc = pieces_[b][half];
      pc.prepare = add_kernels(k.prepare);
      // fp8: the forward's first micro-batch casts the half's weights first.
      std::vector<workload::Kernel> casts =
          weight_cast_kernels(kernel_plan_, half == 0 ? workload::LayerPart::attention : workload::LayerPart::mlp);
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
      const workload::Gemm& first = layer[half == 0 ? 0 : 4];
      const workload::Gemm& second = layer[half == 0 ? 3 : 5];
      workload::Gemm column = b == 0 ? first : second;
      workload::Gemm row = b == 0 ? second : first;
      column.m /= tp;
      if (b == 0) row.m /= splits_;
      std::vector<workload::Gemm> middle;
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
      pc.middle_bytes = gemm_io_bytes(middle, e_) + layer_sets_[0].elementwise / 2;
      pc.column_bytes = column.io_bytes(e_);
      pc.row_bytes = row.io_bytes(e_);
      pc.wgrad_bytes = b == 1 ? first.io_bytes(e_) : 0.0;
    }
  }
}

std::int64_t Builder::piece(ComputeWhat part, Category cat, LayerPiece which, int step, int kernels, int gemms,
                            double flops, double bytes, int mb, int chunk, int layer,
                            std::span<const std::int64_t> deps) {
  next_kernels(kernels);
  const std::int64_t id = compute(part, cat, gemms, flops, bytes, mb, chunk, layer, deps);
  Op& o = prog_.ops[static_cast<std::size_t>(id)];
  o.piece = which;
  o.step = static_cast<std::int16_t>(step);
  return id;
}

std::int64_t Builder::ring_transfer(OpKind kind, int peer, std::int64_t ring, int step, ComputeWhat part, Category cat,
                                    int mb, int layer, std::span<const std::int64_t> deps) {
  // A transfer of one sequence block; apart from the pipeline transfers' ids (bit 62).
  const int sender = kind == OpKind::send ? rank_ : peer;
  const std::int64_t id =
      ring_p2p(kind, peer, activation_bytes_ / p_.tp, false, Category::tp_comm, part, cat, LayerPiece::column, step, mb,
               layer, (std::int64_t{1} << 62) + (ring * prog_.world + sender) * p_.tp + step, deps);
  prog_.ops[static_cast<std::size_t>(id)].tp_role = TpRole::ring;
  return id;
}

std::int64_t Builder::ring_p2p(OpKind kind, int peer, double bytes, bool gradient, Category category, ComputeWhat part,
                               Category pass, LayerPiece piece, int step, int mb, int layer, std::int64_t match,
                               std::span<const std::int64_t> deps) {
  // A point-to-point transfer on the pp-comm stream (posted in order, completing
  // independently), made a ring's: of the layer part and pass it serves, `match` the same
  // on both ends.
  const std::int64_t id = p2p(kind, peer, bytes, mb, -1, gradient, deps);
  Op& op = prog_.ops[static_cast<std::size_t>(id)];
  op.category = category;
  op.host_sync = false;  // Transformer Engine's loop issues it without a host synchronisation
  op.what = part;
  op.pass = pass;
  op.piece = piece;
  op.step = static_cast<std::int16_t>(step);
  op.layer = layer;
  op.layer_end = layer + 1;
  op.match = match;
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
  const auto [next, prev] = ring_neighbours(scenario::Dim::tp);
  const std::int64_t ring = rings_++;
  const std::vector<std::int64_t> deps = take_pending();
  const int prepare_set = cat == Category::forward && mb == 0 ? pc.prepare_first : pc.prepare;
  const std::int64_t prepare =
      piece(part, cat, LayerPiece::prepare, -1, prepare_set, -1, 0.0, 0.0, mb, chunk, layer, deps);
  std::int64_t have = prepare;  // where block j's input comes from
  for (int j = 0; j < tp; ++j) {
    std::int64_t arrived = -1;
    if (j + 1 < tp) {
      ring_transfer(OpKind::send, next, ring, j, part, cat, mb, layer, std::span(&have, 1));
      arrived = ring_transfer(OpKind::recv, prev, ring, j, part, cat, mb, layer, std::span(&prepare, 1));
    }
    piece(part, cat, LayerPiece::column, j, pc.column, pc.column_gemms, pc.column_flops, pc.column_bytes, mb, chunk,
          layer, std::span(&have, 1));
    have = arrived;
  }
  piece(part, cat, LayerPiece::middle, -1, pc.middle, pc.middle_gemms, pc.middle_flops, pc.middle_bytes, mb, chunk,
        layer, {});
  const int blocks = backward ? 1 : splits_;
  for (int j = 0; j < blocks; ++j) {
    const int kernels = backward || j + 1 < blocks ? pc.row : pc.row_last;
    const std::int64_t gemm = piece(part, cat, LayerPiece::row, backward ? -1 : j, kernels, pc.row_gemms, pc.row_flops,
                                    pc.row_bytes, mb, chunk, layer, {});
    const std::int64_t rs = collective(scenario::Dim::tp, CollectiveOp::reduce_scatter, Category::tp_comm, Stream::tp,
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

// --- context parallelism ---------------------------------------------------------------------

void Builder::make_context_sets(const std::vector<workload::Gemm>& layer) {
  const long long cp = p_.cp;
  workload::Gemm scores = layer[1];  // one ring step: this rank's queries against one cp rank's keys
  workload::Gemm values = layer[2];
  scores.n /= cp;
  values.k /= cp;
  const std::vector<workload::Gemm> block{scores, values};
  for (int b = 0; b < 2; ++b) {
    const workload::ContextKernels k = context_kernels(kernel_plan_, b == 1);
    ContextPieces& c = context_[b];
    c.prepare = add_kernels(k.prepare);
    // fp8: the forward's first micro-batch casts the half's weights first.
    std::vector<workload::Kernel> casts = weight_cast_kernels(kernel_plan_, workload::LayerPart::attention);
    casts.insert(casts.end(), k.prepare.begin(), k.prepare.end());
    c.prepare_first = b == 0 && casts.size() > k.prepare.size() ? add_kernels(std::move(casts)) : c.prepare;
    c.first = add_kernels(k.first);
    c.block = add_kernels(k.block);
    c.finish = add_kernels(k.finish);
    c.merge = b == 1 ? add_kernels(k.merge) : -1;
    // Forward: the QKV GEMM, the core's two per step, the projection; backward (each GEMM
    // twice: data and weight gradients) the projection's, the core's, the QKV's.
    const std::vector<workload::Gemm> prepare{layer[b == 0 ? 0 : 3]};
    const std::vector<workload::Gemm> finish{layer[b == 0 ? 3 : 0]};
    const double x = b == 0 ? 1.0 : 2.0;
    c.prepare_gemms = add_set(piece_runs(prepare, b == 1));
    c.block_gemms = add_set(piece_runs(block, b == 1));
    c.finish_gemms = add_set(piece_runs(finish, b == 1));
    c.prepare_flops = x * sum_flops(prepare);
    c.block_flops = x * sum_flops(block);
    c.finish_flops = x * sum_flops(finish);
    c.prepare_bytes = x * gemm_io_bytes(prepare, e_) + layer_sets_[0].elementwise / 4;
    c.block_bytes = x * gemm_io_bytes(block, e_);
    c.finish_bytes = x * gemm_io_bytes(finish, e_) + layer_sets_[0].elementwise / 4;
  }
}

std::int64_t Builder::cp_transfer(OpKind kind, int peer, std::int64_t ring, int step, Category cat, int mb, int layer,
                                  double bytes, bool grads, std::span<const std::int64_t> deps) {
  // `step`: the sender's. Apart from the pipeline transfers' and the tp rings' ids (bits 62, 61).
  const int sender = kind == OpKind::send ? rank_ : peer;
  return ring_p2p(kind, peer, bytes, grads, Category::cp_comm, ComputeWhat::layer_attention, cat, LayerPiece::block,
                  step, mb, layer,
                  (std::int64_t{1} << 61) + ((ring * prog_.world + sender) * 2 + (grads ? 1 : 0)) * p_.cp + step, deps);
}

// Ring attention (Transformer Engine's, load-balanced causal chunks): rank i (cp index)
// holds at step j the keys and values of cp rank (i - j) mod cp and runs its queries
// against them (step 0: its own, the causal diagonal) while passing them on to rank i + 1
// and receiving the next from rank i - 1: a block moves on as soon as it is here. Every
// receive waits for the prepare piece (its buffer is free by then).
//
// Backward the keys and values go round the same way, and their gradients follow one step
// behind: step j's block computes this rank's share of cp rank (i - j)'s gradients, a
// merge adds the sum the ranks before it sent (which travelled during the block), and the
// sum moves on; after the last step it goes home to its owner, which the finish waits for.
void Builder::context_half(int layer, int mb, int chunk, Category cat) {
  const bool backward = cat == Category::backward;
  const ContextPieces& pc = context_[backward ? 1 : 0];
  const int cp = p_.cp;
  const auto [next, prev] = ring_neighbours(scenario::Dim::cp);
  const std::int64_t ring = rings_++;
  const double kv = cp_block_bytes_;
  const ComputeWhat part = ComputeWhat::layer_attention;
  const std::vector<std::int64_t> deps = take_pending();
  const int prepare_set = cat == Category::forward && mb == 0 ? pc.prepare_first : pc.prepare;
  const std::int64_t prepare = piece(part, cat, LayerPiece::prepare, -1, prepare_set, pc.prepare_gemms,
                                     pc.prepare_flops, pc.prepare_bytes, mb, chunk, layer, deps);
  std::int64_t have = prepare;  // what step j's block waits for: its keys and values being here
  for (int j = 0; j < cp; ++j) {
    std::int64_t arrived = -1;
    if (j + 1 < cp) {
      cp_transfer(OpKind::send, next, ring, j, cat, mb, layer, kv, false, std::span(&have, 1));
      arrived = cp_transfer(OpKind::recv, prev, ring, j, cat, mb, layer, kv, false, std::span(&prepare, 1));
    }
    std::int64_t done = piece(part, cat, LayerPiece::block, j, j == 0 ? pc.first : pc.block, pc.block_gemms,
                              pc.block_flops, pc.block_bytes, mb, chunk, layer, std::span(&have, 1));
    if (backward) {
      if (j > 0) {  // the sum so far of this block's gradients, sent by rank i - 1 after its step j - 1
        const std::int64_t sum =
            cp_transfer(OpKind::recv, prev, ring, j - 1, cat, mb, layer, kv, true, std::span(&prepare, 1));
        done =
            piece(part, cat, LayerPiece::merge, j, pc.merge, -1, 0.0, 3.0 * kv, mb, chunk, layer, std::span(&sum, 1));
      }
      cp_transfer(OpKind::send, next, ring, j, cat, mb, layer, kv, true, std::span(&done, 1));
    }
    have = arrived;
  }
  std::vector<std::int64_t> home;  // backward: this rank's own gradients, summed over the ring
  if (backward)
    home.push_back(cp_transfer(OpKind::recv, prev, ring, cp - 1, cat, mb, layer, kv, true, std::span(&prepare, 1)));
  piece(part, cat, LayerPiece::finish, -1, pc.finish, pc.finish_gemms, pc.finish_flops, pc.finish_bytes, mb, chunk,
        layer, home);
}

}  // namespace parasim::program::detail
