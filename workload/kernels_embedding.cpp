// The model's ends: the vocabulary-parallel embedding (Megatron's VocabParallelEmbedding)
// and the LM head with its vocabulary-parallel cross-entropy and GPT's loss_func, kernel by
// kernel as PyTorch launches them.
#include "workload/kernels.hpp"

#include <array>
#include <string_view>

#include "workload/kernels_detail.hpp"

namespace parasim::workload {

using namespace detail;

namespace {

// Megatron's masking of the token ids outside this rank's vocabulary slice (the embedding's
// ids, the cross-entropy's targets): (t < start) | (t >= end), t.clone() - start, and the
// masked ids set to 0, over T int64 ids and a byte of mask each.
void out_of_slice(Emit& k, const Dims& x, const std::array<std::string_view, 6>& names) {
  const double ids = 8.0 * x.T;
  k.memory(names[0], ids + x.T);
  k.memory(names[1], ids + x.T);
  k.memory(names[2], 3.0 * x.T);
  k.memory(names[3], 2.0 * ids);
  k.memory(names[4], 2.0 * ids);
  k.memory(names[5], ids + x.T);
}

}  // namespace

std::vector<Kernel> embedding_kernels(const KernelPlan& p, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  const double word = static_cast<double>(p.model.vocab) / p.tp * x.h;
  const bool positions = p.model.mlp == scenario::Mlp::gelu;
  if (!backward) {
    // VocabParallelEmbedding under tp: the ids outside this rank's slice masked to 0 before
    // the lookup ((t < start) | (t >= end), t.clone() - start, the masked fill) and their
    // rows zeroed after it.
    if (p.tp > 1) {
      static constexpr std::array<std::string_view, 6> names{"ids-below", "ids-above", "ids-mask-or",
                                                             "ids-clone", "ids-shift", "ids-mask-fill"};
      out_of_slice(k, x, names);
    }
    k.memory("embedding-lookup", 2.0 * x.T * x.h * x.e);
    if (p.tp > 1) k.memory("embedding-rows-zero", 2.0 * x.T * x.h * x.e + x.T);
    if (positions) k.memory("position-add", 3.0 * x.T * x.h * x.e);
    if (p.dropout) k.memory("embedding-dropout", 2.0 * x.T * x.h * x.e + x.T * x.h);
    return k.take();
  }
  if (p.dropout) k.memory("embedding-dropout-bwd", 2.0 * x.T * x.h * x.e + x.T * x.h);
  // The dense gradient of the lookup: zeroed, rows added in, then accumulated into the
  // main gradient.
  k.memory("embedding-grad-zero", word * x.e);
  k.memory("embedding-grad-index-add", 3.0 * x.T * x.h * x.e);
  k.memory("embedding-main-grad-add", word * (x.e + 2.0 * p.grad_element));
  if (positions) k.memory("position-grad", x.T * x.h * x.e + x.s * x.h * 2.0 * p.grad_element);
  return k.take();
}

std::vector<Kernel> head_kernels(const KernelPlan& p, bool backward) {
  Emit k(p);
  const Dims x = dims_of(p);
  const long long vocab = p.model.vocab / p.tp;
  const double logits = x.T * static_cast<double>(vocab);
  // The cross-entropy runs on an fp32 copy of the logits: 4 bytes each, plus the cast.
  const double cast = x.e == 4 ? 0.0 : logits * (x.e + 4.0);
  // Megatron's vocabulary-parallel cross-entropy (_VocabParallelCrossEntropy) and GPT's
  // loss_func, kernel by kernel as PyTorch launches them: besides the passes over the
  // logits, a dozen small kernels on the T targets and losses (int64 or fp32 each).
  const double ids = 8.0 * x.T;
  const double per_token = 4.0 * x.T;
  if (!backward) {
    k.memory("final-layer-norm", 2.0 * x.Tl * x.h * x.e);
    k.gemm("lm-head", x.Ti, vocab, x.hi);
    if (cast > 0) k.memory("logits-to-fp32", cast);
    k.memory("logits-max", 4.0 * logits);
    k.memory("logits-sub-max", 8.0 * logits);
    // The targets outside this rank's slice: (t < start) | (t >= end), t.clone() - start,
    // masked to 0.
    static constexpr std::array<std::string_view, 6> names{"target-below", "target-above", "target-mask-or",
                                                           "target-clone", "target-shift", "target-mask-fill"};
    out_of_slice(k, x, names);
    // logits_2d[arange, target]: the index, the gather, its copy, the masked positions zeroed.
    k.memory("target-arange", ids);
    k.memory("target-logit", 2.0 * ids + per_token);
    k.memory("target-logit-copy", 2.0 * per_token);
    k.memory("target-logit-mask-fill", 2.0 * per_token + x.T);
    k.memory("logits-exp", 8.0 * logits);
    k.memory("logits-sum-exp", 4.0 * logits);
    k.memory("log-sum-exp", 2.0 * per_token);
    k.memory("loss-per-token", 3.0 * per_token);
    k.memory("softmax-divide", 8.0 * logits);
    // loss_func: sum(losses * loss_mask) / loss_mask.sum(), and the copy averaged over the
    // data-parallel group for the log; the schedule divides by the micro-batches.
    k.memory("loss-mask-mul", 3.0 * per_token);
    k.memory("loss-sum", per_token);
    k.memory("loss-mask-sum", per_token);
    k.memory("loss-divide", 12.0);
    k.memory("loss-log-copy", 8.0);
    k.memory("loss-log-cat", 8.0);
    k.memory("loss-log-average", 8.0);
    k.memory("loss-over-micro-batches", 8.0);
    return k.take();
  }
  // The loss's scalar chain backward (the seed gradient, the loss scale under fp16, the
  // divisions, the mask product), then the cross-entropy's: softmax - one-hot at the
  // targets this rank holds (arange, the mask as float, 1 - mask, the gather, the
  // subtraction, the scatter back), times the loss gradient.
  k.memory("loss-grad-seed", 4.0);
  if (p.loss_scale) {
    k.memory("loss-scale", 8.0);
    k.memory("loss-scale-bwd", 8.0);
  }
  k.memory("loss-over-micro-batches-bwd", 8.0);
  k.memory("loss-divide-bwd", 12.0);
  k.memory("loss-mask-mul-bwd", 3.0 * per_token);
  k.memory("target-arange-bwd", ids);
  k.memory("target-mask-float", x.T + per_token);
  k.memory("target-one-minus-mask", 2.0 * per_token);
  k.memory("target-grad-gather", 2.0 * ids + per_token);
  k.memory("target-grad-sub", 3.0 * per_token);
  k.memory("target-grad-scatter", 2.0 * ids + per_token);
  k.memory("logits-grad-scale", 8.0 * logits);
  if (cast > 0) k.memory("logits-grad-cast", cast);
  k.gemm("lm-head-dgrad", x.Ti, x.hi, vocab);
  k.wgrad("lm-head-wgrad", vocab, x.hi, x.Ti);
  k.memory("final-layer-norm-bwd", 3.0 * x.Tl * x.h * x.e);
  k.memory("final-layer-norm-weight-grad", 2.0 * x.Tl * x.h * x.e);
  return k.take();
}

}  // namespace parasim::workload
