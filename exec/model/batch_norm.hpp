// BatchNorm over a stretch of a generic layer's output (model/generic.hpp), as training
// runs it: each channel normalised by the batch's mean and variance, then scaled and
// shifted. The statistics of several micro-batches (SyncBN's dp replicas) merge exactly:
// each contributes its count, mean and sum of squared deviations (Chan et al.), and the
// backward's two per-channel sums add.
//
//   x̂ = (x − mean) · invstd,  invstd = 1 / sqrt(var + eps)   (var biased, eps 1e-5)
//   y = γ · x̂ + β
//   dβ = Σ dy,  dγ = Σ dy · x̂                                  (this micro-batch's)
//   dx = γ · invstd · (dy − Σdy / N − x̂ · Σ(dy · x̂) / N)     (sums and N over the group)
//
// These are the host's kernels (the CPU backend's and the reference model's); the CUDA
// backend runs the same operations on the device (cuda/kernels.hpp). Statistics and sums
// accumulate in double.
#pragma once

#include <cstdint>

namespace parasim::exec {

inline constexpr double batch_norm_eps = 1e-5;

// One BatchNorm layer's values in a micro-batch: per sample (`samples` of them, `stride`
// values apart), values [begin, begin + length) of the sample, each channel a contiguous
// run of them as in NCHW: channel c holds [begin + start(c), begin + start(c + 1)).
struct BnShape {
  std::int64_t samples = 0;
  std::int64_t stride = 0;
  std::int64_t begin = 0;
  std::int64_t length = 0;
  std::int64_t channels = 1;
  // Where channel c starts in the stretch, its values per sample, and the channel of
  // value i of the stretch.
  [[nodiscard]] std::int64_t start(std::int64_t c) const { return c * length / channels; }
  [[nodiscard]] std::int64_t positions(std::int64_t c) const { return start(c + 1) - start(c); }
  [[nodiscard]] std::int64_t channel_of(std::int64_t i) const { return ((i + 1) * channels - 1) / length; }
  // What bn_stats writes per micro-batch: mean and M2 per channel, then the sample count.
  [[nodiscard]] std::int64_t stats_size() const { return 2 * channels + 1; }
};

namespace kernels {

// stats[2C + 1]: each channel's mean, sum of squared deviations (M2), then the samples.
template <class T>
void bn_stats(T* stats, const T* x, const BnShape& s);
// mean_invstd[2C]: the merged mean and 1/sqrt(var + eps) of `members` blocks of stats
// (stats_size() apart), in order.
template <class T>
void bn_merge(T* mean_invstd, const T* gathered, int members, const BnShape& s);
// y = γ·x̂ + β over the layer's values (y may be x; values outside the stretch untouched).
template <class T>
void bn_normalize(T* y, const T* x, const T* mean_invstd, const T* gamma, const T* beta, const BnShape& s);
// sums[2C] = (Σdy, Σdy·x̂) per channel; adds them into dbeta and dgamma.
template <class T>
void bn_backward_reduce(T* sums, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean_invstd, const BnShape& s);
// dx from the group's sums over `total_samples` samples (dx may be dy).
template <class T>
void bn_backward_input(T* dx, const T* dy, const T* x, const T* mean_invstd, const T* gamma, const T* sums,
                       double total_samples, const BnShape& s);

}  // namespace kernels
}  // namespace parasim::exec
