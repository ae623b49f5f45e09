// The analytical tier's cost of a generic (CNN) layer: its GEMM equivalent and element-wise
// work, and with BatchNorm under SyncBN the layer's collectives and the host's stalls.
#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
#include "planner/estimate_impl.hpp"

namespace parasim::planner {

GenericCost Estimator::Impl::generic_layer_cost(const scenario::Scenario& s, const Costing& cost,
                                                const scenario::GenericLayer& layer) {
  using program::CollectiveOp;
  using scenario::Dim;
  const int micro_batch = s.training.micro_batch;
  const int e = topology::dtype_bytes(topology::storage_dtype(s.training.precision));
  const std::vector<workload::Gemm> g{workload::generic_layer_gemm(layer, micro_batch)};
  const double a = layer.activations * micro_batch * e;
  // SyncBN: per BatchNorm layer the statistics' all-gather forward and the gradient sums'
  // all-reduce backward, both blocking the layer (program/compile_layers.cpp).
  const bool sync = s.syncs_batch_norm() && layer.batch_norm.layers > 0;
  const int n = layer.batch_norm.layers;
  const double c = layer.batch_norm.channels;
  const double gather =
      sync ? collective(s, scenario::Dim::dp, program::CollectiveOp::all_gather, 4.0 * (2.0 * c + 1.0) * s.plan.dp, 0)
           : 0.0;
  const double sums =
      sync ? collective(s, scenario::Dim::dp, program::CollectiveOp::all_reduce, 4.0 * 2.0 * c, 0) : 0.0;
  GenericCost out;
  out.syncbn = n * (gather + sums);
  const workload::KernelPlan kp = workload::kernel_plan(s);
  if (!cost.prof.kernel_model()) {
    out.forward = cost.op(g, 1.0, workload::gemm_io_bytes(g, e) + a) + n * gather;
    out.backward = cost.op(g, 2.0, 2.0 * workload::gemm_io_bytes(g, e) + a) + n * sums;
  } else if (!sync) {
    out.forward = cost.pass(workload::generic_layer_kernels(kp, layer, false), program::Category::forward, 0.0, 0);
    out.backward = cost.pass(workload::generic_layer_kernels(kp, layer, true), program::Category::backward, 0.0, 0);
  } else {
    // Forward, each gather stops the host (the gathered counts are masked on it): every
    // piece after one takes its own device time or the host's issuing of it. Backward the
    // host runs ahead as in a whole pass.
    std::vector<workload::Kernel> kb;
    for (int k = 0; k <= n; ++k) {
      out.forward += cost.pass(workload::generic_layer_kernels(kp, layer, false, k), program::Category::forward, 0.0,
                               k < n ? 1 : 0);
      const auto piece = workload::generic_layer_kernels(kp, layer, true, k);
      kb.insert(kb.end(), piece.begin(), piece.end());
    }
    out.forward += n * gather;
    out.backward = cost.pass(kb, program::Category::backward, n * sums, n);
  }
  return out;
}

}  // namespace parasim::planner
