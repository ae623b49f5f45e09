// The optimizer step's kernels: the gradients to fp32, the overflow check under fp16, the
// gradient norm, the update (AdamW, SGD with momentum, 8-bit AdamW) and the copy to the
// 16-bit weights.
#include "workload/kernels.hpp"

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

std::vector<Kernel> optimizer_kernels(const scenario::Scenario& s, double params) {
  KernelPlan p = kernel_plan(s);
  detail::Emit k(p);
  const int e = p.element;
  const int g = p.grad_element;
  if (g == 2) k.memory("main-grad-to-fp32", params * 6.0);
  if (s.training.precision == scenario::Dtype::fp16 && s.training.loss_scaling)
    k.memory("unscale-check-overflow", params * 8.0);
  k.memory("grad-norm", params * 4.0);
  // The parameter (fp32, or the 16-bit weight without master weights) read and written, the
  // fp32 gradient read, each state read and written: AdamW's two fp32 moments, SGD's
  // momentum, the 8-bit moments (and their blocks' maxima).
  const scenario::Optimizer o = s.training.optimizer;
  const bool master = e == 2 && s.training.master_weights;
  k.memory(o == scenario::Optimizer::adamw ? "adamw"
           : o == scenario::Optimizer::sgd ? "sgd-momentum"
                                           : "adamw8bit",
           params * ((e == 2 && !master ? 2.0 * e : 8.0) + 4.0 + 2.0 * optimizer_state_bytes(o)));
  if (master) k.memory("copy-to-16-bit-weights", params * (4.0 + e));
  k.memory("zero-main-grads", params * g);
  return k.take();
}

}  // namespace parasim::workload
