// A generic model's layer (a CNN's, as GEMM-equivalent layers): its GEMM, activation and
// BatchNorm kernels, whole or in the pieces SyncBatchNorm's collectives cut it into.
#include "workload/kernels.hpp"

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

using namespace detail;

std::vector<Kernel> generic_layer_kernels(const KernelPlan& p, const scenario::GenericLayer& layer, bool backward,
                                          int piece) {
  Emit k(p);
  const Gemm g = generic_layer_gemm(layer, p.micro_batch);
  const double act = layer.activations * p.micro_batch * p.element;
  const scenario::BatchNorm& bn = layer.batch_norm;
  const int n = bn.layers;
  const double values = n > 0 ? bn.values / n * p.micro_batch * p.element : 0.0;  // one BN layer's
  const double stats = (2.0 * bn.channels + 1.0) * 4.0;                           // one member's, fp32
  const double merged = p.bn_members * stats + 2.0 * bn.channels * 4.0;
  if (!backward) {
    if (piece < 0) {
      k.gemm("layer", g.m, g.n, g.k);
      for (int i = 0; i < n; ++i) {
        if (piece == whole_layer) k.memory("bn-stats", values);
        k.memory("bn-normalize", 2.0 * values);
      }
      k.memory("activation", act);
      return k.take();
    }
    if (piece == 0) k.gemm("layer", g.m, g.n, g.k);
    if (piece > 0) {
      // The members' statistics without the empty ones (a boolean-mask selection), merged,
      // then the normalisation.
      k.memory("bn-mask-stats", 2.0 * p.bn_members * stats);
      k.memory("bn-merge-stats", merged);
      k.memory("bn-normalize", 2.0 * values);
    }
    if (piece < n) {
      k.memory("bn-stats", values);
      k.memory("bn-pack-stats", 2.0 * stats);  // mean, invstd and count into one buffer
    }
    if (piece == n) k.memory("activation", act);
    return k.take();
  }
  if (piece < 0 || piece == n) k.memory("activation-grad", act);
  if (piece < 0) {
    for (int i = 0; i < n; ++i) {
      k.memory("bn-backward-reduce", 2.0 * values);
      k.memory("bn-backward-input", 3.0 * values);
    }
  } else {
    if (piece < n) k.memory("bn-backward-input", 3.0 * values);
    if (piece > 0) {
      k.memory("bn-backward-reduce", 2.0 * values);
      k.memory("bn-pack-sums", 2.0 * 2.0 * bn.channels * 4.0);  // Σdy and Σdy·x̂ into one buffer
    }
  }
  if (piece <= 0) {
    k.gemm("layer-dgrad", g.m, g.k, g.n);
    k.wgrad("layer-wgrad", g.k, g.n, g.m);
  }
  return k.take();
}

}  // namespace parasim::workload
