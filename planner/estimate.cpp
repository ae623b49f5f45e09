#include "planner/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "workload/accounting.hpp"
#include "workload/buckets.hpp"
#include "workload/kernels.hpp"
#include "program/program.hpp"
#include "workload/schedule.hpp"
#include "report/metrics.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "planner/estimate_impl.hpp"
#include "sim/network.hpp"
#include "sim/simulate.hpp"
#include "topology/routing.hpp"

namespace parasim::planner {

Estimator::Estimator(const scenario::Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
Estimator::~Estimator() = default;

StepEstimate Estimator::estimate(const scenario::Scenario& s) {
  Impl& im = *impl_;
  const scenario::ParallelPlan& p = s.plan;
  const scenario::ModelSpec& m = s.model;
  const scenario::TrainingSpec& t = s.training;
  const sim::DeviceProfile& prof = im.profile;
  const topology::Dtype dtype = t.precision;
  const int e = topology::dtype_bytes(topology::storage_dtype(dtype));  // bf16 under fp8
  const int ge = topology::dtype_bytes(t.grad_dtype);                   // what the gradient reductions carry
  const bool transformer = m.kind == scenario::ModelKind::transformer;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const int layers = m.layer_count();
  const int mbs = s.micro_batches();
  // A degraded device (cluster.degraded) sets every synchronised rank's pace: compute at the
  // slowest device's speed.
  const double slow = 1.0 / s.cluster.slowest_compute_factor();
  const Costing cost{prof, dtype, slow};
  const bool kernels = prof.kernel_model();
  const workload::KernelPlan kp = workload::kernel_plan(s);
  double start_f = 0.0, start_b = 0.0;  // per chunk and micro-batch, pipelines only

  // Per layer and micro-batch on one rank: forward, recompute, backward (tp waits included),
  // and the tp communication among them.
  std::vector<double> fwd(static_cast<std::size_t>(layers), 0.0);
  std::vector<double> rec(fwd.size(), 0.0);
  std::vector<double> bwd(fwd.size(), 0.0);
  // Per layer and micro-batch, forward + backward (+ recompute): the exposed tp
  // communication, the cp ring's waits, the all-to-alls (mixture of experts).
  std::vector<double> tp_l(fwd.size(), 0.0);
  std::vector<double> cp_l(fwd.size(), 0.0);
  std::vector<double> ep_l(fwd.size(), 0.0);
  std::vector<double> bn_l(fwd.size(), 0.0);  // SyncBN's collectives, waited for
  double act = 0.0;                           // one s·b·h tensor
  double emb_f = 0.0, emb_b = 0.0, head_f = 0.0, head_b = 0.0, tp_ends = 0.0;
  if (transformer) act = static_cast<double>(m.seq_len / p.cp) * t.micro_batch * m.hidden * e;  // this rank's positions
  if (transformer) {
    const LayerCost main = im.transformer_layer_cost(s, cost, m, kp, act);
    const std::vector<workload::Gemm> head{workload::lm_head_gemm(m, t.micro_batch, p.tp, p.cp)};
    start_f = main.start_f;
    start_b = main.start_b;
    // Layers [from, to) cost `c` each.
    auto fill = [&](const LayerCost& c, int from, int to) {
      for (auto li = static_cast<std::size_t>(from); li < static_cast<std::size_t>(to); ++li) {
        fwd[li] = c.f;
        rec[li] = c.r;
        bwd[li] = c.b;
        tp_l[li] = c.tp;
        cp_l[li] = c.cp;
        ep_l[li] = c.ep;
      }
    };
    fill(main, 0, layers);
    if (m.moe() && m.dense_layers > 0) {  // a mixture of experts' dense first layers
      const workload::KernelPlan dense = workload::layer_kernel_plan(kp, m.layer_spec(0));
      fill(im.transformer_layer_cost(s, cost, dense.model, dense, act), 0, std::min(layers, m.dense_layers));
    }
    const double sum = main.sum;
    const double gather = main.gather;
    const double overlap = main.overlap;
    const double stats = p.tp > 1 ? im.collective(s, scenario::Dim::tp, program::CollectiveOp::all_gather,
                                                  3.0 * 4.0 * (m.seq_len / p.cp) * t.micro_batch * p.tp, 0, overlap)
                                  : 0.0;
    if (kernels) {
      emb_f = cost.pass(workload::embedding_kernels(kp, false), program::Category::forward, 0.0, 0) +
              (p.tp > 1 ? sum : 0.0);
      emb_b = cost.pass(workload::embedding_kernels(kp, true), program::Category::backward, 0.0, 0) + gather;
      head_f = gather + cost.pass(workload::head_kernels(kp, false), program::Category::forward, 0.0, 0) + stats;
      head_b =
          cost.pass(workload::head_kernels(kp, true), program::Category::backward, 0.0, 0) + (p.tp > 1 ? sum : 0.0);
    } else {
      emb_f = cost.op({}, 1.0, act) + (p.tp > 1 ? sum : 0.0);
      emb_b = cost.op({}, 1.0, act) + gather;
      head_f = gather + cost.op(head, 1.0, workload::gemm_io_bytes(head, e)) + stats;
      head_b = cost.op(head, 2.0, 2.0 * workload::gemm_io_bytes(head, e)) + (p.tp > 1 ? sum : 0.0);
    }
    tp_ends = p.tp > 1 ? 2.0 * (sum + gather) + stats : 0.0;
  } else {
    for (int l = 0; l < layers; ++l) {
      const auto li = static_cast<std::size_t>(l);
      const GenericCost c = im.generic_layer_cost(s, cost, m.generic_layers[li]);
      fwd[li] = c.forward;
      bwd[li] = c.backward;
      bn_l[li] = c.syncbn;
      rec[li] = t.recompute == scenario::Recompute::full ? fwd[li] : 0.0;
    }
  }

  // Per stage: work per micro-batch W (forward part and backward part), its layers.
  const int v = p.virtual_stages;
  std::vector<double> work(static_cast<std::size_t>(p.pp), 0.0);
  std::vector<double> back(work.size(), 0.0);
  std::vector<std::vector<int>> stage_layers(work.size());
  for (int st = 0; st < p.pp; ++st) {
    double f = 0.0, b = 0.0;
    for (int c = 0; c < v; ++c) {
      const auto [first, last] = workload::chunk_layers(layers, p.pp, v, st, c);
      f += start_f;
      b += start_b;
      for (int l = first; l < last; ++l) {
        f += fwd[static_cast<std::size_t>(l)];
        b += rec[static_cast<std::size_t>(l)] + bwd[static_cast<std::size_t>(l)];
        stage_layers[static_cast<std::size_t>(st)].push_back(l);
      }
    }
    if (st == 0) {
      f += emb_f;
      b += emb_b;
    }
    if (st == p.pp - 1) {
      f += head_f;
      b += head_b;
    }
    work[static_cast<std::size_t>(st)] = f + b;
    back[static_cast<std::size_t>(st)] = b;
  }
  // ZeRO-2/3 (dp > 1): every micro-batch reduce-scatters each unit's gradients after its
  // backward and, under ZeRO-3, gathers each unit's parameters before each pass, one unit
  // ahead. They run under the stage's compute: the stage takes the longer of its work and
  // that traffic, plus the gather of each pass's first unit, which nothing hides.
  const int sharded = p.grad_ranks() > 1 ? p.zero : 0;
  // ZeRO's collectives over its shard group (the dp line, or under hybrid sharding a part
  // of it), and under hybrid sharding the sum of a reduce-scatter's shard over the replica
  // group (per bucket under ZeRO-1, once per step under ZeRO-2/3).
  const program::GroupPart shard_part = p.hybrid_shard() ? program::GroupPart::shard : program::GroupPart::whole;
  auto shard_op = [&](program::CollectiveOp what, double bytes, int st) {
    return im.collective(s, scenario::Dim::dp, what, bytes, st, 1.0, shard_part);
  };
  auto replica_sum = [&](double bytes, int st) {
    if (!p.hybrid_shard()) return 0.0;
    return im.collective(s, scenario::Dim::dp, program::CollectiveOp::all_reduce, bytes / p.shard_size(), st, 1.0,
                         program::GroupPart::replica);
  };
  std::vector<double> sharded_loss(work.size(), 0.0);  // per micro-batch, what the traffic adds
  // Offloading (plan.offload_optimizer / offload_params): each unit's gradients copied out
  // per micro-batch, its parameters copied in per pass, on the two copy streams beside the
  // dp ones; the rank's share of its PCIe path (every rank copies at once).
  const double share = sharded >= 2 ? 1.0 / p.shard_size() : 1.0;  // of a unit, what a rank copies
  auto host_copy = [&](double bytes) { return bytes > 0.0 ? im.host_copy(s, bytes) : 0.0; };
  double offload_exposed = 0.0;  // per micro-batch, what the copies add (stage 0)
  // Offloaded activations: each layer's out after its forward and back before its backward,
  // on the two directions at once. A layer's copy back starts with the backward of the
  // layer after it, so a micro-batch's backward takes the longer of its compute and its
  // copies back, and the copies out bound the whole; and since a layer comes back only once
  // it is out, on one stage the forward also waits for its copies out once per step (with
  // several stages the other stages' passes cover that wait).
  const double layer_act = p.offload_activations && transformer
                               ? workload::layer_activation_bytes(m, t.micro_batch, p.tp, sp, t.recompute, e,
                                                                  scenario::fused(t.attention),
                                                                  t.precision == scenario::Dtype::fp8 ? 1 : 0) /
                                     p.cp
                               : 0.0;
  if (sharded >= 2 || p.offloads()) {
    const double passes = t.recompute == scenario::Recompute::full ? 3.0 : 2.0;
    for (int st = 0; st < p.pp; ++st) {
      const auto sti = static_cast<std::size_t>(st);
      double traffic = 0.0;
      double out = 0.0, in = 0.0;  // copies to and from host memory
      double first = 0.0;
      for (const workload::GradientSource& u :
           workload::gradient_sources(s, st, st == p.pp - 1 && transformer, st == 0 && transformer)) {
        // The sum over replicas comes once per step: a micro-batch's share of it here.
        if (sharded >= 2) {
          traffic +=
              shard_op(program::CollectiveOp::reduce_scatter, u.params * ge, st) + replica_sum(u.params * ge, st) / mbs;
        }
        if (p.offload_optimizer) out += host_copy(u.params * share * e);
        if (sharded == 3 || p.offload_params) {
          const double gather = sharded == 3 ? shard_op(program::CollectiveOp::all_gather, u.params * e, st) : 0.0;
          const double fetch = p.offload_params ? host_copy(u.params * share * e) : 0.0;
          traffic += passes * gather;
          in += passes * fetch;
          if (u.layer >= 0 && u.layer < layers) first = gather + fetch;
        }
      }
      double busy = work[sti];  // the compute, stretched by the activations' copies
      if (layer_act > 0.0) {
        const double one = host_copy(layer_act);
        const double n = static_cast<double>(stage_layers[sti].size());
        const double f = work[sti] - back[sti];
        const double steady = std::max(f + std::max(back[sti], n * one), n * one);
        const double alone = std::max(work[sti] - back[sti], n * one) + std::max(back[sti], n * one) + v * one;
        busy = p.pp == 1 ? steady + (alone - steady) / mbs : steady;
      }
      const double exposed = passes * v * first;
      const double slower = std::max({busy + exposed, traffic, out, in}) - work[sti];
      if (st == 0 && p.offloads()) offload_exposed = std::max({busy + exposed, out, in}) - work[sti];
      sharded_loss[sti] = slower;
      // Spread over the passes as their share of the work.
      if (work[sti] > 0.0) back[sti] += slower * back[sti] / work[sti];
      work[sti] += slower;
    }
  }
  const double w_max = *std::max_element(work.begin(), work.end());
  double w_sum = 0.0;
  for (double w : work) w_sum += w;
  // Megatron's scatter-gather sends 1/tp per rank and gathers it over tp on arrival.
  const bool scatter = transformer && p.tp > 1 && !sp && p.pp_scatter_gather;
  const double boundary = transformer ? act / (sp || scatter ? p.tp : 1) : 0.0;
  double t_p2p = 0.0;
  if (p.pp > 1) {
    for (int st = 0; st + 1 < p.pp; ++st) {
      const double bytes =
          transformer
              ? boundary
              : m.generic_layers[static_cast<std::size_t>(workload::chunk_layers(layers, p.pp, v, st, 0).second - 1)]
                        .activations *
                    t.micro_batch * e;
      t_p2p = std::max(t_p2p, im.transfer(p, st, bytes));
    }
    if (scatter) t_p2p += im.collective(s, scenario::Dim::tp, program::CollectiveOp::all_gather, act, 0);
  }
  // Each micro-batch's round trip through the pipeline waits on its transfers. Under 1F1B
  // a stage exchanges with the next stage after each forward (its activation out, a
  // gradient in, both at once) and with the previous one after each backward: a cycle of
  // the steady state is the slowest stage's work plus one transfer per neighbour (the
  // first and last stages have one, the middle ones two). Interleaved, two a micro-batch:
  // the rest of the chunks' transfers hide behind the other chunks' work. GPipe streams
  // all forwards, then all backwards: its transfers overlap the next micro-batch's work,
  // each phase going at the pace of its slower side, the work or the link.
  double cycle = 0.0;
  double f_max = 0.0, b_max = 0.0;  // GPipe's phases: the slowest forward, backward
  for (int st = 0; st < p.pp; ++st) {
    const auto sti = static_cast<std::size_t>(st);
    const int neighbours = (st > 0 ? 1 : 0) + (st + 1 < p.pp ? 1 : 0);
    cycle = std::max(cycle, work[sti] + neighbours * t_p2p);
    f_max = std::max(f_max, work[sti] - back[sti]);
    b_max = std::max(b_max, back[sti]);
  }
  const double pipeline =
      p.schedule == scenario::Schedule::interleaved_1f1b
          ? (mbs + static_cast<double>(p.pp - 1) / v) * (w_max + 2.0 * t_p2p) + 2.0 * (p.pp * v - 1) * t_p2p
      : p.schedule == scenario::Schedule::gpipe
          ? w_sum + (mbs - 1) * (std::max(f_max, t_p2p) + std::max(b_max, t_p2p)) + 2.0 * (p.pp - 1) * t_p2p
          : w_sum + (mbs - 1) * cycle + 2.0 * (p.pp - 1) * t_p2p;

  // Gradient synchronisation, optimizer and ZeRO-1's all-gathers, per stage.
  const double word = transformer ? static_cast<double>(m.vocab) * m.hidden / p.tp : 0.0;
  const double final_norm = transformer ? 2.0 * m.hidden : 0.0;
  double step = pipeline;
  double dp_exposed = 0.0;
  double optimizer = 0.0;
  double ahead = 0.0;  // backward seconds of the stages before this one
  for (int st = 0; st < p.pp; ++st) {
    const auto sti = static_cast<std::size_t>(st);
    const double end_bwd = pipeline - ahead - st * t_p2p;
    ahead += back[sti];
    // Gradient sources in completion order and buckets (workload/buckets.hpp, the Program's
    // layout), with each source's ready time during the last backward.
    // Under expert parallelism the experts' gradients have buckets of their own, summed
    // over the ranks holding the same experts (none with one).
    std::vector<workload::GradientSource> sources =
        workload::gradient_sources(s, st, st == p.pp - 1 && transformer, st == 0 && transformer);
    const std::vector<workload::GradientSource> expert_sources = workload::split_experts(sources);
    std::vector<double> expert_ready;
    double experts = 0.0;
    for (const workload::GradientSource& x : expert_sources) experts += x.params;
    std::vector<double> ready_at;
    double params = 0.0;
    double clock = end_bwd - back[sti];
    // Interleaved, the last micro-batches' backwards run chunk by chunk from the last,
    // pp of them each: chunk c's gradients are final c such rounds before the end (and
    // the host issues their buckets then, program::Builder::issue_with_backward).
    const bool chunked = p.schedule == scenario::Schedule::interleaved_1f1b && v > 1;
    const double round = back[sti] / v + t_p2p;
    int chunk = v - 1;
    if (chunked) clock = end_bwd - (chunk * p.pp + 1) * round;
    for (const workload::GradientSource& x : sources) {
      params += x.params + x.experts;
      if (x.layer == layers) clock += head_b;
      if (x.layer >= 0 && x.layer < layers) {
        const auto l = static_cast<std::size_t>(x.layer);
        while (chunked && chunk > 0 && x.layer < workload::chunk_layers(layers, p.pp, v, st, chunk).first) {
          --chunk;
          clock = end_bwd - (chunk * p.pp + 1) * round;
        }
        clock += rec[l] + bwd[l];
      }
      ready_at.push_back(x.layer < 0 ? end_bwd : clock);
      if (x.experts > 0.0) expert_ready.push_back(ready_at.back());
    }
    const bool expert_sync = !expert_sources.empty() && p.expert_grad_ranks() > 1;
    const std::vector<workload::GradientBucket> expert_buckets =
        expert_sync ? workload::gradient_buckets(expert_sources, ge, p.bucket_bytes)
                    : std::vector<workload::GradientBucket>{};
    auto expert_op = [&](program::CollectiveOp what, double bytes) {
      return im.collective(s, scenario::Dim::dp, what, bytes, st, 1.0, program::GroupPart::expert_data);
    };
    double free = end_bwd;  // when the dp stream and the stage are done
    std::vector<workload::GradientBucket> buckets;
    if (sharded >= 2 || p.offload_optimizer) {
      // The last unit's reduce-scatter (the stage's lowest) follows the last backward, and
      // offloading its copy out.
      if (!sources.empty()) {
        const double bytes = sources.back().params * ge;
        if (sharded >= 2) free += shard_op(program::CollectiveOp::reduce_scatter, bytes, st) + replica_sum(bytes, st);
        if (p.offload_optimizer) free += host_copy(sources.back().params * share * e);
      }
      if (sharded == 2) buckets = workload::gradient_buckets(sources, ge, 0.0);  // the parameters' gathers, a unit each
    } else if (p.grad_ranks() > 1) {
      buckets = workload::gradient_buckets(sources, ge, p.bucket_bytes);
      double stream = 0.0;
      for (const workload::GradientBucket& b : buckets) {
        double ready = 0.0;
        for (std::size_t i = b.first; i < b.end; ++i) ready = std::max(ready, p.overlap_dp ? ready_at[i] : end_bwd);
        const double d =
            p.zero == 1
                ? shard_op(program::CollectiveOp::reduce_scatter, b.params * ge, st) + replica_sum(b.params * ge, st)
                : im.collective(s, scenario::Dim::dp, program::CollectiveOp::all_reduce, b.params * ge, st, 1.0);
        stream = std::max(stream, ready) + d;
      }
      for (const workload::GradientBucket& b : expert_buckets) {
        double ready = 0.0;
        for (std::size_t i = b.first; i < b.end; ++i) ready = std::max(ready, p.overlap_dp ? expert_ready[i] : end_bwd);
        stream = std::max(stream, ready) +
                 expert_op(p.zero == 1 ? program::CollectiveOp::reduce_scatter : program::CollectiveOp::all_reduce,
                           b.params * ge);
      }
      free = std::max(free, stream);
    }
    if (sp && transformer) {
      double whole =
          static_cast<double>(stage_layers[sti].size()) * (m.mlp == scenario::Mlp::gelu ? 6.0 : 5.0) * m.hidden;
      if (st == p.pp - 1) whole += final_norm;
      if (sharded >= 2) whole /= p.shard_size();
      free += im.collective(s, scenario::Dim::tp, program::CollectiveOp::all_reduce, whole * ge, st);
    }
    if (transformer && m.tie_embeddings && p.pp > 1 && (st == 0 || st == p.pp - 1)) {
      // The embedding group: first and last stage, a pp-dimension pair; as one transfer each way.
      free += 2.0 * im.transfer(p, p.pp - 1, word * ge);
    }
    const double shard = workload::optimizer_shard_params(p, params, experts);
    // The host waits for the gradients before the step (the overflow and norm checks), then
    // issues the optimizer's kernels.
    const double d_opt = dispatch_seconds(prof, program::Category::optimizer);
    double opt =
        slow * (kernels ? kernels_seconds(prof, workload::optimizer_kernels(s, shard), dtype, d_opt, d_opt)
                        : op_seconds(prof, {}, 1.0, 12.0 * shard,
                                     (8.0 + 2.0 * scenario::optimizer_state_bytes(t.optimizer) + 2.0 * e) * shard, true,
                                     dtype));
    if (p.offload_optimizer) {
      // The host's step (host_seconds), then the updated weights copied in unit by unit.
      program::Op host;
      host.bytes = scenario::host_optimizer_bytes(t.optimizer, e) * shard;
      opt = sim::host_seconds(s, host);
      if (!p.offload_params) {
        for (const workload::GradientSource& u : sources) opt += host_copy(u.params * share * e);
      }
    }
    double end = free + opt;
    if ((sharded == 1 || sharded == 2) && !buckets.empty()) {
      double gathers = 0.0;
      double first = 0.0;  // the last bucket holds the stage's lowest layers: needed first
      for (const workload::GradientBucket& b : buckets) {
        first = shard_op(program::CollectiveOp::all_gather, b.params * e, st);
        gathers += first;
      }
      for (const workload::GradientBucket& b : expert_buckets)
        gathers += expert_op(program::CollectiveOp::all_gather, b.params * e);
      // Deferred to the next step's forward, the stage waits for its first bucket; the rest
      // hide behind one micro-batch's forward as far as it lasts.
      const double forward = work[sti] - back[sti];
      end += p.defers_param_gather() ? first + std::max(0.0, gathers - first - forward) : gathers;
    }
    if (end > step) {
      step = end;
      dp_exposed = free - end_bwd + mbs * (sharded_loss[sti] - (st == 0 ? offload_exposed : 0.0));
      optimizer = opt;
    }
  }

  StepEstimate out;
  out.step_time = step;
  out.pipeline = pipeline;
  out.bubble = step > 0 ? std::max(0.0, pipeline - mbs * work[0]) / step : 0.0;
  double tp_layers = 0.0, cp_layers = 0.0, ep_layers = 0.0, bn_layers = 0.0;
  for (int l : stage_layers[0]) {
    tp_layers += tp_l[static_cast<std::size_t>(l)];
    cp_layers += cp_l[static_cast<std::size_t>(l)];
    ep_layers += ep_l[static_cast<std::size_t>(l)];
    bn_layers += bn_l[static_cast<std::size_t>(l)];
  }
  out.tp_exposed = mbs * (tp_layers + tp_ends);
  out.dp_exposed = dp_exposed;
  out.cp_exposed = mbs * cp_layers;
  out.ep_exposed = mbs * ep_layers;
  out.syncbn_exposed = mbs * bn_layers;
  out.optimizer = optimizer;
  out.offload_exposed = mbs * offload_exposed;
  out.tokens_per_s = step > 0 ? static_cast<double>(t.global_batch) * m.tokens_per_sample() / step : 0.0;
  const double peak = s.cluster.device.peak(topology::storage_dtype(dtype));
  out.mfu = step > 0 && peak > 0 ? report::model_flops_per_step(s) / (step * p.world() * peak) : 0.0;
  // The largest loss of at least 5 % of the step names the bottleneck.
  const std::pair<double, const char*> losses[] = {
      {out.bubble * step, "pipeline bubble"},
      {out.tp_exposed, "tensor-parallel communication"},
      {out.dp_exposed, "data-parallel gradient synchronisation"},
      {out.cp_exposed, "context-parallel key/value exchange"},
      {out.ep_exposed, "expert-parallel token all-to-all"},
      {out.syncbn_exposed, "SyncBatchNorm statistics exchange"},
      {out.offload_exposed, "offload copies between the devices and host memory"},
      {p.offload_optimizer ? out.optimizer : 0.0, "the optimizer step on the hosts' cores"}};
  const auto worst = std::max_element(std::begin(losses), std::end(losses),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
  out.bottleneck = step > 0 && worst->first >= 0.05 * step
                       ? fmt::format("{} ({:.0f} % of the step)", worst->second, 100.0 * worst->first / step)
                       : "compute-bound";
  return out;
}

}  // namespace parasim::planner
