#include "exec/model/batch_norm.hpp"

#include <cmath>
#include <vector>

namespace parasim::exec::kernels {

namespace {

// Calls f(channel, first, last) for each channel's run of values in every sample, sample
// after sample: x[first, last) are the channel's values there.
template <class F>
void for_each_run(const BnShape& s, F&& f) {
  for (std::int64_t n = 0; n < s.samples; ++n) {
    const std::int64_t base = n * s.stride + s.begin;
    for (std::int64_t c = 0; c < s.channels; ++c) f(c, base + s.start(c), base + s.start(c + 1));
  }
}

}  // namespace

template <class T>
void bn_stats(T* stats, const T* x, const BnShape& s) {
  const auto c = static_cast<std::size_t>(s.channels);
  std::vector<double> sum(c, 0.0), m2(c, 0.0), mean(c, 0.0);
  for_each_run(s, [&](std::int64_t ch, std::int64_t a, std::int64_t b) {
    double acc = 0.0;
    for (std::int64_t i = a; i < b; ++i) acc += x[i];
    sum[static_cast<std::size_t>(ch)] += acc;
  });
  for (std::size_t ch = 0; ch < c; ++ch) {
    const double n = static_cast<double>(s.samples * s.positions(static_cast<std::int64_t>(ch)));
    mean[ch] = n > 0 ? sum[ch] / n : 0.0;
  }
  for_each_run(s, [&](std::int64_t ch, std::int64_t a, std::int64_t b) {
    const double m = mean[static_cast<std::size_t>(ch)];
    double acc = 0.0;
    for (std::int64_t i = a; i < b; ++i) acc += (x[i] - m) * (x[i] - m);
    m2[static_cast<std::size_t>(ch)] += acc;
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
  for_each_run(s, [&](std::int64_t ch, std::int64_t a, std::int64_t b) {
    const T mean = mean_invstd[ch], invstd = mean_invstd[c + ch], g = gamma[ch], sh = beta[ch];
    for (std::int64_t i = a; i < b; ++i) y[i] = g * ((x[i] - mean) * invstd) + sh;
  });
}

template <class T>
void bn_backward_reduce(T* sums, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean_invstd, const BnShape& s) {
  const auto c = static_cast<std::size_t>(s.channels);
  std::vector<double> sdy(c, 0.0), sdyx(c, 0.0);
  for_each_run(s, [&](std::int64_t ch, std::int64_t a, std::int64_t b) {
    const auto k = static_cast<std::size_t>(ch);
    const double mean = mean_invstd[k], invstd = mean_invstd[c + k];
    double s1 = 0.0, s2 = 0.0;
    for (std::int64_t i = a; i < b; ++i) {
      s1 += dy[i];
      s2 += dy[i] * ((static_cast<double>(x[i]) - mean) * invstd);
    }
    sdy[k] += s1;
    sdyx[k] += s2;
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
  for_each_run(s, [&](std::int64_t ch, std::int64_t a, std::int64_t b) {
    const double n = total_samples * static_cast<double>(s.positions(ch));
    const double mean = mean_invstd[ch], invstd = mean_invstd[c + ch];
    const double scale = gamma[ch] * invstd, mean_dy = sums[ch] / n, mean_dyx = sums[c + ch] / n;
    for (std::int64_t i = a; i < b; ++i) {
      const double xhat = (static_cast<double>(x[i]) - mean) * invstd;
      dx[i] = static_cast<T>(scale * (dy[i] - mean_dy - xhat * mean_dyx));
    }
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
