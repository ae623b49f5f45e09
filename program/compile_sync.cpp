// The end of a rank's step as ops: the data-parallel gradient buckets, the tied
// embedding's and sequence-parallel norms' sums, the optimizer, the parameter gathers;
// and ZeRO-2/3's per-unit gathers and reduce-scatters, which the passes emit.
#include <numeric>

#include "program/compile_builder.hpp"

namespace parasim::program::detail {

std::vector<workload::GradientSource> Builder::sources() const {
  const bool head = m_.kind == scenario::ModelKind::transformer && coord_.pp == p_.pp - 1;
  return workload::gradient_sources(scenario_, coord_.pp, head, coord_.pp == 0);
}

void Builder::param_gathers_first() {
  gather_before_.assign(static_cast<std::size_t>(m_.layer_count()) + 2, -1);
  if (!p_.defers_param_gather()) return;
  const std::vector<workload::GradientSource> src = sources();
  const std::vector<workload::GradientBucket> buckets = gradient_buckets(src, g_, p_.bucket_bytes);
  for (auto b = buckets.rbegin(); b != buckets.rend(); ++b) {
    const std::int64_t g = shard_collective(CollectiveOp::all_gather, b->params * e_, -1, b->lowest, b->above, {});
    for (std::size_t i = b->first; i < b->end; ++i) gather_before_[static_cast<std::size_t>(src[i].layer + 1)] = g;
  }
}

std::int64_t Builder::param_gather(int unit, std::span<const std::int64_t> deps) {
  auto gather = [&](int u) {
    const double params = unit_params_[static_cast<std::size_t>(u + 1)];
    std::vector<std::int64_t> d(deps.begin(), deps.end());
    // Offloaded parameters: this rank's shard comes in from host memory first.
    if (p_.offload_params) d.assign(1, copy(false, params * copied_share() * e_, -1, u, d));
    if (!sharded_params()) return d.front();
    return collective_in(gather_groups, CollectiveOp::all_gather, Category::dp_comm, Stream::dp_gather, params * e_, -1,
                         u, u + 1, d);
  };
  if (head_uses_embedding(unit) && unit_params_[0] > 0.0) gather(-1);
  return gather(unit);
}

void Builder::gather_params(int unit, int next) {
  if (!p_.unit_params() || gathered_params(unit) <= 0.0) return;
  std::int64_t& ahead = prefetched_[static_cast<std::size_t>(unit + 1)];
  unit_waits_.push_back(ahead >= 0 ? std::exchange(ahead, -1) : param_gather(unit, {}));
  if (next == no_unit || gathered_params(next) <= 0.0 || prefetched_[static_cast<std::size_t>(next + 1)] >= 0) return;
  // At most two units gathered at once: the next one's gather starts when the compute
  // before this unit's is done (FSDP's limit on all-gathers in flight).
  std::vector<std::int64_t> deps;
  if (last_compute_ >= 0) deps.push_back(last_compute_);
  prefetched_[static_cast<std::size_t>(next + 1)] = param_gather(next, deps);
}

void Builder::wait_for_grad_sync(int unit) {
  if (!p_.unit_grads()) return;
  for (int u : {unit, head_uses_embedding(unit) ? -1 : no_unit}) {
    if (u == no_unit) continue;
    if (const std::int64_t rs = unit_synced_[static_cast<std::size_t>(u + 1)]; rs >= 0) unit_waits_.push_back(rs);
  }
}

void Builder::shard_grads(int unit, int mb, std::span<const std::int64_t> deps) {
  const double params = unit_params_[static_cast<std::size_t>(unit + 1)];
  if (!p_.unit_grads() || params <= 0.0) return;
  std::vector<std::int64_t> d;
  for (std::int64_t op : deps) {
    if (op >= 0) d.push_back(op);
  }
  std::int64_t done = -1;
  if (sharded_grads()) {
    const std::int64_t rs = shard_collective(CollectiveOp::reduce_scatter, params * g_, mb, unit, unit + 1, d);
    // Hybrid sharding sums the shard over the replicas once, after the last micro-batch's
    // reduce-scatter (FSDP's all-reduce deferred over gradient accumulation): each shard
    // group accumulates its own sum until then.
    done = mb == shape_.micro_batches - 1 ? sum_over_replicas(rs, params * g_, mb, unit, unit + 1) : rs;
    d.assign(1, done);
  }
  // Offloading: the (reduced) gradients go to host memory in the weights' type, where the
  // host accumulates them in fp32 over the micro-batches (ZeRO-Offload).
  if (p_.offload_optimizer) done = copy(true, params * copied_share() * e_, mb, unit, d);
  unit_synced_[static_cast<std::size_t>(unit + 1)] = done;
}

void Builder::data_parallel_and_optimizer(std::int64_t head_grad, std::int64_t embed_grad) {
  const int stage = coord_.pp;
  const bool transformer = m_.kind == scenario::ModelKind::transformer;
  const double word = transformer ? static_cast<double>(m_.vocab) * m_.hidden / p_.tp : 0.0;
  const double final_norm = transformer ? 2.0 * m_.hidden : 0.0;
  // Gradient sources in the order they complete (LM head, layers from the last): when ready.
  // Under expert parallelism the dense parameters' buckets leave the experts out; those
  // have buckets of their own over the ranks holding the same experts.
  std::vector<workload::GradientSource> src = sources();
  const std::vector<workload::GradientSource> expert_src = split_experts(src);
  double experts = 0.0;
  for (const workload::GradientSource& g : expert_src) experts += g.params;
  std::vector<std::int64_t> ready_of;
  std::vector<std::int64_t> also_of;  // a second op the source's gradient waits for, or -1
  std::vector<std::int64_t> tails;    // every such op
  double params = 0.0;
  for (const workload::GradientSource& g : src) {
    const bool layer = g.layer >= 0 && g.layer < m_.layer_count();
    params += g.params + g.experts;
    ready_of.push_back(layer ? grad_ready_[static_cast<std::size_t>(g.layer)] : g.layer < 0 ? embed_grad : head_grad);
    also_of.push_back(layer ? grad_also_[static_cast<std::size_t>(g.layer)] : -1);
    if (also_of.back() >= 0) tails.push_back(also_of.back());
  }
  const std::int64_t end_of_backward = last_compute_;
  const auto tail = static_cast<std::int64_t>(prog_.ops.size());
  std::vector<std::int64_t> synced;
  // (ZeRO-2/3 reduce their gradients by unit, in the passes.)
  const std::vector<workload::GradientBucket> buckets = p_.grad_ranks() > 1 && !p_.unit_grads()
                                                            ? gradient_buckets(src, g_, p_.bucket_bytes)
                                                            : std::vector<workload::GradientBucket>{};
  // The tied embedding's gradient is summed between the first and last stage (Megatron's
  // embedding group): after the data-parallel sync, or with ZeRO-1, whose reduce-scatter
  // leaves each rank only its share summed, before the bucket that holds it.
  const bool tied = group_of_[embedding_groups][static_cast<std::size_t>(rank_)] >= 0;
  const bool tied_first = tied && p_.zero == 1 && p_.grad_ranks() > 1;
  auto tied_sum = [&](std::span<const std::int64_t> deps) {
    return collective_in(embedding_groups, CollectiveOp::all_reduce, Category::pp_comm, Stream::dp, word * g_, -1,
                         stage == 0 ? -1 : m_.layer_count(), stage == 0 ? 0 : m_.layer_count() + 1, deps);
  };
  // ZeRO-2/3: the units' gradients were reduce-scattered (or offloaded: copied out) after
  // each backward; the step waits for the last of each.
  if (p_.unit_grads()) {
    // The dp stream runs them in order: the last one emitted ends after all of them (and
    // only it makes the host wait, the backward's others running under the compute).
    const std::int64_t last = *std::max_element(unit_synced_.begin(), unit_synced_.end());
    if (last >= 0) synced.push_back(last);
  }
  for (const workload::GradientBucket& b : buckets) {
    std::vector<std::int64_t> deps;
    for (std::size_t i = b.first; i < b.end; ++i) {
      std::int64_t ready = p_.overlap_dp ? ready_of[i] : end_of_backward;
      if (tied_first && (src[i].layer == -1 || src[i].layer == m_.layer_count()))
        ready = tied_sum(std::span(&ready, 1));
      deps.push_back(ready);
      if (also_of[i] >= 0) deps.push_back(also_of[i]);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    if (p_.zero == 1) {
      const std::int64_t rs =
          shard_collective(CollectiveOp::reduce_scatter, b.params * g_, -1, b.lowest, b.above, deps);
      synced.push_back(sum_over_replicas(rs, b.params * g_, -1, b.lowest, b.above));
    } else {
      synced.push_back(collective(scenario::Dim::dp, CollectiveOp::all_reduce, Category::dp_comm, Stream::dp,
                                  b.params * g_, -1, b.lowest, b.above, deps));
    }
  }
  // The experts' buckets (expert parallelism with several ranks holding each expert): the
  // same sums over the expert data-parallel group, ZeRO-1 sharding over it too.
  const bool expert_sync = !expert_src.empty() && p_.expert_grad_ranks() > 1;
  const std::vector<workload::GradientBucket> expert_buckets =
      expert_sync ? gradient_buckets(expert_src, g_, p_.bucket_bytes) : std::vector<workload::GradientBucket>{};
  auto expert_collective = [&](CollectiveOp what, double bytes, const workload::GradientBucket& b,
                               std::span<const std::int64_t> deps) {
    return collective_in(expert_dp_groups, what, Category::dp_comm, Stream::dp, bytes, -1, b.lowest, b.above, deps);
  };
  for (const workload::GradientBucket& b : expert_buckets) {
    std::vector<std::int64_t> deps;
    for (std::size_t i = b.first; i < b.end; ++i) {
      const auto at = static_cast<std::size_t>(expert_src[i].layer);
      deps.push_back(p_.overlap_dp ? grad_ready_[at] : end_of_backward);
      if (grad_also_[at] >= 0) deps.push_back(grad_also_[at]);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    synced.push_back(expert_collective(p_.zero == 1 ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                                       b.params * g_, b, deps));
  }
  if (p_.grad_ranks() == 1) {
    synced.push_back(end_of_backward);
    synced.insert(synced.end(), tails.begin(), tails.end());
  }
  // Sequence parallelism computes the norms and the biases added after a row-parallel
  // sum on each rank's sequence shard: their gradients are partial and are summed over tp
  // once the data-parallel sync is done (Megatron's layer-norm gradient all-reduce). (A
  // mixture of experts' router too: each rank routes its own rows; the experts' biases see
  // every row, gathered.) MLA's down projections and norms are partial with or without it.
  const bool sp_sum = p_.tp > 1 && p_.sequence_parallel;
  if (transformer && p_.tp > 1 && (sp_sum || m_.mla())) {
    double whole = 0.0;
    for (const workload::GradientSource& g : src) {
      if (g.layer < 0 || g.layer >= m_.layer_count()) continue;
      const scenario::ModelSpec spec = m_.layer_spec(g.layer);
      whole += sp_sum ? spec.tp_whole_params() : spec.mla_down_params();
    }
    if (stage == p_.pp - 1 && sp_sum) whole += final_norm;
    if (sharded_grads()) whole /= p_.shard_size();  // each rank sums its shard of them
    std::sort(synced.begin(), synced.end());
    const std::int64_t sp = collective(scenario::Dim::tp, CollectiveOp::all_reduce, Category::tp_comm, Stream::tp,
                                       whole * g_, -1, -1, m_.layer_count() + 1, synced);
    tag_tp(sp, TpRole::replicated_grads, ComputeWhat::optimizer, Category::backward);
    synced.assign(1, sp);
  }
  if (tied && !tied_first) {
    std::sort(synced.begin(), synced.end());
    synced.assign(1, tied_sum(synced));
  }
  const double shard = workload::optimizer_shard_params(p_, params, experts);
  const double opt_bytes = (8.0 + 2.0 * optimizer_state_bytes(t_.optimizer) + 2.0 * e_) * shard;
  std::erase(synced, -1);
  std::int64_t opt = -1;
  if (p_.offload_optimizer) {
    // The host's optimizer step (DeepSpeed's CPU Adam): it reads the fp32 master weights
    // and gradients and the state, writes them back and writes the 16-bit weights for the
    // copy in; its time is the host memory traffic (host_optimizer_bytes).
    Op op;
    op.kind = OpKind::compute;
    op.category = Category::optimizer;
    op.stream = Stream::host;
    op.what = ComputeWhat::optimizer;
    op.rank = rank_;
    op.flops = 12.0 * shard;
    op.bytes = host_optimizer_bytes(t_.optimizer, e_) * shard;
    std::sort(synced.begin(), synced.end());
    opt = add(op, synced);
  } else {
    auto [it, fresh] = optimizer_kernels_.try_emplace(shard, -1);
    if (fresh) it->second = add_kernels(workload::optimizer_kernels(scenario_, shard));
    next_kernels(it->second);
    opt = compute(ComputeWhat::optimizer, Category::optimizer, -1, 12.0 * shard, opt_bytes, -1, -1, -1, synced);
  }
  // The host reads the overflow flag and the gradient norm before the step: it waits for
  // every gradient to be synchronised.
  prog_.ops[static_cast<std::size_t>(opt)].host_waits = true;
  if (p_.overlap_dp) issue_with_backward(tail, opt);
  // ZeRO-1 gathers the updated parameters by bucket, ZeRO-2 by unit (ZeRO-3 gathers them
  // before each use).
  if (p_.zero == 1 && !p_.defers_param_gather()) {  // no buckets with dp 1
    for (const workload::GradientBucket& b : buckets) {
      shard_collective(CollectiveOp::all_gather, b.params * e_, -1, b.lowest, b.above,
                       std::span<const std::int64_t>(&opt, 1));
    }
    for (const workload::GradientBucket& b : expert_buckets) {
      expert_collective(CollectiveOp::all_gather, b.params * e_, b, std::span<const std::int64_t>(&opt, 1));
    }
  } else if ((sharded_grads() && !sharded_params()) || (p_.offload_optimizer && !p_.offload_params)) {
    // Unit by unit: the updated shard copied in from the host (offloading), then gathered
    // (ZeRO-2).
    for (int u = -1; u <= m_.layer_count(); ++u) {
      const double n = unit_params_[static_cast<std::size_t>(u + 1)];
      if (n <= 0.0) continue;
      std::int64_t ready = opt;
      if (p_.offload_optimizer)
        ready = copy(false, n * copied_share() * e_, -1, u, std::span<const std::int64_t>(&ready, 1));
      if (sharded_grads() && !sharded_params()) {
        shard_collective(CollectiveOp::all_gather, n * e_, -1, u, u + 1, std::span<const std::int64_t>(&ready, 1));
      }
    }
  }
}

void Builder::issue_with_backward(std::int64_t first, std::int64_t end) {
  std::vector<std::int64_t>& order = prog_.order[static_cast<std::size_t>(rank_)];
  // A rank's ops are emitted in its order, so ids ascend along it.
  auto position = [&](std::int64_t id) {
    return static_cast<std::size_t>(std::lower_bound(order.begin(), order.end(), id) - order.begin());
  };
  const std::size_t from = position(first), to = position(end);
  // place[i]: the op at position i of the old order goes just after the one at place[i]
  // (itself: it stays); `moved` lists those that go earlier, in order.
  std::vector<std::size_t> place(order.size());
  std::iota(place.begin(), place.end(), std::size_t{0});
  std::vector<std::pair<std::size_t, std::int64_t>> moved;
  std::size_t stream_last = 0;  // the dp stream's previous op
  for (std::size_t i = 0; i < from; ++i) {
    if (prog_.ops[static_cast<std::size_t>(order[i])].stream == Stream::dp) stream_last = i;
  }
  for (std::size_t i = from; i < to; ++i) {
    const std::int64_t id = order[i];
    if (prog_.ops[static_cast<std::size_t>(id)].stream != Stream::dp) continue;
    std::size_t after = stream_last;
    for (std::int64_t d : prog_.deps_of(id)) {
      const std::size_t at = position(d);
      if (at < order.size() && order[at] == d) after = std::max(after, place[at]);
    }
    if (after + 1 < i) {
      place[i] = after;
      moved.emplace_back(after, id);
    }
    stream_last = place[i];
  }
  if (moved.empty()) return;
  std::vector<std::int64_t> out;
  out.reserve(order.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (place[i] == i) out.push_back(order[i]);
    while (next < moved.size() && moved[next].first == i) out.push_back(moved[next++].second);
  }
  order = std::move(out);
}

}  // namespace parasim::program::detail
