#include "exec/model/ring_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasim::exec::ring {

std::vector<int> positions(int t, int cp, int index) {
  const int chunk = t / (2 * cp);
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(2 * chunk));
  for (int c : {index, 2 * cp - 1 - index}) {
    for (int i = 0; i < chunk; ++i) out.push_back(c * chunk + i);
  }
  return out;
}

template <class T>
void kv_pack(T* kv, const T* qkv, std::int64_t rows, int c) {
  for (std::int64_t r = 0; r < rows; ++r) std::copy_n(qkv + r * 3 * c + c, 2 * c, kv + r * 2 * c);
}

template <class T>
void kv_unpack_add(T* dqkv, const T* dkv, std::int64_t rows, int c) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* to = dqkv + r * 3 * c + c;
    const T* from = dkv + r * 2 * c;
    for (int i = 0; i < 2 * c; ++i) to[i] += from[i];
  }
}

template <class T>
void forward_begin(T* acc, T* m, T* l, int b, int tq, int h, int d) {
  const auto rows = static_cast<std::size_t>(b) * h * tq;
  std::fill_n(acc, rows * static_cast<std::size_t>(d), T(0));
  std::fill_n(m, rows, -std::numeric_limits<T>::infinity());
  std::fill_n(l, rows, T(0));
}

template <class T>
void forward_block(T* acc, T* m, T* l, const T* qkv, const T* kv, std::span<const int> qpos, std::span<const int> kpos,
                   int b, int h, int d) {
  const int c = h * d;
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < tq; ++i) {
        const T* q = qkv + (static_cast<std::size_t>(bi) * tq + i) * 3 * c + static_cast<std::size_t>(hi) * d;
        T* a = acc + (static_cast<std::size_t>(bi) * tq + i) * c + static_cast<std::size_t>(hi) * d;
        const std::size_t row = (static_cast<std::size_t>(bi) * h + hi) * tq + i;
        T mi = m[row];
        T li = l[row];
        for (int j = 0; j < tk; ++j) {
          if (kpos[static_cast<std::size_t>(j)] > qpos[static_cast<std::size_t>(i)]) continue;
          const T* k = kv + (static_cast<std::size_t>(bi) * tk + j) * 2 * c + static_cast<std::size_t>(hi) * d;
          const T* v = k + c;
          T s = 0;
          for (int e = 0; e < d; ++e) s += q[e] * k[e];
          s *= scale;
          const T m_new = std::max(mi, s);
          const T correction = std::exp(mi - m_new);
          const T p = std::exp(s - m_new);
          li = li * correction + p;
          for (int e = 0; e < d; ++e) a[e] = a[e] * correction + p * v[e];
          mi = m_new;
        }
        m[row] = mi;
        l[row] = li;
      }
    }
  }
}

template <class T>
void forward_end(T* out, T* lse, const T* acc, const T* m, const T* l, int b, int tq, int h, int d) {
  const int c = h * d;
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < tq; ++i) {
        const std::size_t row = (static_cast<std::size_t>(bi) * h + hi) * tq + i;
        const std::size_t at = (static_cast<std::size_t>(bi) * tq + i) * c + static_cast<std::size_t>(hi) * d;
        for (int e = 0; e < d; ++e)
          out[at + static_cast<std::size_t>(e)] = acc[at + static_cast<std::size_t>(e)] / l[row];
        lse[row] = m[row] + std::log(l[row]);
      }
    }
  }
}

template <class T>
void backward_block(T* dqkv, T* dkv, const T* dout, const T* out, const T* qkv, const T* kv, const T* lse,
                    std::span<const int> qpos, std::span<const int> kpos, int b, int h, int d) {
  const int c = h * d;
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  auto dot = [d](const T* x, const T* y) {
    T s = 0;
    for (int e = 0; e < d; ++e) s += x[e] * y[e];
    return s;
  };
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < tq; ++i) {
        const std::size_t at = (static_cast<std::size_t>(bi) * tq + i) * c + static_cast<std::size_t>(hi) * d;
        const T* q = qkv + (static_cast<std::size_t>(bi) * tq + i) * 3 * c + static_cast<std::size_t>(hi) * d;
        T* dq = dqkv + (static_cast<std::size_t>(bi) * tq + i) * 3 * c + static_cast<std::size_t>(hi) * d;
        const T* go = dout + at;
        const T delta = dot(go, out + at);  // D_i = dO_i . O_i
        const T li = lse[(static_cast<std::size_t>(bi) * h + hi) * tq + i];
        for (int j = 0; j < tk; ++j) {
          if (kpos[static_cast<std::size_t>(j)] > qpos[static_cast<std::size_t>(i)]) continue;
          const std::size_t kat = (static_cast<std::size_t>(bi) * tk + j) * 2 * c + static_cast<std::size_t>(hi) * d;
          const T* k = kv + kat;
          const T* v = k + c;
          T* dk = dkv + kat;
          T* dv = dk + c;
          // p_ij = exp(scale q_i . k_j - lse_i); ds_ij = p_ij (dO_i . v_j - D_i)
          const T p = std::exp(scale * dot(q, k) - li);
          const T ds = p * (dot(go, v) - delta);
          for (int e = 0; e < d; ++e) {
            dq[e] += scale * ds * k[e];
            dk[e] += scale * ds * q[e];
            dv[e] += p * go[e];
          }
        }
      }
    }
  }
}

#define PARASIM_RING(T)                                                                                                \
  template void kv_pack<T>(T*, const T*, std::int64_t, int);                                                           \
  template void kv_unpack_add<T>(T*, const T*, std::int64_t, int);                                                     \
  template void forward_begin<T>(T*, T*, T*, int, int, int, int);                                                      \
  template void forward_block<T>(T*, T*, T*, const T*, const T*, std::span<const int>, std::span<const int>, int, int, \
                                 int);                                                                                 \
  template void forward_end<T>(T*, T*, const T*, const T*, const T*, int, int, int, int);                              \
  template void backward_block<T>(T*, T*, const T*, const T*, const T*, const T*, const T*, std::span<const int>,      \
                                  std::span<const int>, int, int, int);

PARASIM_RING(float)
PARASIM_RING(double)

}  // namespace parasim::exec::ring
