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
//                     layer's first forward waiting for its own).
// Tensor parallel collectives are all-reduces of the s·b·h activation (two forward, two
// backward per layer), or with sequence parallelism all-gather / reduce-scatter pairs. The
// embedding and LM head are vocabulary-parallel (Megatron): the embedding's output and the
// head's input gradient are summed over tp like a layer's, and the cross-entropy gathers
// three fp32 statistics per token.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

#include "plan/buckets.hpp"
#include "plan/program.hpp"
#include "plan/schedule.hpp"

namespace parasim::plan {

namespace {

class Builder {
 public:
  explicit Builder(const Scenario& s) : scenario_(s), p_(s.plan), m_(s.model), t_(s.training), kernel_plan_(kernel_plan(s)) {
    e_ = topology::dtype_bytes(t_.precision);
    g_ = topology::dtype_bytes(t_.grad_dtype);
    shape_ = PipelineShape{p_.pp, s.micro_batches(), p_.virtual_stages};
    prog_.world = p_.world();
    prog_.order.resize(static_cast<std::size_t>(prog_.world));
    make_groups();
    make_gemm_sets();
  }

  Program build(const CompileOptions& options) {
    const bool fold = options.one_replica && p_.dp > 1;
    for (int r = 0; r < prog_.world; ++r) {
      Coord c = coord_of(p_, r);
      if (fold) {
        c.dp = 0;
        prog_.mirror_of.push_back(rank_of(p_, c));
        if (prog_.mirror_of.back() != r) continue;
      }
      compile_rank(r);
    }
    return std::move(prog_);
  }

 private:
  // --- groups and shapes ---------------------------------------------------------------
  void make_groups() {
    group_of_ = add_groups(p_, m_, prog_);
    // A rank is in one group per dimension and at most one embedding group: one collective
    // counter per (rank, kind of group).
    counters_.assign(4 * static_cast<std::size_t>(prog_.world), 0);
  }

  static std::size_t dim_index(Dim d) { return static_cast<std::size_t>(d); }

  void make_gemm_sets() {
    const KernelPlan kp = kernel_plan_;
    if (m_.kind == ModelKind::transformer) {
      for (int b = 0; b < 2; ++b) {
        layer_kernels_[b][0] = add_kernels(layer_kernels(kp, LayerPart::whole, b == 1));
        layer_kernels_[b][1] = add_kernels(layer_kernels(kp, LayerPart::attention, b == 1));
        layer_kernels_[b][2] = add_kernels(layer_kernels(kp, LayerPart::mlp, b == 1));
        embedding_kernels_[b] = add_kernels(embedding_kernels(kp, b == 1));
        head_kernels_[b] = add_kernels(head_kernels(kp, b == 1));
      }
      core_kernels_ = add_kernels(layer_kernels(kp, LayerPart::attention_core, false));
      const std::vector<Gemm> layer = layer_forward_gemms(m_, t_.micro_batch, p_.tp);
      attention_set_ = add_set({layer.begin(), layer.begin() + 4});
      mlp_set_ = add_set({layer.begin() + 4, layer.end()});
      core_set_ = add_set({layer.begin() + 1, layer.begin() + 3});
      layer_set_ = add_set(layer);
      head_set_ = add_set({lm_head_gemm(m_, t_.micro_batch, p_.tp)});
      const double sbh = static_cast<double>(m_.seq_len) * t_.micro_batch * m_.hidden;
      activation_bytes_ = sbh * e_;  // one s·b·h tensor: a TP collective's buffer
      // Element-wise traffic (norms, softmax, GELU, dropout): each stored tensor written
      // once forward and read once backward.
      elementwise_bytes_ = layer_activation_bytes(m_, t_.micro_batch, p_.tp, p_.sequence_parallel, Recompute::none, e_);
    } else {
      // A GEMM of the same FLOPs and parameters per layer (generic_layer_gemm): the ops
      // count its FLOPs, which the executor performs.
      for (const GenericLayer& l : m_.generic_layers) {
        generic_sets_.push_back(add_set({generic_layer_gemm(l, t_.micro_batch)}));
        generic_kernels_.push_back({add_kernels(generic_layer_kernels(kernel_plan_, l, false)),
                                    add_kernels(generic_layer_kernels(kernel_plan_, l, true))});
      }
    }
  }

  template <typename T>
  static int append(std::vector<std::vector<T>>& sets, std::vector<T> set) {
    sets.push_back(std::move(set));
    return static_cast<int>(sets.size()) - 1;
  }
  int add_set(std::vector<Gemm> g) { return append(prog_.gemm_sets, std::move(g)); }
  int add_kernels(std::vector<Kernel> k) { return append(prog_.kernel_sets, std::move(k)); }
  // The kernel set of the op about to be emitted (compute() attaches it).
  void next_kernels(int set) { next_kernels_ = set; }

  // --- emitting ops -------------------------------------------------------------------
  std::int64_t add(Op op, std::span<const std::int64_t> deps) {
    op.deps_begin = static_cast<std::uint32_t>(prog_.deps.size());
    op.deps_count = static_cast<std::uint32_t>(deps.size());
    prog_.deps.insert(prog_.deps.end(), deps.begin(), deps.end());
    const auto id = static_cast<std::int64_t>(prog_.ops.size());
    prog_.ops.push_back(op);
    prog_.order[static_cast<std::size_t>(op.rank)].push_back(id);
    return id;
  }
  std::int64_t add(Op op, std::initializer_list<std::int64_t> deps = {}) {
    return add(op, std::span<const std::int64_t>(deps.begin(), deps.size()));
  }

  std::int64_t compute(ComputeWhat what, Category cat, int set, double flops, double bytes, int mb, int chunk,
                       int layer, std::span<const std::int64_t> deps = {}) {
    Op op;
    op.kind = OpKind::compute;
    op.category = cat;
    op.stream = Stream::compute;
    op.what = what;
    op.rank = rank_;
    op.micro_batch = mb;
    op.chunk = static_cast<std::int16_t>(chunk);
    op.layer = layer;
    op.layer_end = layer + 1;
    op.flops = flops;
    op.bytes = bytes;
    op.gemms = set;
    op.gemm_repeat = set >= 0 ? 1 : 0;
    op.kernels = next_kernels_;
    next_kernels_ = -1;
    // The first forward touching a layer's parameters waits for their deferred all-gather.
    if (const auto at = static_cast<std::size_t>(layer + 1); cat == Category::forward && gather_before_[at] >= 0) {
      std::vector<std::int64_t> d(deps.begin(), deps.end());
      d.push_back(std::exchange(gather_before_[at], -1));
      return last_compute_ = add(op, d);
    }
    return last_compute_ = add(op, deps);
  }

  // A collective on this rank's group of dimension `d`; members get the same instance id
  // because every member issues the same sequence of collectives on their group.
  std::int64_t collective(Dim d, CollectiveOp what, Category cat, Stream stream, double bytes, int mb, int layer,
                          int layer_end, std::span<const std::int64_t> deps) {
    return collective_in(dim_index(d), what, cat, stream, bytes, mb, layer, layer_end, deps);
  }

  // `kind`: dim_index() of a dimension's groups, or embedding_groups.
  std::int64_t collective_in(std::size_t kind, CollectiveOp what, Category cat, Stream stream, double bytes, int mb,
                             int layer, int layer_end, std::span<const std::int64_t> deps) {
    const int group = group_of_[kind][static_cast<std::size_t>(rank_)];
    std::int64_t& counter = counters_[4 * static_cast<std::size_t>(rank_) + kind];
    Op op;
    op.kind = OpKind::collective;
    op.category = cat;
    op.stream = stream;
    op.collective = what;
    op.rank = rank_;
    op.micro_batch = mb;
    op.layer = layer;
    op.layer_end = layer_end;
    op.bytes = bytes;
    op.group = group;
    op.match = (static_cast<std::int64_t>(group) << 32) | counter++;
    if (rank_ == prog_.groups[static_cast<std::size_t>(group)].ranks.front()) ++prog_.collectives;
    return add(op, deps);
  }

  // One TP collective after the last compute op (and after a pending receive, when it
  // opens a layer); the next compute waits for it. `part` and `pass` name the compute op it
  // serves, `role` what it does for it.
  void tp_collective(CollectiveOp what, int mb, int layer, TpRole role, ComputeWhat part, Category pass) {
    std::vector<std::int64_t> deps = take_pending();
    if (last_compute_ >= 0) deps.push_back(last_compute_);
    pending_ = collective(Dim::tp, what, Category::tp_comm, Stream::tp, activation_bytes_, mb, layer, layer + 1, deps);
    tag_tp(pending_, role, part, pass);
  }

  void tag_tp(std::int64_t op, TpRole role, ComputeWhat part, Category pass) {
    Op& o = prog_.ops[static_cast<std::size_t>(op)];
    o.tp_role = role;
    o.what = part;
    o.pass = pass;
  }

  std::int64_t p2p(OpKind kind, int peer, double bytes, int mb, int chunk, bool gradient,
                   std::span<const std::int64_t> deps) {
    const int sender = kind == OpKind::send ? rank_ : peer;
    const int receiver = kind == OpKind::send ? peer : rank_;
    Op op;
    op.kind = kind;
    op.category = Category::pp_comm;
    op.stream = Stream::pp;
    op.rank = rank_;
    op.peer = peer;
    op.micro_batch = mb;
    op.chunk = static_cast<std::int16_t>(chunk);
    op.bytes = bytes;
    op.gradient = gradient;
    op.host_sync = true;  // Megatron synchronises the device after its batched transfers
    op.match = (((static_cast<std::int64_t>(sender) * prog_.world + receiver) * 2 + (gradient ? 1 : 0)) *
                    shape_.micro_batches + mb) * shape_.virtual_stages + chunk;
    if (kind == OpKind::send) ++prog_.transfers;
    return add(op, deps);
  }

  // Dependencies for the next compute op: what it waits for besides stream order.
  std::vector<std::int64_t> take_pending() {
    std::vector<std::int64_t> d;
    if (pending_ >= 0) d.push_back(pending_);
    pending_ = -1;
    return d;
  }

  // --- one layer ------------------------------------------------------------------------
  void layer_forward(int layer, int mb, int chunk, Category cat) {
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
      next_kernels(layer_kernels_[0][0]);
      compute(ComputeWhat::layer, cat, layer_set_, sum_flops(sets[static_cast<std::size_t>(layer_set_)]),
              gemm_io_bytes(sets[static_cast<std::size_t>(layer_set_)], e_) + elementwise_bytes_, mb, chunk, layer, deps);
      return;
    }
    const bool sp = p_.sequence_parallel;
    for (int half = 0; half < 2; ++half) {
      const int set = half == 0 ? attention_set_ : mlp_set_;
      const ComputeWhat part = half == 0 ? ComputeWhat::layer_attention : ComputeWhat::layer_mlp;
      if (sp) tp_collective(CollectiveOp::all_gather, mb, layer, TpRole::gather_input, part, cat);
      auto deps = take_pending();
      next_kernels(layer_kernels_[0][half == 0 ? 1 : 2]);
      compute(part, cat, set, sum_flops(sets[static_cast<std::size_t>(set)]),
              gemm_io_bytes(sets[static_cast<std::size_t>(set)], e_) + elementwise_bytes_ / 2, mb, chunk, layer, deps);
      tp_collective(sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, mb, layer, TpRole::sum, part, cat);
    }
  }

  void layer_backward(int layer, int mb, int chunk) {
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

  // --- one rank ----------------------------------------------------------------------------
  int peer_stage_rank(int stage) const {
    Coord c = coord_;
    c.pp = stage;
    return rank_of(p_, c);
  }

  void compile_rank(int rank) {
    rank_ = rank;
    coord_ = coord_of(p_, rank);
    const int stage = coord_.pp;
    const int last_stage = p_.pp - 1;
    const int v = p_.virtual_stages;
    last_compute_ = -1;
    pending_ = -1;
    grad_ready_.assign(static_cast<std::size_t>(m_.layer_count()), -1);
    loss_ready_.assign(static_cast<std::size_t>(shape_.micro_batches), -1);
    const bool transformer = m_.kind == ModelKind::transformer;
    const double hidden_bytes = transformer ? activation_bytes_ : 0.0;
    std::int64_t head_grad = -1;
    std::int64_t embed_grad = -1;
    param_gathers_first();

    for (const PipelineStep& st : stage_schedule(p_.schedule, shape_, stage)) {
      const auto [first, last] = chunk_layers(m_.layer_count(), p_.pp, v, stage, st.chunk);
      const bool first_chunk = stage == 0 && st.chunk == 0;
      const bool last_chunk = stage == last_stage && st.chunk == v - 1;
      // Neighbours in model order: the previous chunk lives on stage s-1 (or, for stage 0,
      // chunk c-1 on the last stage); the next on stage s+1 (or chunk c+1 on stage 0).
      const int prev_rank = peer_stage_rank(stage == 0 ? last_stage : stage - 1);
      const int prev_chunk = stage == 0 ? st.chunk - 1 : st.chunk;
      const int next_rank = peer_stage_rank(stage == last_stage ? 0 : stage + 1);
      const int next_chunk = stage == last_stage ? st.chunk + 1 : st.chunk;
      const double boundary = boundary_bytes(first - 1);  // into this chunk, one micro-batch

      if (st.kind == PipelineStep::Kind::forward) {
        if (first_chunk) {
          if (transformer) next_kernels(embedding_kernels_[0]);
          compute(ComputeWhat::embedding, Category::forward, -1, 0.0, hidden_bytes, st.micro_batch, st.chunk, -1);
          // Vocabulary-parallel embedding: each tp rank looks up its slice of the vocabulary
          // and the partial rows are summed (scattered by sequence with sequence parallel).
          if (transformer && p_.tp > 1) {
            tp_collective(p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                          st.micro_batch, -1, TpRole::sum, ComputeWhat::embedding, Category::forward);
          }
        } else {
          pending_ = p2p(OpKind::recv, prev_rank, boundary, st.micro_batch, prev_chunk, false, {});
          gather_transfer(first, st.micro_batch, false);
        }
        for (int l = first; l < last; ++l) layer_forward(l, st.micro_batch, st.chunk, Category::forward);
        if (last_chunk) {
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
              const double stats = 3.0 * 4.0 * static_cast<double>(m_.seq_len) * t_.micro_batch * p_.tp;
              loss_ready_[static_cast<std::size_t>(st.micro_batch)] =
                  collective(Dim::tp, CollectiveOp::all_gather, Category::tp_comm, Stream::tp, stats, st.micro_batch,
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
            next_kernels(head_kernels_[1]);
            head_grad = compute(ComputeWhat::lm_head, Category::backward, head_set_, 2 * sum_flops(g),
                                2 * gemm_io_bytes(g, e_), st.micro_batch, st.chunk, m_.layer_count(), deps);
            // The head's input gradient is a partial sum over the vocabulary slices.
            if (p_.tp > 1) {
              tp_collective(p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                            st.micro_batch, m_.layer_count(), TpRole::sum, ComputeWhat::lm_head, Category::backward);
              head_grad = pending_;  // the final norm's gradient follows the sum
            }
          }
        } else {
          pending_ = p2p(OpKind::recv, next_rank, boundary_bytes(last - 1), st.micro_batch, next_chunk, true, {});
          gather_transfer(last, st.micro_batch, true);
        }
        if (t_.recompute == Recompute::full) {
          for (int l = first; l < last; ++l) layer_forward(l, st.micro_batch, st.chunk, Category::recompute);
        } else if (t_.recompute == Recompute::selective && transformer) {
          for (int l = first; l < last; ++l) {
            const auto& g = prog_.gemm_sets[static_cast<std::size_t>(core_set_)];
            auto deps = take_pending();
            next_kernels(core_kernels_);
            compute(ComputeWhat::attention_core, Category::recompute, core_set_, sum_flops(g), gemm_io_bytes(g, e_),
                    st.micro_batch, st.chunk, l, deps);
          }
        }
        for (int l = last - 1; l >= first; --l) layer_backward(l, st.micro_batch, st.chunk);
        if (first_chunk) {
          // Under sequence parallelism the embedding's output was scattered by sequence; its
          // backward gathers the gradient first (the scatter's backward).
          if (transformer && p_.tp > 1 && p_.sequence_parallel) {
            tp_collective(CollectiveOp::all_gather, st.micro_batch, -1, TpRole::gather_input, ComputeWhat::embedding,
                          Category::backward);
          }
          auto deps = take_pending();
          if (transformer) next_kernels(embedding_kernels_[1]);
          embed_grad = compute(ComputeWhat::embedding, Category::backward, -1, 0.0, hidden_bytes, st.micro_batch,
                               st.chunk, -1, deps);
        } else {
          auto deps = take_pending();
          deps.push_back(last_compute_);
          p2p(OpKind::send, prev_rank, boundary, st.micro_batch, st.chunk, true, deps);
        }
      }
    }
    data_parallel_and_optimizer(head_grad, embed_grad);
  }

  // Megatron's scatter-gather: transfers carry 1/tp of the activation, gathered over tp.
  bool scatter_gather() const {
    return m_.kind == ModelKind::transformer && p_.tp > 1 && !p_.sequence_parallel && p_.pp_scatter_gather;
  }

  // After a received transfer split over tp: the all-gather of the boundary at `layer`
  // (the receiver's first layer, or for gradients the one after its last), which the next
  // compute waits for.
  void gather_transfer(int layer, int mb, bool gradient) {
    if (!scatter_gather()) return;
    const std::int64_t recv = pending_;
    pending_ = collective(Dim::tp, CollectiveOp::all_gather, Category::tp_comm, Stream::tp, activation_bytes_, mb, layer,
                          layer + 1, std::span<const std::int64_t>(&recv, 1));
    tag_tp(pending_, TpRole::pp_gather, ComputeWhat::layer, gradient ? Category::backward : Category::forward);
    prog_.ops[static_cast<std::size_t>(pending_)].gradient = gradient;
  }

  // Bytes crossing the boundary after layer `l` for one micro-batch, per rank.
  double boundary_bytes(int l) const {
    if (m_.kind == ModelKind::transformer) return activation_bytes_ / (p_.sequence_parallel || scatter_gather() ? p_.tp : 1);
    if (l < 0) return 0.0;
    return m_.generic_layers[static_cast<std::size_t>(l)].activations * t_.micro_batch * e_;
  }

  // This rank's gradient sources and buckets (plan/buckets.hpp).
  std::vector<GradientSource> sources() const {
    const bool head = m_.kind == ModelKind::transformer && coord_.pp == p_.pp - 1;
    return gradient_sources(scenario_, coord_.pp, head, coord_.pp == 0);
  }

  // With the distributed optimizer's gather overlapped (Megatron's --overlap-param-gather),
  // the previous step's all-gathers open this one, in forward order, and the first forward
  // of each layer waits for its bucket's (compute() adds the dependency).
  void param_gathers_first() {
    gather_before_.assign(static_cast<std::size_t>(m_.layer_count()) + 2, -1);
    if (!p_.defers_param_gather()) return;
    const std::vector<GradientSource> src = sources();
    const std::vector<GradientBucket> buckets = gradient_buckets(src, g_, p_.bucket_bytes);
    for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) {
      const std::int64_t g = collective(Dim::dp, CollectiveOp::all_gather, Category::dp_comm, Stream::dp, b->params * e_,
                                        -1, b->lowest, b->above, {});
      for (std::size_t i = b->first; i < b->end; ++i) gather_before_[static_cast<std::size_t>(src[i].layer + 1)] = g;
    }
  }

  void data_parallel_and_optimizer(std::int64_t head_grad, std::int64_t embed_grad) {
    const int stage = coord_.pp;
    const bool transformer = m_.kind == ModelKind::transformer;
    const double word = transformer ? static_cast<double>(m_.vocab) * m_.hidden / p_.tp : 0.0;
    const double final_norm = transformer ? 2.0 * m_.hidden : 0.0;
    // Gradient sources in the order they complete (LM head, layers from the last): when ready.
    const std::vector<GradientSource> src = sources();
    std::vector<std::int64_t> ready_of;
    double params = 0.0;
    int layers = 0;
    for (const GradientSource& g : src) {
      const bool layer = g.layer >= 0 && g.layer < m_.layer_count();
      layers += layer ? 1 : 0;
      params += g.params;
      ready_of.push_back(layer ? grad_ready_[static_cast<std::size_t>(g.layer)] : g.layer < 0 ? embed_grad : head_grad);
    }
    const std::int64_t end_of_backward = last_compute_;
    std::vector<std::int64_t> synced;
    const std::vector<GradientBucket> buckets =
        p_.dp > 1 ? gradient_buckets(src, g_, p_.bucket_bytes) : std::vector<GradientBucket>{};
    // The tied embedding's gradient is summed between the first and last stage (Megatron's
    // embedding group): after the data-parallel sync, or with ZeRO-1, whose reduce-scatter
    // leaves each rank only its share summed, before the bucket that holds it.
    const bool tied = group_of_[embedding_groups][static_cast<std::size_t>(rank_)] >= 0;
    const bool tied_first = tied && p_.zero == 1 && p_.dp > 1;
    auto tied_sum = [&](std::span<const std::int64_t> deps) {
      return collective_in(embedding_groups, CollectiveOp::all_reduce, Category::pp_comm, Stream::dp, word * g_, -1,
                           stage == 0 ? -1 : m_.layer_count(), stage == 0 ? 0 : m_.layer_count() + 1, deps);
    };
    for (const GradientBucket& b : buckets) {
      std::vector<std::int64_t> deps;
      for (std::size_t i = b.first; i < b.end; ++i) {
        std::int64_t ready = p_.overlap_dp ? ready_of[i] : end_of_backward;
        if (tied_first && (src[i].layer == -1 || src[i].layer == m_.layer_count())) ready = tied_sum(std::span(&ready, 1));
        deps.push_back(ready);
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      synced.push_back(collective(Dim::dp, p_.zero == 1 ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                                  Category::dp_comm, Stream::dp, b.params * g_, -1, b.lowest, b.above, deps));
    }
    if (p_.dp == 1) synced.push_back(end_of_backward);
    // Sequence parallelism computes the norms and the biases added after a row-parallel
    // sum on each rank's sequence shard: their gradients are partial and are summed over tp
    // once the data-parallel sync is done (Megatron's layer-norm gradient all-reduce).
    if (transformer && p_.tp > 1 && p_.sequence_parallel) {
      double whole = static_cast<double>(layers) * (m_.mlp == Mlp::gelu ? 6.0 : 5.0) * m_.hidden;
      if (stage == p_.pp - 1) whole += final_norm;
      std::sort(synced.begin(), synced.end());
      const std::int64_t sp = collective(Dim::tp, CollectiveOp::all_reduce, Category::tp_comm, Stream::tp, whole * g_, -1,
                                         -1, m_.layer_count() + 1, synced);
      tag_tp(sp, TpRole::replicated_grads, ComputeWhat::optimizer, Category::backward);
      synced.assign(1, sp);
    }
    if (tied && !tied_first) {
      std::sort(synced.begin(), synced.end());
      synced.assign(1, tied_sum(synced));
    }
    const double shard = params / (p_.zero == 1 ? p_.dp : 1);
    const double opt_bytes = (24.0 + 2.0 * e_) * shard;
    // The host reads the overflow flag and the gradient norm before the step: it waits for
    // every gradient to be synchronised.
    for (std::int64_t op : synced) {
      if (op >= 0) prog_.ops[static_cast<std::size_t>(op)].host_sync = true;
    }
    auto [it, fresh] = optimizer_kernels_.try_emplace(shard, -1);
    if (fresh) it->second = add_kernels(optimizer_kernels(scenario_, shard));
    next_kernels(it->second);
    const std::int64_t opt = compute(ComputeWhat::optimizer, Category::optimizer, -1, 12.0 * shard, opt_bytes, -1, -1,
                                     -1, synced);
    if (p_.zero == 1 && !p_.defers_param_gather()) {  // no buckets with dp 1
      for (const GradientBucket& b : buckets) {
        collective(Dim::dp, CollectiveOp::all_gather, Category::dp_comm, Stream::dp, b.params * e_, -1, b.lowest, b.above,
                   std::span<const std::int64_t>(&opt, 1));
      }
    }
  }

  const Scenario& scenario_;
  const ParallelPlan& p_;
  const ModelSpec& m_;
  const TrainingSpec& t_;
  KernelPlan kernel_plan_;
  int e_ = 2, g_ = 4;  // bytes of a weight or activation; of a main gradient, which reductions carry
  PipelineShape shape_;
  Program prog_;
  static constexpr std::size_t embedding_groups = tied_embedding_groups;
  std::vector<std::vector<int>> group_of_;
  std::vector<std::int64_t> counters_;
  int attention_set_ = -1, mlp_set_ = -1, core_set_ = -1, layer_set_ = -1, head_set_ = -1;
  std::vector<int> generic_sets_;
  // Kernel sets: [forward, backward] x [whole layer, attention, MLP]; embedding and head
  // [forward, backward]; the attention core; per generic layer [forward, backward]; the
  // optimizer's per shard size.
  int layer_kernels_[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
  int embedding_kernels_[2] = {-1, -1};
  int head_kernels_[2] = {-1, -1};
  int core_kernels_ = -1;
  std::vector<std::array<int, 2>> generic_kernels_;
  std::map<double, int> optimizer_kernels_;
  int next_kernels_ = -1;
  double activation_bytes_ = 0.0;
  double elementwise_bytes_ = 0.0;
  // Per rank being compiled.
  int rank_ = 0;
  Coord coord_;
  std::int64_t last_compute_ = -1;
  std::int64_t pending_ = -1;
  std::vector<std::int64_t> grad_ready_;
  std::vector<std::int64_t> gather_before_;  // per layer + 1: its deferred parameter all-gather
  std::vector<std::int64_t> loss_ready_;  // per micro-batch: the loss statistics' all-gather
};

}  // namespace

Program compile(const Scenario& s, CompileOptions options) { return Builder(s).build(options); }

}  // namespace parasim::plan
