// The compiler's state while it builds one Program (compile.cpp): the groups, the shared
// GEMM and kernel sets, and per rank the ops emitted so far. Its methods are split by what
// they emit: compile.cpp the schedule of a rank and its pipeline transfers,
// compile_layers.cpp a layer's passes with their tensor-parallel communication,
// compile_sync.cpp the data-parallel synchronisation and the optimizer step.
// Internal to the program library.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "program/program.hpp"
#include "scenario/check.hpp"
#include "scenario/limits.hpp"
#include "topology/host_memory.hpp"
#include "workload/buckets.hpp"
#include "workload/schedule.hpp"

namespace parasim::program::detail {

// The GEMMs a piece of a layer half runs, as its set lists them: forward each once,
// backward each twice (its data and its weight gradient). The GEMM-based compute model
// times a piece by its set (a whole layer's backward runs its set twice instead).
inline std::vector<workload::Gemm> piece_runs(const std::vector<workload::Gemm>& gemms, bool backward) {
  std::vector<workload::Gemm> all = gemms;
  if (backward) all.insert(all.end(), gemms.begin(), gemms.end());
  return all;
}

class Builder {
 public:
  explicit Builder(const scenario::Scenario& s)
      : scenario_(s), p_(s.plan), m_(s.model), t_(s.training), kernel_plan_(workload::kernel_plan(s)) {
    e_ = topology::dtype_bytes(topology::storage_dtype(t_.precision));
    g_ = topology::dtype_bytes(t_.grad_dtype);
    shape_ = workload::PipelineShape{p_.pp, s.micro_batches(), p_.virtual_stages};
    prog_.world = p_.world();
    prog_.order.resize(static_cast<std::size_t>(prog_.world));
    make_groups();
    make_gemm_sets();
  }

  Program build(const CompileOptions& options) {
    max_ops_ = options.max_ops;
    if (max_ops_ <= 0) {
      max_ops_ = scenario::limits::program_ops;
      if (const double free = topology::host_available_memory(); free > 0.0) {
        max_ops_ = std::min(max_ops_, static_cast<long long>(free / scenario::limits::program_op_bytes));
        by_memory_ = max_ops_ < scenario::limits::program_ops;
        free_bytes_ = free;
      }
    }
    const bool fold = options.one_replica && p_.dp > 1;
    for (int r = 0; r < prog_.world; ++r) {
      scenario::Coord c = coord_of(p_, r);
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
    // A rank is in one group per dimension (cp too), at most one embedding group, under
    // hybrid sharding one shard and one replica group, and under ZeRO-3 one gather group:
    // one collective counter per (rank, kind).
    counters_.assign(group_kinds * static_cast<std::size_t>(prog_.world), 0);
  }

  static std::size_t dim_index(scenario::Dim d) { return group_kind(d); }

  void make_gemm_sets();

  template <typename T>
  static int append(std::vector<std::vector<T>>& sets, std::vector<T> set) {
    sets.push_back(std::move(set));
    return static_cast<int>(sets.size()) - 1;
  }
  int add_set(std::vector<workload::Gemm> g) { return append(prog_.gemm_sets, std::move(g)); }
  int add_kernels(std::vector<workload::Kernel> k) { return append(prog_.kernel_sets, std::move(k)); }
  // The kernel set of the op about to be emitted (compute() attaches it).
  void next_kernels(int set) { next_kernels_ = set; }

  // The step has more ops than the simulator takes: name the key behind most of them.
  [[noreturn]] void too_large() const {
    const scenario::SizeKey size = scenario::program_size_key(scenario_);
    throw ProgramTooLarge(
        scenario::key_location(scenario_, size.key), size.key,
        fmt::format("the simulated step passes {} ops ({} layers x {} micro-batches per pipeline), {}; {}", max_ops_,
                    m_.layer_count(), scenario_.micro_batches(),
                    by_memory_ ? fmt::format("what this host's {:.1f} GiB of available memory simulates (about {:.0f} "
                                             "bytes an op)",
                                             free_bytes_ / 1073741824.0, scenario::limits::program_op_bytes)
                               : "the simulator's limit",
                    size.advice));
  }

  // --- emitting ops -------------------------------------------------------------------
  std::int64_t add(Op op, std::span<const std::int64_t> deps) {
    op.deps_begin = static_cast<std::uint32_t>(prog_.deps.size());
    op.deps_count = static_cast<std::uint32_t>(deps.size());
    prog_.deps.insert(prog_.deps.end(), deps.begin(), deps.end());
    const auto id = static_cast<std::int64_t>(prog_.ops.size());
    if (id >= max_ops_) [[unlikely]] too_large();
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
    // The first forward touching a layer's parameters waits for their deferred all-gather;
    // under ZeRO-3 the first compute of a unit's pass for its parameters' gather.
    const auto at = static_cast<std::size_t>(layer + 1);
    const bool deferred = cat == Category::forward && gather_before_[at] >= 0;
    if (deferred || !unit_waits_.empty()) {
      std::vector<std::int64_t> d(deps.begin(), deps.end());
      if (deferred) d.push_back(std::exchange(gather_before_[at], -1));
      d.insert(d.end(), unit_waits_.begin(), unit_waits_.end());
      unit_waits_.clear();
      return last_compute_ = add(op, d);
    }
    return last_compute_ = add(op, deps);
  }

  // A collective on this rank's group of dimension `d`; members get the same instance id
  // because every member issues the same sequence of collectives on their group.
  std::int64_t collective(scenario::Dim d, CollectiveOp what, Category cat, Stream stream, double bytes, int mb,
                          int layer, int layer_end, std::span<const std::int64_t> deps) {
    return collective_in(dim_index(d), what, cat, stream, bytes, mb, layer, layer_end, deps);
  }

  // `kind`: dim_index() of a dimension's groups, or embedding_groups.
  std::int64_t collective_in(std::size_t kind, CollectiveOp what, Category cat, Stream stream, double bytes, int mb,
                             int layer, int layer_end, std::span<const std::int64_t> deps) {
    const int group = group_of_[kind][static_cast<std::size_t>(rank_)];
    std::int64_t& counter = counters_[group_kinds * static_cast<std::size_t>(rank_) + kind];
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
  // Sequence parallelism's gather of a forward (or recompute) input runs the layer norm of
  // this rank's rows first: under ZeRO-3 it waits for the unit's parameters too.
  void tp_collective(CollectiveOp what, int mb, int layer, TpRole role, ComputeWhat part, Category pass) {
    std::vector<std::int64_t> deps = take_pending();
    if (last_compute_ >= 0) deps.push_back(last_compute_);
    if (role == TpRole::gather_input && pass != Category::backward) {
      deps.insert(deps.end(), unit_waits_.begin(), unit_waits_.end());
    }
    pending_ = collective(scenario::Dim::tp, what, Category::tp_comm, Stream::tp, activation_bytes_, mb, layer,
                          layer + 1, deps);
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
                    shape_.micro_batches +
                mb) *
                   shape_.virtual_stages +
               chunk;
    if (kind == OpKind::send) ++prog_.transfers;
    return add(op, deps);
  }

  // A copy between this rank's device and host memory (offloading): unit `unit`'s
  // gradients out (to_host) or parameters in, on the copy stream of that direction.
  std::int64_t copy(bool to_host, double bytes, int mb, int unit, std::span<const std::int64_t> deps) {
    Op op;
    op.kind = OpKind::copy;
    op.category = Category::offload;
    op.stream = to_host ? Stream::to_host : Stream::from_host;
    op.what = unit < 0 ? ComputeWhat::embedding : unit == m_.layer_count() ? ComputeWhat::lm_head : ComputeWhat::layer;
    op.rank = rank_;
    op.micro_batch = mb;
    op.layer = unit;
    op.layer_end = unit + 1;
    op.bytes = bytes;
    op.to_host = to_host;
    op.copied = to_host ? Copied::grads : Copied::params;
    return add(op, deps);
  }

  // Offloaded activations (ParallelPlan::offload_activations): layer `layer`'s stored
  // activations of micro-batch `mb` copied out once its forward is done, and copied back
  // (returns the copy, -1 when not offloading) once the compute before is done and they
  // are out.
  void activations_out(int layer, int mb) {
    if (!p_.offload_activations) return;
    const std::int64_t out =
        copy(true, sets_of(layer).activation, mb, layer, std::span<const std::int64_t>(&last_compute_, 1));
    prog_.ops[static_cast<std::size_t>(out)].copied = Copied::activations;
    activations_out_[{layer, mb}] = out;
  }
  std::int64_t activations_in(int layer, int mb) {
    if (!p_.offload_activations) return -1;
    std::vector<std::int64_t> deps{activations_out_.at({layer, mb})};
    if (last_compute_ >= 0) deps.push_back(last_compute_);
    std::sort(deps.begin(), deps.end());
    const std::int64_t in = copy(false, sets_of(layer).activation, mb, layer, deps);
    prog_.ops[static_cast<std::size_t>(in)].copied = Copied::activations;
    return in;
  }

  // Dependencies for the next compute op: what it waits for besides stream order.
  std::vector<std::int64_t> take_pending() {
    std::vector<std::int64_t> d;
    if (pending_ >= 0) d.push_back(pending_);
    pending_ = -1;
    return d;
  }

  // --- one layer ------------------------------------------------------------------------
  void layer_forward(int layer, int mb, int chunk, Category cat);

  void layer_backward(int layer, int mb, int chunk);
  // A generic layer's pass (forward, recompute or backward); under SyncBN split into pieces
  // around its BatchNorms' collectives (workload/kernels.hpp, generic_layer_kernels).
  void generic_layer(int layer, int mb, int chunk, Category cat);
  // Tensor-parallel communication overlap (ParallelPlan::tp_comm_overlap): the pieces' sets,
  // and one layer half's pass as its two rings.
  void make_overlap_sets(const std::vector<workload::Gemm>& layer);
  void overlapped_half(int layer, int mb, int chunk, Category cat, ComputeWhat part);
  std::int64_t piece(ComputeWhat part, Category cat, LayerPiece which, int step, int kernels, int gemms, double flops,
                     double bytes, int mb, int chunk, int layer, std::span<const std::int64_t> deps);
  std::int64_t ring_transfer(OpKind kind, int peer, std::int64_t ring, int step, ComputeWhat part, Category cat, int mb,
                             int layer, std::span<const std::int64_t> deps);
  // What ring_transfer and cp_transfer share: a p2p() made a ring's transfer.
  std::int64_t ring_p2p(OpKind kind, int peer, double bytes, bool gradient, Category category, ComputeWhat part,
                        Category pass, LayerPiece piece, int step, int mb, int layer, std::int64_t match,
                        std::span<const std::int64_t> deps);

  // Context parallelism (ParallelPlan::cp > 1): the attention half's pieces around its ring
  // (workload/kernels.hpp, ContextKernels), and one pass over it.
  void make_context_sets(const std::vector<workload::Gemm>& layer);
  // Mixture of experts with ep > 1 or tp > 1 (workload/kernels.hpp, MoeKernels): the MLP half
  // as prepare, the all-to-all dispatch over ep (then, tp > 1, the tokens' all-gather over
  // tp), the experts, (the outputs' reduce-scatter over tp,) the all-to-all combine, finish.
  void make_moe_sets(const std::vector<workload::Gemm>& layer);
  void moe_half(int layer, int mb, int chunk, Category cat);
  void context_half(int layer, int mb, int chunk, Category cat);
  std::int64_t cp_transfer(OpKind kind, int peer, std::int64_t ring, int step, Category cat, int mb, int layer,
                           double bytes, bool grads, std::span<const std::int64_t> deps);

  // --- one rank ----------------------------------------------------------------------------
  // The ranks after and before this one along a ring over dimension `d` (tp or cp).
  std::pair<int, int> ring_neighbours(scenario::Dim d) const {
    const int n = extent(p_, d);
    scenario::Coord c = coord_;
    int& i = coordinate(c, d);
    const int at = i;
    i = (at + 1) % n;
    const int next = rank_of(p_, c);
    i = (at + n - 1) % n;
    return {next, rank_of(p_, c)};
  }

  int peer_stage_rank(int stage) const {
    scenario::Coord c = coord_;
    c.pp = stage;
    return rank_of(p_, c);
  }

  void compile_rank(int rank);

  // Megatron's scatter-gather: transfers carry 1/tp of the activation, gathered over tp.
  bool scatter_gather() const {
    return m_.kind == scenario::ModelKind::transformer && p_.tp > 1 && !p_.sequence_parallel && p_.pp_scatter_gather;
  }

  // After a received transfer split over tp: the all-gather of the boundary at `layer`
  // (the receiver's first layer, or for gradients the one after its last), which the next
  // compute waits for.
  void gather_transfer(int layer, int mb, bool gradient);

  // Bytes crossing the boundary after layer `l` for one micro-batch, per rank.
  double boundary_bytes(int l) const {
    if (m_.kind == scenario::ModelKind::transformer)
      return activation_bytes_ / (p_.sequence_parallel || scatter_gather() ? p_.tp : 1);
    if (l < 0) return 0.0;
    return m_.generic_layers[static_cast<std::size_t>(l)].activations * t_.micro_batch * e_;
  }

  // This rank's gradient sources and buckets (workload/buckets.hpp).
  std::vector<workload::GradientSource> sources() const;

  // With the distributed optimizer's gather overlapped (Megatron's --overlap-param-gather),
  // the previous step's all-gathers open this one, in forward order, and the first forward
  // of each layer waits for its bucket's (compute() adds the dependency).
  void param_gathers_first();

  void data_parallel_and_optimizer(std::int64_t head_grad, std::int64_t embed_grad);
  // Moves this rank's data-parallel stream ops emitted from `first` to before `end` in
  // its program order to just after what they wait for (and after the stream's previous
  // op): the host issues a bucket's collective from the backward's hook once its last
  // gradient is ready, not after the whole backward. Each stream's order is unchanged.
  void issue_with_backward(std::int64_t first, std::int64_t end);

  // ZeRO's collectives over the ranks it shards over (the dp group, or under hybrid
  // sharding the rank's shard group) on the dp stream. After a reduce-scatter, hybrid
  // sharding sums the shard over the replica group: returns that sum, else `rs`.
  std::int64_t shard_collective(CollectiveOp what, double bytes, int mb, int layer, int layer_end,
                                std::span<const std::int64_t> deps) {
    const std::size_t kind = p_.hybrid_shard() ? shard_groups : dim_index(scenario::Dim::dp);
    return collective_in(kind, what, Category::dp_comm, Stream::dp, bytes, mb, layer, layer_end, deps);
  }
  std::int64_t sum_over_replicas(std::int64_t rs, double bytes, int mb, int layer, int layer_end) {
    if (!p_.hybrid_shard()) return rs;
    return collective_in(replica_groups, CollectiveOp::all_reduce, Category::dp_comm, Stream::dp,
                         bytes / p_.shard_size(), mb, layer, layer_end, std::span<const std::int64_t>(&rs, 1));
  }

  // ZeRO-2 and -3 (plan.zero, with dp > 1), as DeepSpeed and FSDP run them: each unit (the
  // embedding -1, a layer, the LM head = the layer count) has its gradients reduce-scattered
  // over dp after every micro-batch's backward of it, and under ZeRO-3 its parameters
  // all-gathered before each pass over it (forward, recompute, backward), the next unit's
  // gather prefetched while this one computes.
  [[nodiscard]] bool sharded_grads() const { return p_.zero >= 2 && p_.grad_ranks() > 1; }
  [[nodiscard]] bool sharded_params() const { return p_.zero == 3 && p_.grad_ranks() > 1; }
  // Offloading (ParallelPlan::offload_optimizer / offload_params) handles each unit the
  // same way: its gradients copied out after their reduce-scatter (or after the backward),
  // its parameters copied in before their gather (or before the pass). The shard a rank
  // copies: its unit's parameters over the ranks ZeRO shards them over.
  [[nodiscard]] double copied_share() const { return sharded_grads() ? 1.0 / p_.shard_size() : 1.0; }
  // Before the first compute op of `unit`'s pass: its gather (the next compute waits for it),
  // and the prefetch of `next` (no_unit: none) once the compute before this one is done.
  static constexpr int no_unit = -2;
  void gather_params(int unit, int next);
  // The all-gather(s) of the parameters `unit`'s compute uses: its own, and for a head tied
  // to the embedding on one stage the embedding's first (which holds the word matrix).
  // Returns the last, which ends after the first on the in-order dp-gather stream.
  std::int64_t param_gather(int unit, std::span<const std::int64_t> deps);
  [[nodiscard]] bool head_uses_embedding(int unit) const {
    return unit == m_.layer_count() && m_.kind == scenario::ModelKind::transformer && m_.tie_embeddings && p_.pp == 1;
  }
  [[nodiscard]] double gathered_params(int unit) const {
    return unit_params_[static_cast<std::size_t>(unit + 1)] + (head_uses_embedding(unit) ? unit_params_[0] : 0.0);
  }
  // Before the backward of `unit`: its gradients (and a tied head's, the embedding's) are
  // accumulated again only once the previous micro-batch's reduce-scatter has read them.
  void wait_for_grad_sync(int unit);
  // After `unit`'s backward of micro-batch `mb`: its gradients' reduce-scatter, and under
  // offloading their copy to host memory.
  void shard_grads(int unit, int mb, std::span<const std::int64_t> deps);

  const scenario::Scenario& scenario_;
  const scenario::ParallelPlan& p_;
  const scenario::ModelSpec& m_;
  const scenario::TrainingSpec& t_;
  workload::KernelPlan kernel_plan_;
  int e_ = 2, g_ = 4;  // bytes of a weight or activation; of a main gradient, which reductions carry
  workload::PipelineShape shape_;
  Program prog_;
  long long max_ops_ = scenario::limits::program_ops;
  bool by_memory_ = false;  // max_ops_ is what the host's memory holds
  double free_bytes_ = 0.0;
  static constexpr std::size_t embedding_groups = tied_embedding_groups;
  static constexpr std::size_t group_kinds = 10;  // tp, dp, pp, embedding, shard, replica, gather, cp, ep, expert dp
  std::vector<std::vector<int>> group_of_;
  std::vector<std::int64_t> counters_;
  // A layer's GEMM and kernel sets (kernels: [forward, backward] x [whole layer, attention,
  // MLP]; first: the forward of a step's first micro-batch, fp8: with the weight casts),
  // its element-wise traffic, what it stores for backward (offloading), and whether its MLP
  // is a split mixture of experts (moe_split: ep or tp over the experts, moe_half's pieces).
  struct LayerSets {
    int attention = -1, mlp = -1, whole = -1;
    int kernels[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
    int first[3] = {-1, -1, -1};
    double elementwise = 0.0;
    double activation = 0.0;
    bool moe_split = false;
  };
  // [0]: the model's layers; [1]: a mixture of experts' dense first layers (model.dense_layers).
  LayerSets layer_sets_[2];
  [[nodiscard]] const LayerSets& sets_of(int layer) const {
    return m_.moe() && !m_.moe_layer(layer) ? layer_sets_[1] : layer_sets_[0];
  }
  void make_layer_sets(const scenario::ModelSpec& spec, LayerSets& out);
  int core_set_ = -1, head_set_ = -1;
  // Per generic layer: its GEMM set (and the backward pieces' one, which lists it twice) and
  // kernel sets; under SyncBN the pieces' kernel sets per pass [forward, backward] and piece.
  struct GenericSets {
    int gemm = -1, gemm_twice = -1;
    int forward = -1, recompute = -1, backward = -1;
    std::vector<int> pieces[2];
  };
  std::vector<GenericSets> generic_;
  // Kernel sets: embedding and head
  // [forward, backward]; the attention core; the optimizer's per shard size.
  int embedding_kernels_[2] = {-1, -1};
  int head_kernels_[2] = {-1, -1};
  int core_kernels_ = -1;
  std::map<double, int> optimizer_kernels_;
  int next_kernels_ = -1;
  // Per pass (forward, backward) and half (attention, MLP) under tp communication overlap:
  // kernel sets of the pieces (workload/kernels.hpp, OverlapKernels), GEMM sets and FLOPs of
  // the column block, the middle and the row block, and the middle's other traffic.
  struct Pieces {
    int prepare = -1, prepare_first = -1, column = -1, middle = -1, row = -1, row_last = -1, wgrad = -1;
    int column_gemms = -1, middle_gemms = -1, row_gemms = -1, wgrad_gemms = -1;
    double column_flops = 0.0, middle_flops = 0.0, row_flops = 0.0, wgrad_flops = 0.0;
    double column_bytes = 0.0, middle_bytes = 0.0, row_bytes = 0.0,
           wgrad_bytes = 0.0;  // the GEMMs' traffic (middle: and the rest)
  };
  Pieces pieces_[2][2];
  // Per pass (forward, backward) under context parallelism: kernel sets, GEMM sets, FLOPs
  // and traffic of prepare, a ring step's block (the first's kernels: the causal diagonal)
  // and finish.
  struct ContextPieces {
    int prepare = -1, prepare_first = -1, first = -1, block = -1, merge = -1, finish = -1;
    int prepare_gemms = -1, block_gemms = -1, finish_gemms = -1;
    double prepare_flops = 0.0, block_flops = 0.0, finish_flops = 0.0;
    double prepare_bytes = 0.0, block_bytes = 0.0, finish_bytes = 0.0;
  };
  ContextPieces context_[2];
  // Per pass under a split mixture-of-experts MLP (LayerSets::moe_split): the same for prepare, the
  // experts and finish (and with tp the shared experts: shared = -1 without), and the
  // all-to-alls' bytes per rank.
  struct MoePieces {
    int prepare = -1, prepare_first = -1, experts = -1, finish = -1, shared = -1;
    int prepare_gemms = -1, experts_gemms = -1, finish_gemms = -1, shared_gemms = -1;
    double prepare_flops = 0.0, experts_flops = 0.0, finish_flops = 0.0, shared_flops = 0.0;
    double prepare_bytes = 0.0, experts_bytes = 0.0, finish_bytes = 0.0, shared_bytes = 0.0;
  };
  MoePieces moe_[2];
  double moe_a2a_bytes_ = 0.0;     // a rank's routed token copies (T/tp·top_k·load·h)
  double moe_tokens_bytes_ = 0.0;  // all its tp group's: the experts' input (T·top_k·load·h)
  bool overlap_ = false;
  int splits_ = 1;  // blocks of the forward's pipelined reduce-scatter
  double activation_bytes_ = 0.0;
  double cp_block_bytes_ = 0.0;  // a cp ring step's keys and values (cp_kv_block_bytes)
  // Per rank being compiled.
  int rank_ = 0;
  scenario::Coord coord_;
  std::int64_t last_compute_ = -1;
  std::int64_t pending_ = -1;
  std::int64_t rings_ = 0;  // rings emitted: every tp member emits the same ones in the same order
  std::vector<std::int64_t> grad_ready_;
  // Per layer, under tp communication overlap: the last reduce-scatter of its backward,
  // which may end after grad_ready_ (its weight gradients run under it); else -1.
  std::vector<std::int64_t> grad_also_;
  std::vector<std::int64_t> gather_before_;  // per layer + 1: its deferred parameter all-gather
  // ZeRO-2/3, per unit + 1: its parameters on this rank, its prefetched gather not yet
  // waited for (-1: none), its last gradient reduce-scatter.
  std::vector<double> unit_params_;
  std::vector<std::int64_t> prefetched_;
  std::vector<std::int64_t> unit_synced_;
  std::vector<std::int64_t> unit_waits_;                         // what the next compute op waits for (ZeRO-2/3)
  std::vector<std::int64_t> loss_ready_;                         // per micro-batch: the loss statistics' all-gather
  std::map<std::pair<int, int>, std::int64_t> activations_out_;  // (layer, micro-batch): its copy out
};

}  // namespace parasim::program::detail
