#include "exec/model/batch_norm.hpp"

#include <cmath>
#include <vector>

namespace parasim::exec::kernels {

namespace {

// Calls f(channel, index) for every value of the stretch, sample after sample.
template <class F>
void for_each_value(const BnShape& s, F&& f) {
  for (std::int64_t n = 0; n < s.samples; ++n) {
    const std::int64_t base = n * s.stride + s.begin;
    for (std::int64_t c = 0; c < s.channels; ++c) {
      for (std::int64_t i = s.start(c); i < s.start(c + 1); ++i) f(c, base + i);
    }
  }
}

}  // namespace

template <class T>
void bn_stats(T* stats, const T* x, const BnShape& s) {
  const auto c = static_cast<std::size_t>(s.channels);
  std::vector<double> sum(c, 0.0), m2(c, 0.0);
  for_each_value(s, [&](std::int64_t ch, std::int64_t i) { sum[static_cast<std::size_t>(ch)] += x[i]; });
  std::vector<double> mean(c, 0.0);
  for (std::size_t ch = 0; ch < c; ++ch) {
    const double n = static_cast<double>(s.samples * s.positions(static_cast<std::int64_t>(ch)));
    mean[ch] = n > 0 ? sum[ch] / n : 0.0;
  }
  for_each_value(s, [&](std::int64_t ch, std::int64_t i) {
    const double d = x[i] - mean[static_cast<std::size_t>(ch)];
    m2[static_cast<std::size_t>(ch)] += d * d;
  });
  for (std::size_t ch = 0; ch < c; ++ch) {
    stats[ch] = static_cast<T>(mean[ch]);
    stats[c + ch] = static_cast<T>(m2[ch]);
  }
  stats[2 * c] = static_cast<T>(s.samples);
}

template <class T>
void bn_merge(T* mean_invstd, const T* gathered, int members, const BnShape& s) {
  const std::int64_t c = s.channels;
  for (std::int64_t ch = 0; ch < c; ++ch) {
    // Chan et al.'s pairwise merge, member after member.
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int r = 0; r < members; ++r) {
      const T* st = gathered + static_cast<std::int64_t>(r) * s.stats_size();
      const double nb = static_cast<double>(st[2 * c]) * static_cast<double>(s.positions(ch));
      if (nb <= 0.0) continue;
      const double delta = static_cast<double>(st[ch]) - mean;
      const double total = n + nb;
      mean += delta * nb / total;
      m2 += static_cast<double>(st[c + ch]) + delta * delta * n * nb / total;
      n = total;
    }
    const double var = n > 0.0 ? m2 / n : 0.0;
    mean_invstd[ch] = static_cast<T>(mean);
    mean_invstd[c + ch] = static_cast<T>(1.0 / std::sqrt(var + batch_norm_eps));
  }
}

template <class T>
void bn_normalize(T* y, const T* x, const T* mean_invstd, const T* gamma, const T* beta, const BnShape& s) {
  const std::int64_t c = s.channels;
  for_each_value(s, [&](std::int64_t ch, std::int64_t i) {
    const T xhat = (x[i] - mean_invstd[ch]) * mean_invstd[c + ch];
    y[i] = gamma[ch] * xhat + beta[ch];
  });
}

template <class T>
void bn_backward_reduce(T* sums, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean_invstd, const BnShape& s) {
  const auto c = static_cast<std::size_t>(s.channels);
  std::vector<double> sdy(c, 0.0), sdyx(c, 0.0);
  for_each_value(s, [&](std::int64_t ch, std::int64_t i) {
    const auto k = static_cast<std::size_t>(ch);
    const double xhat = (static_cast<double>(x[i]) - mean_invstd[k]) * static_cast<double>(mean_invstd[c + k]);
    sdy[k] += dy[i];
    sdyx[k] += dy[i] * xhat;
  });
  for (std::size_t k = 0; k < c; ++k) {
    sums[k] = static_cast<T>(sdy[k]);
    sums[c + k] = static_cast<T>(sdyx[k]);
    dbeta[k] += static_cast<T>(sdy[k]);
    dgamma[k] += static_cast<T>(sdyx[k]);
  }
}

template <class T>
void bn_backward_input(T* dx, const T* dy, const T* x, const T* mean_invstd, const T* gamma, const T* sums,
                       double total_samples, const BnShape& s) {
  const std::int64_t c = s.channels;
  for_each_value(s, [&](std::int64_t ch, std::int64_t i) {
    const double n = total_samples * static_cast<double>(s.positions(ch));
    const double invstd = mean_invstd[c + ch];
    const double xhat = (static_cast<double>(x[i]) - mean_invstd[ch]) * invstd;
    dx[i] = static_cast<T>(gamma[ch] * invstd * (dy[i] - sums[ch] / n - xhat * sums[c + ch] / n));
  });
}

#define PARASIM_BATCH_NORM(T)                                                                                \
  template void bn_stats<T>(T*, const T*, const BnShape&);                                                   \
  template void bn_merge<T>(T*, const T*, int, const BnShape&);                                              \
  template void bn_normalize<T>(T*, const T*, const T*, const T*, const T*, const BnShape&);                 \
  template void bn_backward_reduce<T>(T*, T*, T*, const T*, const T*, const T*, const BnShape&);             \
  template void bn_backward_input<T>(T*, const T*, const T*, const T*, const T*, const T*, double, const BnShape&);
PARASIM_BATCH_NORM(float)
PARASIM_BATCH_NORM(double)
#undef PARASIM_BATCH_NORM

}  // namespace parasim::exec::kernels
