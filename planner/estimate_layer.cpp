// The analytical tier's cost of a transformer layer per micro-batch: its kernels (or GEMMs
// and element-wise bytes without a kernel model) and the host's issuing, the tp
// collectives among them (overlapped under tp communication overlap), a mixture of
// experts' all-to-alls, context parallelism's ring, and recomputation.
#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
#include "planner/estimate_impl.hpp"

namespace parasim::planner {

LayerCost Estimator::Impl::transformer_layer_cost(const scenario::Scenario& s, const Costing& cost,
                                                  const scenario::ModelSpec& lm, const workload::KernelPlan& lkp,
                                                  double act) {
  const scenario::ParallelPlan& p = s.plan;
  const scenario::TrainingSpec& t = s.training;
  const sim::DeviceProfile& prof = cost.prof;
  const int e = topology::dtype_bytes(topology::storage_dtype(t.precision));
  const bool sp = p.sequence_parallel && p.tp > 1;
  const int mbs = s.micro_batches();
  const bool kernels = prof.kernel_model();
  const std::vector<workload::Gemm> g =
      workload::layer_forward_gemms(lm, t.micro_batch, p.tp, p.cp, p.ep, lm.expert_load());
  const auto split = g.begin() + workload::attention_gemm_count(lm);
  const std::vector<workload::Gemm> att(g.begin(), split);
  const std::vector<workload::Gemm> mlp(split, g.end());
  const std::vector<workload::Gemm> core(split - 3, split - 1);
  const double ew =
      workload::layer_activation_bytes(lm, t.micro_batch, p.tp, p.sequence_parallel, scenario::Recompute::none, e) /
      p.cp;
  // The tp collectives of the other stages share the links for the part of the time
  // that they, too, are in a tp collective: that share, from the stage's own figures.
  const program::CollectiveOp sum_op = sp ? program::CollectiveOp::reduce_scatter : program::CollectiveOp::all_reduce;
  double overlap = 0.0;
  if (p.tp > 1 && p.pp > 1) {
    const double alone =
        2.0 * (collective(s, scenario::Dim::tp, sum_op, act, 0) +
               (sp ? collective(s, scenario::Dim::tp, program::CollectiveOp::all_gather, act, 0) : 0.0));
    const double work = cost.op(g, 3.0, 3.0 * workload::gemm_io_bytes(g, e) + 2.0 * ew);
    // ... while they run at all: never with one micro-batch, nearly always with many.
    const double together = static_cast<double>(mbs - 1) / (mbs + p.pp - 2);
    overlap = together * 2.0 * alone / (2.0 * alone + work);
  }
  const double sum = collective(s, scenario::Dim::tp, sum_op, act, 0, overlap);
  const double gather = sp ? collective(s, scenario::Dim::tp, program::CollectiveOp::all_gather, act, 0, overlap) : 0.0;
  double f = 0.0, b = 0.0, tp_comm = 0.0, ep_comm = 0.0, cp_f = 0.0, cp_b = 0.0, chunk_f = 0.0, chunk_b = 0.0;
  int calls = p.tp == 1 ? 0 : sp ? 4 : 2;  // tp collectives per layer pass
  if (p.tp > 1) tp_comm = 2.0 * (sum + gather);
  // A split mixture-of-experts MLP (program/compile_moe.cpp): two all-to-alls over ep, and
  // with tp the routed tokens' all-gather and their outputs' reduce-scatter over tp in
  // place of the half's sequence gather and sum.
  if (lm.moe() && (p.ep > 1 || p.tp > 1)) {
    const double routed = act * lm.top_k * lm.expert_load();  // the tp group's token copies
    const double tp_tokens =
        p.tp > 1 ? collective(s, scenario::Dim::tp, program::CollectiveOp::all_gather, routed, 0, overlap) +
                       collective(s, scenario::Dim::tp, program::CollectiveOp::reduce_scatter, routed, 0, overlap)
                 : 0.0;
    ep_comm = p.ep > 1 ? 2.0 * collective(s, scenario::Dim::dp, program::CollectiveOp::all_to_all, routed / p.tp, 0,
                                          0.0, program::GroupPart::expert)
                       : 0.0;
    // With tp the shared experts gather the layer's tokens and sum their output over tp.
    const bool shared = p.tp > 1 && lm.shared_expert_ffn_hidden > 0;
    tp_comm = p.tp > 1 ? (shared ? 2.0 : 1.0) * (sum + gather) + tp_tokens : 0.0;
    calls = (p.tp > 1 ? (shared ? 6 : 4) : 0) + (p.ep > 1 ? 2 : 0);
  }
  const bool overlapped = kernels && sp && p.tp_comm_overlap;
  if (overlapped) {
    // Tensor-parallel overlap (workload/kernels.hpp, OverlapKernels): per half, the ring's
    // steps each take the longer of a block's GEMM and a block's transfer (an all-gather's
    // step); forward the pipelined sums the longer of a block's GEMM and its
    // reduce-scatter; backward the sum runs under the weight gradients. The ring's blocks
    // after the first and its communication cost the host nothing (host_issued).
    const int splits = workload::overlap_splits(lkp);
    const double step = gather / (p.tp - 1);
    const double block_sum = collective(s, scenario::Dim::tp, sum_op, act / splits, 0, overlap);
    double exposed = 0.0;  // forward and backward, per layer
    auto overlapped_pass = [&](bool backward, double* host) {
      double time = 0.0, work = 0.0;
      *host = 0.0;
      for (workload::LayerPart half : {workload::LayerPart::attention, workload::LayerPart::mlp}) {
        const workload::OverlapKernels k = workload::overlap_kernels(lkp, half, backward, splits);
        const double column = cost.device(k.column);
        const double row = cost.device(k.row);
        time += cost.device(k.prepare) + column + (p.tp - 1) * std::max(column, step) + cost.device(k.middle);
        work += cost.device(k.prepare) + p.tp * column + cost.device(k.middle);
        if (backward) {
          const double w = cost.device(k.wgrad);
          time += row + std::max(w, sum);
          work += row + w;
        } else {
          time += row + (splits - 1) * std::max(row, block_sum) + block_sum + cost.device(k.row_last) - row;
          work += (splits - 1) * row + cost.device(k.row_last);
        }
        const std::size_t issued =
            k.prepare.size() + 1 + k.middle.size() + 1 + (backward ? k.wgrad.size() : k.row_last.size() - 1);
        *host += static_cast<double>(issued) *
                 dispatch_seconds(prof, backward ? program::Category::backward : program::Category::forward);
      }
      exposed += time - work;
      return time;
    };
    double host_f = 0.0, host_b = 0.0;
    const double dev_f = overlapped_pass(false, &host_f);
    const double dev_b = overlapped_pass(true, &host_b);
    f = std::max(dev_f, host_f);
    b = std::max(dev_b, host_b);
    tp_comm = exposed / 2.0;  // per pass, as reported
    // A chunk's first pass waits for the host's first kernel at least.
    chunk_f = p.pp > 1 ? dispatch_seconds(prof, program::Category::forward) : 0.0;
    chunk_b = p.pp > 1 ? dispatch_seconds(prof, program::Category::backward) : 0.0;
  } else if (kernels) {
    const auto kf = workload::layer_kernels(lkp, workload::LayerPart::whole, false);
    const auto kb = workload::layer_kernels(lkp, workload::LayerPart::whole, true);
    f = cost.pass(kf, program::Category::forward, tp_comm + ep_comm, calls);
    b = cost.pass(kb, program::Category::backward, tp_comm + ep_comm, calls);
    if (p.pp > 1) {
      chunk_f = cost.cold_start(kf, program::Category::forward, tp_comm + ep_comm, calls);
      chunk_b = t.recompute == scenario::Recompute::full
                    ? chunk_f
                    : cost.cold_start(kb, program::Category::backward, tp_comm + ep_comm, calls);
    }
  } else if (p.tp == 1) {
    f = cost.op(g, 1.0, workload::gemm_io_bytes(g, e) + ew) + ep_comm;
    b = cost.op(g, 2.0, 2.0 * workload::gemm_io_bytes(g, e) + ew) + ep_comm;
  } else {
    f = cost.op(att, 1.0, workload::gemm_io_bytes(att, e) + ew / 2) +
        cost.op(mlp, 1.0, workload::gemm_io_bytes(mlp, e) + ew / 2) + tp_comm;
    b = cost.op(att, 2.0, 2.0 * workload::gemm_io_bytes(att, e) + ew / 2) +
        cost.op(mlp, 2.0, 2.0 * workload::gemm_io_bytes(mlp, e) + ew / 2) + tp_comm;
    f += ep_comm;
    b += ep_comm;
  }
  // Context parallelism's ring (program/compile_layers.cpp, context_half): forward each later
  // step waits for its keys and values as far as their transfer outlasts the step before;
  // backward the keys and values travel beside the gradients' sums (twice the bytes on
  // the link), each merge waits for its sum likewise, and the last sum's hop home is
  // waited for whole.
  if (p.cp > 1) {
    const double kv = workload::cp_kv_block_bytes(s);
    const double one = ring_step(p, kv);
    const double both = ring_step(p, 2.0 * kv);
    double block_f = 0.0, block_b = 0.0, merge = 0.0;
    if (kernels) {
      const workload::ContextKernels ck_f = workload::context_kernels(lkp, false);
      const workload::ContextKernels ck_b = workload::context_kernels(lkp, true);
      block_f = cost.device(ck_f.block);
      block_b = cost.device(ck_b.block);
      merge = cost.device(ck_b.merge);
    } else {
      block_f = cost.op(core, 1.0, workload::gemm_io_bytes(core, e)) / p.cp;
      block_b = 2.0 * block_f;
    }
    cp_f = (p.cp - 1) * std::max(0.0, one - block_f);
    cp_b = (p.cp - 1) * (std::max(0.0, both - block_b) + merge) + one;
    f += cp_f;
    b += cp_b;
  }
  double r = 0.0;
  if (t.recompute == scenario::Recompute::full) {
    r = f;
  } else if (t.recompute == scenario::Recompute::selective) {
    r = kernels ? cost.pass(workload::layer_kernels(lkp, workload::LayerPart::attention_core, false),
                            program::Category::recompute, 0.0, 0)
                : cost.op(core, 1.0, workload::gemm_io_bytes(core, e));
  }
  LayerCost c;
  c.f = f;
  c.b = b;
  c.r = r;
  c.tp = tp_comm * (t.recompute == scenario::Recompute::full ? 3.0 : 2.0);
  c.cp = cp_f * (t.recompute == scenario::Recompute::full ? 2.0 : 1.0) + cp_b;
  c.ep = ep_comm * (t.recompute == scenario::Recompute::full ? 3.0 : 2.0);
  c.start_f = chunk_f;
  c.start_b = chunk_b;
  c.sum = sum;
  c.gather = gather;
  c.overlap = overlap;
  return c;
}

}  // namespace parasim::planner
