// BatchNorm's kernels (exec/model/batch_norm.hpp): the per-channel reductions one block
// per channel, each thread's partial sums in double combined in a fixed tree in shared
// memory (the same result every run), the element-wise parts one thread per value.
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"

#include <cuda_runtime.h>

namespace parasim::exec::cuda {
namespace {

// BnShape's channel runs: where channel c starts, its values per sample, value i's channel.
__device__ std::int64_t start(const BnShape& g, std::int64_t c) { return c * g.length / g.channels; }
__device__ std::int64_t positions(const BnShape& g, std::int64_t c) { return start(g, c + 1) - start(g, c); }
__device__ std::int64_t channel_of(const BnShape& g, std::int64_t i) { return ((i + 1) * g.channels - 1) / g.length; }

// The index of the j-th value of channel c: sample j / positions, its (j % positions)-th
// value of the channel's run.
__device__ std::int64_t value_index(const BnShape& g, std::int64_t c, std::int64_t per, std::int64_t j) {
  return (j / per) * g.stride + g.begin + start(g, c) + j % per;
}

// Sums `a` (and `b`) over the block's threads, in a fixed order; thread 0 gets the total.
__device__ void block_sum(double& a, double& b) {
  __shared__ double sa[threads], sb[threads];
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int width = threads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) {
      sa[threadIdx.x] += sa[threadIdx.x + width];
      sb[threadIdx.x] += sb[threadIdx.x + width];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();
}

__global__ void bn_stats_kernel(float* stats, const float* x, BnShape g) {
  const auto c = static_cast<std::int64_t>(blockIdx.x);
  const std::int64_t per = positions(g, c);
  const std::int64_t n = g.samples * per;
  double sum = 0.0, unused = 0.0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += x[value_index(g, c, per, j)];
  block_sum(sum, unused);
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double m2 = 0.0;
  unused = 0.0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const double d = x[value_index(g, c, per, j)] - mean;
    m2 += d * d;
  }
  block_sum(m2, unused);
  if (threadIdx.x == 0) {
    stats[c] = static_cast<float>(mean);
    stats[g.channels + c] = static_cast<float>(m2);
    if (c == 0) stats[2 * g.channels] = static_cast<float>(g.samples);
  }
}

__global__ void bn_merge_kernel(float* mean_invstd, const float* gathered, int members, BnShape g, double eps) {
  PARASIM_FOR_EACH(c, g.channels) {
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int r = 0; r < members; ++r) {
      const float* st = gathered + static_cast<std::int64_t>(r) * (2 * g.channels + 1);
      const double nb = static_cast<double>(st[2 * g.channels]) * static_cast<double>(positions(g, c));
      if (nb <= 0.0) continue;
      const double delta = static_cast<double>(st[c]) - mean;
      const double total = n + nb;
      mean += delta * nb / total;
      m2 += static_cast<double>(st[g.channels + c]) + delta * delta * n * nb / total;
      n = total;
    }
    const double var = n > 0.0 ? m2 / n : 0.0;
    mean_invstd[c] = static_cast<float>(mean);
    mean_invstd[g.channels + c] = static_cast<float>(1.0 / sqrt(var + eps));
  }
}

__global__ void bn_normalize_kernel(float* y, const float* x, const float* mean_invstd, const float* gamma,
                                    const float* beta, BnShape g) {
  PARASIM_FOR_EACH(v, g.samples * g.length) {
    const std::int64_t i = v % g.length;
    const std::int64_t at = (v / g.length) * g.stride + g.begin + i;
    const std::int64_t c = channel_of(g, i);
    const float xhat = (x[at] - mean_invstd[c]) * mean_invstd[g.channels + c];
    y[at] = gamma[c] * xhat + beta[c];
  }
}

__global__ void bn_backward_reduce_kernel(float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                                          const float* mean_invstd, BnShape g) {
  const auto c = static_cast<std::int64_t>(blockIdx.x);
  const std::int64_t per = positions(g, c);
  const std::int64_t n = g.samples * per;
  const double mean = mean_invstd[c];
  const double invstd = mean_invstd[g.channels + c];
  double sdy = 0.0, sdyx = 0.0;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const std::int64_t at = value_index(g, c, per, j);
    sdy += dy[at];
    sdyx += dy[at] * ((x[at] - mean) * invstd);
  }
  block_sum(sdy, sdyx);
  if (threadIdx.x == 0) {
    sums[c] = static_cast<float>(sdy);
    sums[g.channels + c] = static_cast<float>(sdyx);
    dbeta[c] += static_cast<float>(sdy);
    dgamma[c] += static_cast<float>(sdyx);
  }
}

__global__ void bn_backward_input_kernel(float* dx, const float* dy, const float* x, const float* mean_invstd,
                                         const float* gamma, const float* sums, double total_samples, BnShape g) {
  PARASIM_FOR_EACH(v, g.samples * g.length) {
    const std::int64_t i = v % g.length;
    const std::int64_t at = (v / g.length) * g.stride + g.begin + i;
    const std::int64_t c = channel_of(g, i);
    const double n = total_samples * static_cast<double>(positions(g, c));
    const double invstd = mean_invstd[g.channels + c];
    const double xhat = (static_cast<double>(x[at]) - mean_invstd[c]) * invstd;
    dx[at] = static_cast<float>(gamma[c] * invstd * (dy[at] - sums[c] / n - xhat * sums[g.channels + c] / n));
  }
}

unsigned channel_blocks(const BnShape& g) { return static_cast<unsigned>(g.channels); }

}  // namespace

void bn_stats(cudaStream_t s, float* stats, const float* x, const BnShape& g) {
  bn_stats_kernel<<<channel_blocks(g), threads, 0, s>>>(stats, x, g);
  check_launch("bn_stats");
}

void bn_merge(cudaStream_t s, float* mean_invstd, const float* gathered, int members, const BnShape& g, double eps) {
  bn_merge_kernel<<<blocks_for(g.channels), threads, 0, s>>>(mean_invstd, gathered, members, g, eps);
  check_launch("bn_merge");
}

void bn_normalize(cudaStream_t s, float* y, const float* x, const float* mean_invstd, const float* gamma,
                  const float* beta, const BnShape& g) {
  bn_normalize_kernel<<<blocks_for(g.samples * g.length), threads, 0, s>>>(y, x, mean_invstd, gamma, beta, g);
  check_launch("bn_normalize");
}

void bn_backward_reduce(cudaStream_t s, float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* mean_invstd, const BnShape& g) {
  bn_backward_reduce_kernel<<<channel_blocks(g), threads, 0, s>>>(sums, dgamma, dbeta, dy, x, mean_invstd, g);
  check_launch("bn_backward_reduce");
}

void bn_backward_input(cudaStream_t s, float* dx, const float* dy, const float* x, const float* mean_invstd,
                       const float* gamma, const float* sums, double total_samples, const BnShape& g) {
  bn_backward_input_kernel<<<blocks_for(g.samples * g.length), threads, 0, s>>>(dx, dy, x, mean_invstd, gamma, sums,
                                                                                total_samples, g);
  check_launch("bn_backward_input");
}

}  // namespace parasim::exec::cuda
