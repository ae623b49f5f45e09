// compile(): the Program of one training step, rank by rank. See program.hpp for the
// execution rules and docs/architecture.md for the op vocabulary.
//
// Per rank (tp index, dp index, stage s), following its stage's pipeline schedule:
//   forward (mb, c)   recv activations (unless first chunk of the model) | embedding;
//                     per layer: attention, TP collective(s), MLP, TP collective(s);
//                     LM head + loss (last chunk) | send activations
//   backward (mb, c)  LM head backward (last chunk) | recv gradients;
//                     recompute (full: the chunk's forward again; selective: attention core);
//                     per layer, last first: MLP backward, TP collective(s), attention
//                     backward, TP collective(s); send gradients (unless first chunk)
//   then              data-parallel gradient buckets in reverse layer order, each after the
//                     last backward of its layers (after the whole backward when overlap is
//                     off): all-reduce, or reduce-scatter with ZeRO-1; the optimizer; with
//                     ZeRO-1 an all-gather of the updated parameters per bucket (or, with
//                     overlap_param_gather, the same gathers first in the step, each
//                     layer's first forward waiting for its own). ZeRO-2 and -3 instead
//                     reduce-scatter each unit's gradients (embedding, layer, head)
//                     after every backward of it, and ZeRO-3 all-gathers a unit's
//                     parameters before each pass over it, one unit ahead.
// Tensor parallel collectives are all-reduces of the s·b·h activation (two forward, two
// backward per layer), or with sequence parallelism all-gather / reduce-scatter pairs. The
// embedding and LM head are vocabulary-parallel (Megatron): the embedding's output and the
// head's input gradient are summed over tp like a layer's, and the cross-entropy gathers
// three fp32 statistics per token.
#include <cmath>

#include "program/compile_builder.hpp"

namespace parasim::program {

namespace detail {

void Builder::make_layer_sets(const scenario::ModelSpec& spec, LayerSets& out) {
  const workload::KernelPlan kp = layer_kernel_plan(kernel_plan_, spec);
  for (int b = 0; b < 2; ++b) {
    out.kernels[b][0] = add_kernels(layer_kernels(kp, workload::LayerPart::whole, b == 1));
    out.kernels[b][1] = add_kernels(layer_kernels(kp, workload::LayerPart::attention, b == 1));
    out.kernels[b][2] = add_kernels(layer_kernels(kp, workload::LayerPart::mlp, b == 1));
  }
  // fp8: a step's first forward of each layer also casts its weights (weight_cast_kernels).
  const workload::LayerPart parts[] = {workload::LayerPart::whole, workload::LayerPart::attention,
                                       workload::LayerPart::mlp};
  for (int i = 0; i < 3; ++i) {
    const std::vector<workload::Kernel> casts = weight_cast_kernels(kp, parts[i]);
    if (casts.empty()) {
      out.first[i] = out.kernels[0][i];
      continue;
    }
    std::vector<workload::Kernel> k = casts;
    const std::vector<workload::Kernel> rest = layer_kernels(kp, parts[i], false);
    k.insert(k.end(), rest.begin(), rest.end());
    out.first[i] = add_kernels(std::move(k));
  }
  const std::vector<workload::Gemm> layer =
      workload::layer_forward_gemms(spec, t_.micro_batch, p_.tp, p_.cp, p_.ep, spec.expert_load());
  const auto attention = layer.begin() + workload::attention_gemm_count(spec);
  out.attention = add_set({layer.begin(), attention});
  out.mlp = add_set({attention, layer.end()});
  out.whole = add_set(layer);
  // Element-wise traffic (norms, softmax, GELU, dropout): each stored tensor written once
  // forward and read once backward.
  out.elementwise = workload::layer_activation_bytes(spec, t_.micro_batch, p_.tp, p_.sequence_parallel,
                                                     scenario::Recompute::none, e_) /
                    p_.cp;
  out.activation = workload::layer_activation_bytes(spec, t_.micro_batch, p_.tp, p_.sequence_parallel, t_.recompute, e_,
                                                    scenario::fused(t_.attention),
                                                    t_.precision == scenario::Dtype::fp8 ? 1 : 0) /
                   p_.cp;
  out.moe_split = spec.moe() && (p_.ep > 1 || p_.tp > 1);
  if (out.moe_split) make_moe_sets(layer);
}

void Builder::make_gemm_sets() {
  const workload::KernelPlan kp = kernel_plan_;
  if (m_.kind == scenario::ModelKind::transformer) {
    make_layer_sets(m_, layer_sets_[0]);
    if (m_.moe() && m_.dense_layers > 0) make_layer_sets(m_.layer_spec(0), layer_sets_[1]);
    for (int b = 0; b < 2; ++b) {
      embedding_kernels_[b] = add_kernels(embedding_kernels(kp, b == 1));
      head_kernels_[b] = add_kernels(head_kernels(kp, b == 1));
    }
    core_kernels_ = add_kernels(layer_kernels(kp, workload::LayerPart::attention_core, false));
    const std::vector<workload::Gemm> layer =
        workload::layer_forward_gemms(m_, t_.micro_batch, p_.tp, p_.cp, p_.ep, m_.expert_load());
    const auto core =
        layer.begin() + workload::attention_gemm_count(m_) - 3;  // the core's two, before the projection out
    core_set_ = add_set({core, core + 2});
    overlap_ = p_.tp_comm_overlap && p_.tp > 1 && p_.sequence_parallel;
    head_set_ = add_set({workload::lm_head_gemm(m_, t_.micro_batch, p_.tp, p_.cp)});
    // This rank's positions: s/cp of each sequence under context parallelism.
    const double sbh = static_cast<double>(m_.seq_len / p_.cp) * t_.micro_batch * m_.hidden;
    activation_bytes_ = sbh * e_;  // one s·b·h tensor: a TP collective's buffer
    if (overlap_) make_overlap_sets(layer);
    if (p_.cp > 1) {
      cp_block_bytes_ = workload::cp_kv_block_bytes(scenario_);
      make_context_sets(layer);
    }
  } else {
    // A GEMM of the same FLOPs and parameters per layer (generic_layer_gemm): the ops
    // count its FLOPs, which the executor performs.
    // Under SyncBN each pass of a layer with BatchNorm is split around its collectives.
    for (const scenario::GenericLayer& l : m_.generic_layers) {
      GenericSets g;
      g.gemm = add_set({workload::generic_layer_gemm(l, t_.micro_batch)});
      g.forward = add_kernels(generic_layer_kernels(kernel_plan_, l, false));
      g.recompute = add_kernels(generic_layer_kernels(kernel_plan_, l, false, workload::recompute_layer));
      g.backward = add_kernels(generic_layer_kernels(kernel_plan_, l, true));
      if (kernel_plan_.bn_members > 1 && l.batch_norm.layers > 0) {
        g.gemm_twice = add_set(piece_runs(prog_.gemm_sets[static_cast<std::size_t>(g.gemm)], true));
        for (int k = 0; k <= l.batch_norm.layers; ++k) {
          for (int b = 0; b < 2; ++b) g.pieces[b].push_back(add_kernels(generic_layer_kernels(kernel_plan_, l, b == 1, k)));
        }
      }
      generic_.push_back(std::move(g));
    }
  }
}

void Builder::compile_rank(int rank) {
  rank_ = rank;
  coord_ = coord_of(p_, rank);
  const int stage = coord_.pp;
  const int last_stage = p_.pp - 1;
  const int v = p_.virtual_stages;
  last_compute_ = -1;
  pending_ = -1;
  rings_ = 0;
  grad_ready_.assign(static_cast<std::size_t>(m_.layer_count()), -1);
  grad_also_.assign(grad_ready_.size(), -1);
  loss_ready_.assign(static_cast<std::size_t>(shape_.micro_batches), -1);
  const bool transformer = m_.kind == scenario::ModelKind::transformer;
  const double hidden_bytes = transformer ? activation_bytes_ : 0.0;
  std::int64_t head_grad = -1;
  std::int64_t embed_grad = -1;
  param_gathers_first();
  const auto units = static_cast<std::size_t>(m_.layer_count()) + 2;
  unit_params_.assign(units, 0.0);
  for (const workload::GradientSource& g : sources()) unit_params_[static_cast<std::size_t>(g.layer + 1)] += g.params;
  prefetched_.assign(units, -1);
  unit_synced_.assign(units, -1);
  unit_waits_.clear();
  activations_out_.clear();

  for (const workload::PipelineStep& st : stage_schedule(p_.schedule, shape_, stage)) {
    const auto [first, last] = workload::chunk_layers(m_.layer_count(), p_.pp, v, stage, st.chunk);
    const bool first_chunk = stage == 0 && st.chunk == 0;
    const bool last_chunk = stage == last_stage && st.chunk == v - 1;
    // Neighbours in model order: the previous chunk lives on stage s-1 (or, for stage 0,
    // chunk c-1 on the last stage); the next on stage s+1 (or chunk c+1 on stage 0).
    const int prev_rank = peer_stage_rank(stage == 0 ? last_stage : stage - 1);
    const int prev_chunk = stage == 0 ? st.chunk - 1 : st.chunk;
    const int next_rank = peer_stage_rank(stage == last_stage ? 0 : stage + 1);
    const int next_chunk = stage == last_stage ? st.chunk + 1 : st.chunk;
    const double boundary = boundary_bytes(first - 1);  // into this chunk, one micro-batch
    // The units whose parameters this pass computes with, in order (ZeRO-3 gathers each).
    std::vector<int> uses;
    if (st.kind == workload::PipelineStep::Kind::forward) {
      if (first_chunk) uses.push_back(-1);
      for (int l = first; l < last; ++l) uses.push_back(l);
      if (last_chunk && transformer) uses.push_back(m_.layer_count());
    } else {
      if (last_chunk && transformer) uses.push_back(m_.layer_count());
      if (t_.recompute == scenario::Recompute::full) {
        for (int l = first; l < last; ++l) uses.push_back(l);
      }
      for (int l = last - 1; l >= first; --l) uses.push_back(l);
    }
    std::size_t use = 0;
    auto gather = [&] {
      gather_params(uses[use], use + 1 < uses.size() ? uses[use + 1] : no_unit);
      ++use;
    };

    if (st.kind == workload::PipelineStep::Kind::forward) {
      if (first_chunk) {
        gather();
        if (transformer) next_kernels(embedding_kernels_[0]);
        compute(ComputeWhat::embedding, Category::forward, -1, 0.0, hidden_bytes, st.micro_batch, st.chunk, -1);
        // Vocabulary-parallel embedding: each tp rank looks up its slice of the vocabulary
        // and the partial rows are summed (scattered by sequence with sequence parallel).
        if (transformer && p_.tp > 1) {
          tp_collective(p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, st.micro_batch,
                        -1, TpRole::sum, ComputeWhat::embedding, Category::forward);
        }
      } else {
        pending_ = p2p(OpKind::recv, prev_rank, boundary, st.micro_batch, prev_chunk, false, {});
        gather_transfer(first, st.micro_batch, false);
      }
      for (int l = first; l < last; ++l) {
        gather();
        layer_forward(l, st.micro_batch, st.chunk, Category::forward);
        activations_out(l, st.micro_batch);
      }
      if (last_chunk) {
        if (transformer) gather();  // the final norm's and the head's parameters
        if (transformer && p_.tp > 1 && p_.sequence_parallel) {
          tp_collective(CollectiveOp::all_gather, st.micro_batch, m_.layer_count(), TpRole::gather_input,
                        ComputeWhat::lm_head, Category::forward);
        }
        auto deps = take_pending();
        if (transformer) {
          const auto& g = prog_.gemm_sets[static_cast<std::size_t>(head_set_)];
          next_kernels(head_kernels_[0]);
          const std::int64_t head = compute(ComputeWhat::lm_head, Category::forward, head_set_, sum_flops(g),
                                            gemm_io_bytes(g, e_), st.micro_batch, st.chunk, m_.layer_count(), deps);
          // Vocabulary-parallel cross-entropy: each tp rank holds the logits of its slice;
          // the row maxima, sums of exponentials and target logits (3 fp32 values per
          // token) are gathered so every rank has the loss. Its backward waits for them.
          if (p_.tp > 1) {
            const double stats = 3.0 * 4.0 * static_cast<double>(m_.seq_len / p_.cp) * t_.micro_batch * p_.tp;
            loss_ready_[static_cast<std::size_t>(st.micro_batch)] = collective(
                scenario::Dim::tp, CollectiveOp::all_gather, Category::tp_comm, Stream::tp, stats, st.micro_batch,
                m_.layer_count(), m_.layer_count() + 1, std::span<const std::int64_t>(&head, 1));
            tag_tp(loss_ready_[static_cast<std::size_t>(st.micro_batch)], TpRole::loss_stats, ComputeWhat::lm_head,
                   Category::forward);
          }
        }
      } else {
        // The chunk's output is complete once its last tp sum is (when there is one).
        auto deps = take_pending();
        deps.push_back(last_compute_);
        p2p(OpKind::send, next_rank, boundary_bytes(last - 1), st.micro_batch, st.chunk, false, deps);
      }
    } else {
      if (last_chunk) {
        if (transformer) {
          const auto& g = prog_.gemm_sets[static_cast<std::size_t>(head_set_)];
          std::vector<std::int64_t> deps;
          if (p_.tp > 1) deps.push_back(loss_ready_[static_cast<std::size_t>(st.micro_batch)]);
          gather();
          wait_for_grad_sync(m_.layer_count());
          next_kernels(head_kernels_[1]);
          head_grad = compute(ComputeWhat::lm_head, Category::backward, head_set_, 2 * sum_flops(g),
                              2 * gemm_io_bytes(g, e_), st.micro_batch, st.chunk, m_.layer_count(), deps);
          // The head's input gradient is a partial sum over the vocabulary slices.
          if (p_.tp > 1) {
            tp_collective(p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                          st.micro_batch, m_.layer_count(), TpRole::sum, ComputeWhat::lm_head, Category::backward);
            head_grad = pending_;  // the final norm's gradient follows the sum
          }
          shard_grads(m_.layer_count(), st.micro_batch, std::span<const std::int64_t>(&head_grad, 1));
        }
      } else {
        pending_ = p2p(OpKind::recv, next_rank, boundary_bytes(last - 1), st.micro_batch, next_chunk, true, {});
        gather_transfer(last, st.micro_batch, true);
      }
      if (t_.recompute == scenario::Recompute::full) {
        for (int l = first; l < last; ++l) {
          gather();
          layer_forward(l, st.micro_batch, st.chunk, Category::recompute);
        }
      } else if (t_.recompute == scenario::Recompute::selective && transformer) {
        for (int l = first; l < last; ++l) {
          const auto& g = prog_.gemm_sets[static_cast<std::size_t>(core_set_)];
          auto deps = take_pending();
          next_kernels(core_kernels_);
          compute(ComputeWhat::attention_core, Category::recompute, core_set_, sum_flops(g), gemm_io_bytes(g, e_),
                  st.micro_batch, st.chunk, l, deps);
        }
      }
      std::int64_t fetched = activations_in(last - 1, st.micro_batch);
      for (int l = last - 1; l >= first; --l) {
        gather();
        wait_for_grad_sync(l);
        // Offloaded activations: this layer's came in during the layer before; the next
        // one's come in during this one.
        if (fetched >= 0) unit_waits_.push_back(fetched);
        fetched = l > first ? activations_in(l - 1, st.micro_batch) : -1;
        layer_backward(l, st.micro_batch, st.chunk);
        const std::int64_t ready[] = {grad_ready_[static_cast<std::size_t>(l)],
                                      grad_also_[static_cast<std::size_t>(l)]};
        shard_grads(l, st.micro_batch, ready);
      }
      if (first_chunk) {
        // Under sequence parallelism the embedding's output was scattered by sequence; its
        // backward gathers the gradient first (the scatter's backward).
        if (transformer && p_.tp > 1 && p_.sequence_parallel) {
          tp_collective(CollectiveOp::all_gather, st.micro_batch, -1, TpRole::gather_input, ComputeWhat::embedding,
                        Category::backward);
        }
        auto deps = take_pending();
        wait_for_grad_sync(-1);
        if (transformer) next_kernels(embedding_kernels_[1]);
        embed_grad = compute(ComputeWhat::embedding, Category::backward, -1, 0.0, hidden_bytes, st.micro_batch,
                             st.chunk, -1, deps);
        shard_grads(-1, st.micro_batch, std::span<const std::int64_t>(&embed_grad, 1));
      } else {
        auto deps = take_pending();
        deps.push_back(last_compute_);
        p2p(OpKind::send, prev_rank, boundary, st.micro_batch, st.chunk, true, deps);
      }
    }
  }
  data_parallel_and_optimizer(head_grad, embed_grad);
}

void Builder::gather_transfer(int layer, int mb, bool gradient) {
  if (!scatter_gather()) return;
  const std::int64_t recv = pending_;
  pending_ = collective(scenario::Dim::tp, CollectiveOp::all_gather, Category::tp_comm, Stream::tp, activation_bytes_,
                        mb, layer, layer + 1, std::span<const std::int64_t>(&recv, 1));
  tag_tp(pending_, TpRole::pp_gather, ComputeWhat::layer, gradient ? Category::backward : Category::forward);
  prog_.ops[static_cast<std::size_t>(pending_)].gradient = gradient;
}

}  // namespace detail

Program compile(const scenario::Scenario& s, CompileOptions options) {
  return detail::Builder(s).build(options);
}

}  // namespace parasim::program
