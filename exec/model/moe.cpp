#include "exec/model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "exec/model/kernels.hpp"

namespace parasim::exec::moe {
namespace k = kernels;

template <class T>
void route(int* expert, T* gate, const T* logits, int n, int experts, int top) {
  std::vector<int> order(static_cast<std::size_t>(experts));
  for (int i = 0; i < n; ++i) {
    const T* z = logits + static_cast<std::size_t>(i) * experts;
    std::iota(order.begin(), order.end(), 0);
    // Descending logit, ties to the lower index: a total order, so every rank agrees.
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [z](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    int* e = expert + static_cast<std::size_t>(i) * top;
    T* g = gate + static_cast<std::size_t>(i) * top;
    const T m = z[order[0]];
    T sum = T(0);
    for (int j = 0; j < top; ++j) {
      e[j] = order[static_cast<std::size_t>(j)];
      g[j] = std::exp(z[e[j]] - m);
      sum += g[j];
    }
    for (int j = 0; j < top; ++j) g[j] /= sum;
  }
}

template <class T>
void route_backward(T* dlogits, const int* expert, const T* gate, const T* dgate, int n, int experts, int top) {
  std::fill(dlogits, dlogits + static_cast<std::size_t>(n) * experts, T(0));
  for (int i = 0; i < n; ++i) {
    const int* e = expert + static_cast<std::size_t>(i) * top;
    const T* g = gate + static_cast<std::size_t>(i) * top;
    const T* dg = dgate + static_cast<std::size_t>(i) * top;
    T dot = T(0);
    for (int j = 0; j < top; ++j) dot += g[j] * dg[j];
    for (int j = 0; j < top; ++j) dlogits[static_cast<std::size_t>(i) * experts + e[j]] = g[j] * (dg[j] - dot);
  }
}

template <class T>
void forward(T* y, Saved<T>& s, const T* x, const T* router, const std::vector<Expert<T>>& experts, int n, int c, int f,
             int top) {
  const int E = static_cast<int>(experts.size());
  const auto N = static_cast<std::size_t>(n);
  const auto C = static_cast<std::size_t>(c);
  const auto F = static_cast<std::size_t>(f);
  s.logits.assign(N * static_cast<std::size_t>(E), T(0));
  k::gemm<T>(false, false, n, E, c, T(1), x, router, T(0), s.logits.data());
  s.expert.assign(N * static_cast<std::size_t>(top), 0);
  s.gate.assign(s.expert.size(), T(0));
  route(s.expert.data(), s.gate.data(), s.logits.data(), n, E, top);
  s.rows.assign(static_cast<std::size_t>(E), {});
  for (std::size_t r = 0; r < s.expert.size(); ++r)
    s.rows[static_cast<std::size_t>(s.expert[r])].push_back(static_cast<int>(r));
  s.in.assign(static_cast<std::size_t>(E), {});
  s.pre = s.act = s.out = s.in;
  std::fill(y, y + N * C, T(0));
  for (std::size_t e = 0; e < static_cast<std::size_t>(E); ++e) {
    const std::vector<int>& rows = s.rows[e];
    const int m = static_cast<int>(rows.size());
    if (m == 0) continue;
    const auto M = static_cast<std::size_t>(m);
    s.in[e].resize(M * C);
    for (std::size_t r = 0; r < M; ++r) {
      const T* src = x + static_cast<std::size_t>(rows[r] / top) * C;
      std::copy(src, src + C, s.in[e].data() + r * C);
    }
    s.pre[e].resize(M * F);
    s.act[e].resize(M * F);
    s.out[e].resize(M * C);
    k::linear_forward(s.pre[e].data(), s.in[e].data(), experts[e].fcw, experts[e].fcb, m, c, f);
    k::gelu_forward(s.act[e].data(), s.pre[e].data(), static_cast<std::int64_t>(M * F));
    k::linear_forward(s.out[e].data(), s.act[e].data(), experts[e].projw, experts[e].projb, m, f, c);
    for (std::size_t r = 0; r < M; ++r) {
      const T g = s.gate[static_cast<std::size_t>(rows[r])];
      T* dst = y + static_cast<std::size_t>(rows[r] / top) * C;
      const T* o = s.out[e].data() + r * C;
      for (std::size_t j = 0; j < C; ++j) dst[j] += g * o[j];
    }
  }
}

template <class T>
void backward(T* dx, T* drouter, const std::vector<ExpertGrads<T>>& grads, const T* dy, const Saved<T>& s, const T* x,
              const T* router, const std::vector<Expert<T>>& experts, int n, int c, int f, int top) {
  const int E = static_cast<int>(experts.size());
  const auto N = static_cast<std::size_t>(n);
  const auto C = static_cast<std::size_t>(c);
  const auto F = static_cast<std::size_t>(f);
  std::vector<T> dgate(s.gate.size(), T(0));
  std::vector<T> dout, dact, dpre, din;
  for (std::size_t e = 0; e < static_cast<std::size_t>(E); ++e) {
    const std::vector<int>& rows = s.rows[e];
    const int m = static_cast<int>(rows.size());
    if (m == 0) continue;
    const auto M = static_cast<std::size_t>(m);
    dout.assign(M * C, T(0));
    for (std::size_t r = 0; r < M; ++r) {
      const auto copy = static_cast<std::size_t>(rows[r]);
      const T* d = dy + (copy / static_cast<std::size_t>(top)) * C;
      const T* o = s.out[e].data() + r * C;
      T dot = T(0);
      for (std::size_t j = 0; j < C; ++j) {
        dout[r * C + j] = s.gate[copy] * d[j];
        dot += d[j] * o[j];
      }
      dgate[copy] = dot;
    }
    dact.assign(M * F, T(0));
    dpre.assign(M * F, T(0));
    din.assign(M * C, T(0));
    k::linear_backward(dact.data(), grads[e].projw, grads[e].projb, dout.data(), s.act[e].data(), experts[e].projw, m,
                       f, c);
    k::gelu_backward(dpre.data(), s.pre[e].data(), dact.data(), static_cast<std::int64_t>(M * F));
    k::linear_backward(din.data(), grads[e].fcw, grads[e].fcb, dpre.data(), s.in[e].data(), experts[e].fcw, m, c, f);
    for (std::size_t r = 0; r < M; ++r) {
      T* dst = dx + static_cast<std::size_t>(rows[r] / top) * C;
      for (std::size_t j = 0; j < C; ++j) dst[j] += din[r * C + j];
    }
  }
  std::vector<T> dlogits(N * static_cast<std::size_t>(E));
  route_backward(dlogits.data(), s.expert.data(), s.gate.data(), dgate.data(), n, E, top);
  k::gemm<T>(false, true, n, c, E, T(1), dlogits.data(), router, T(1), dx);
  k::gemm<T>(true, false, c, E, n, T(1), x, dlogits.data(), T(1), drouter);
}

#define PARASIM_MOE(T)                                                                                                 \
  template void route<T>(int*, T*, const T*, int, int, int);                                                           \
  template void route_backward<T>(T*, const int*, const T*, const T*, int, int, int);                                  \
  template void forward<T>(T*, Saved<T>&, const T*, const T*, const std::vector<Expert<T>>&, int, int, int, int);      \
  template void backward<T>(T*, T*, const std::vector<ExpertGrads<T>>&, const T*, const Saved<T>&, const T*, const T*, \
                            const std::vector<Expert<T>>&, int, int, int, int);
PARASIM_MOE(float)
PARASIM_MOE(double)
#undef PARASIM_MOE

}  // namespace parasim::exec::moe
