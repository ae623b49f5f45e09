#include "exec/model/kernels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#ifdef PARASIM_HAVE_CBLAS
#include <cblas.h>
#endif

namespace parasim::exec::kernels {

template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta, T* c) {
#ifdef PARASIM_HAVE_CBLAS
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  }
#else
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      T sum = 0;
      for (int p = 0; p < k; ++p) {
        const T av = trans_a ? a[static_cast<std::size_t>(p) * m + i] : a[static_cast<std::size_t>(i) * k + p];
        const T bv = trans_b ? b[static_cast<std::size_t>(j) * k + p] : b[static_cast<std::size_t>(p) * n + j];
        sum += av * bv;
      }
      T& out = c[static_cast<std::size_t>(i) * n + j];
      out = alpha * sum + (beta == T(0) ? T(0) : beta * out);
    }
  }
#endif
}

template <class T>
void linear_forward(T* out, const T* x, const T* w, const T* bias, int n, int c, int oc) {
  gemm<T>(false, false, n, oc, c, T(1), x, w, T(0), out);
  if (bias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    T* row = out + static_cast<std::size_t>(i) * oc;
    for (int j = 0; j < oc; ++j) row[j] += bias[j];
  }
}

template <class T>
void linear_backward(T* dx, T* dw, T* dbias, const T* dout, const T* x, const T* w, int n, int c, int oc) {
  if (dx != nullptr) gemm<T>(false, true, n, c, oc, T(1), dout, w, T(1), dx);
  gemm<T>(true, false, c, oc, n, T(1), x, dout, T(1), dw);
  if (dbias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    const T* row = dout + static_cast<std::size_t>(i) * oc;
    for (int j = 0; j < oc; ++j) dbias[j] += row[j];
  }
}

template <class T>
void layer_norm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const T* xi = x + static_cast<std::size_t>(i) * c;
    T m = 0;
    for (int j = 0; j < c; ++j) m += xi[j];
    m /= static_cast<T>(c);
    T var = 0;
    for (int j = 0; j < c; ++j) var += (xi[j] - m) * (xi[j] - m);
    var /= static_cast<T>(c);
    const T r = T(1) / std::sqrt(var + T(1e-5));
    T* yi = y + static_cast<std::size_t>(i) * c;
    for (int j = 0; j < c; ++j) yi[j] = (xi[j] - m) * r * gamma[j] + beta[j];
    mean[i] = m;
    rstd[i] = r;
  }
}

template <class T>
void layer_norm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                         const T* gamma, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const T* dyi = dy + static_cast<std::size_t>(i) * c;
    const T* xi = x + static_cast<std::size_t>(i) * c;
    T* dxi = dx + static_cast<std::size_t>(i) * c;
    // dnorm = dy * gamma; dx = rstd (dnorm - mean(dnorm) - norm mean(dnorm * norm)).
    T dnorm_mean = 0;
    T dnorm_norm_mean = 0;
    for (int j = 0; j < c; ++j) {
      const T norm = (xi[j] - mean[i]) * rstd[i];
      const T dnorm = dyi[j] * gamma[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
      dgamma[j] += dyi[j] * norm;
      dbeta[j] += dyi[j];
    }
    dnorm_mean /= static_cast<T>(c);
    dnorm_norm_mean /= static_cast<T>(c);
    for (int j = 0; j < c; ++j) {
      const T norm = (xi[j] - mean[i]) * rstd[i];
      const T dnorm = dyi[j] * gamma[j];
      dxi[j] += rstd[i] * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    }
  }
}

namespace {
template <class T>
constexpr T gelu_scale() {
  return static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
}

// tanh through exp(-2|u|): absolute error under 3e-7, which is what GELU's 1 + tanh needs.
// The float path is the executor's (libm's tanhf took a third of a CPU training step);
// double keeps std::tanh as the reference.
template <class T>
T gelu_tanh(T u) {
  if constexpr (std::is_same_v<T, float>) {
    const float a = std::fabs(u);
    const float e = fast_exp_nonpositive(-2.0F * (a < 20.0F ? a : 20.0F));  // tanh(20) is 1 in float
    return std::copysign((1.0F - e) / (1.0F + e), u);
  } else {
    return std::tanh(u);
  }
}
}  // namespace

template <class T>
void gelu_forward(T* y, const T* x, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const T v = x[i];
    y[i] = T(0.5) * v * (T(1) + gelu_tanh(gelu_scale<T>() * (v + T(0.044715) * v * v * v)));
  }
}

template <class T>
void gelu_backward(T* dx, const T* x, const T* dy, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const T v = x[i];
    const T u = gelu_scale<T>() * (v + T(0.044715) * v * v * v);
    const T th = gelu_tanh(u);
    const T sech2 = T(1) - th * th;
    const T du = gelu_scale<T>() * (T(1) + T(3) * T(0.044715) * v * v);
    dx[i] += dy[i] * (T(0.5) * (T(1) + th) + T(0.5) * v * sech2 * du);
  }
}

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int b, int t, int h, int d) {
  const int c = h * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < t; ++i) {
        const T* q = qkv + (static_cast<std::size_t>(bi) * t + i) * 3 * c + static_cast<std::size_t>(hi) * d;
        T* a = att + ((static_cast<std::size_t>(bi) * h + hi) * t + i) * t;
        T maxv = -std::numeric_limits<T>::infinity();
        for (int j = 0; j <= i; ++j) {
          const T* k = qkv + (static_cast<std::size_t>(bi) * t + j) * 3 * c + c + static_cast<std::size_t>(hi) * d;
          T s = 0;
          for (int e = 0; e < d; ++e) s += q[e] * k[e];
          a[j] = s * scale;
          maxv = std::max(maxv, a[j]);
        }
        T sum = 0;
        for (int j = 0; j <= i; ++j) {
          a[j] = std::exp(a[j] - maxv);
          sum += a[j];
        }
        for (int j = 0; j <= i; ++j) a[j] /= sum;
        for (int j = i + 1; j < t; ++j) a[j] = 0;
        T* o = out + (static_cast<std::size_t>(bi) * t + i) * c + static_cast<std::size_t>(hi) * d;
        std::fill(o, o + d, T(0));
        for (int j = 0; j <= i; ++j) {
          const T* v = qkv + (static_cast<std::size_t>(bi) * t + j) * 3 * c + 2 * c + static_cast<std::size_t>(hi) * d;
          for (int e = 0; e < d; ++e) o[e] += a[j] * v[e];
        }
      }
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int b, int t, int h, int d) {
  const int c = h * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  std::vector<T> datt(static_cast<std::size_t>(t));
  auto at = [&](const T* base, int bi, int pos, int part, int hi) {
    return base + (static_cast<std::size_t>(bi) * t + pos) * 3 * c + static_cast<std::size_t>(part) * c +
           static_cast<std::size_t>(hi) * d;
  };
  auto at_mut = [&](T* base, int bi, int pos, int part, int hi) {
    return base + (static_cast<std::size_t>(bi) * t + pos) * 3 * c + static_cast<std::size_t>(part) * c +
           static_cast<std::size_t>(hi) * d;
  };
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < t; ++i) {
        const T* a = att + ((static_cast<std::size_t>(bi) * h + hi) * t + i) * t;
        const T* dout_i = dout + (static_cast<std::size_t>(bi) * t + i) * c + static_cast<std::size_t>(hi) * d;
        // out_i = sum_j a_ij v_j: dv_j += a_ij dout_i, da_ij = dout_i . v_j
        for (int j = 0; j <= i; ++j) {
          const T* v = at(qkv, bi, j, 2, hi);
          T* dv = at_mut(dqkv, bi, j, 2, hi);
          T s = 0;
          for (int e = 0; e < d; ++e) {
            dv[e] += a[j] * dout_i[e];
            s += dout_i[e] * v[e];
          }
          datt[static_cast<std::size_t>(j)] = s;
        }
        // softmax: ds_ij = a_ij (da_ij - sum_k a_ik da_ik); s_ij = scale q_i . k_j
        T dot = 0;
        for (int j = 0; j <= i; ++j) dot += a[j] * datt[static_cast<std::size_t>(j)];
        const T* q = at(qkv, bi, i, 0, hi);
        T* dq = at_mut(dqkv, bi, i, 0, hi);
        for (int j = 0; j <= i; ++j) {
          const T ds = a[j] * (datt[static_cast<std::size_t>(j)] - dot) * scale;
          const T* k = at(qkv, bi, j, 1, hi);
          T* dk = at_mut(dqkv, bi, j, 1, hi);
          for (int e = 0; e < d; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
          }
        }
      }
    }
  }
}

template <class T>
void flash_attention_forward(T* out, T* lse, const T* qkv, int b, int t, int h, int d) {
  const int c = h * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  std::vector<T> acc(static_cast<std::size_t>(d));
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      for (int i = 0; i < t; ++i) {
        const T* q = qkv + (static_cast<std::size_t>(bi) * t + i) * 3 * c + static_cast<std::size_t>(hi) * d;
        T m = -std::numeric_limits<T>::infinity();
        T l = 0;
        std::fill(acc.begin(), acc.end(), T(0));
        for (int j = 0; j <= i; ++j) {
          const T* row = qkv + (static_cast<std::size_t>(bi) * t + j) * 3 * c + static_cast<std::size_t>(hi) * d;
          const T* k = row + c;
          const T* v = row + 2 * c;
          T s = 0;
          for (int e = 0; e < d; ++e) s += q[e] * k[e];
          s *= scale;
          const T m_new = std::max(m, s);
          const T correction = std::exp(m - m_new);
          const T p = std::exp(s - m_new);
          l = l * correction + p;
          for (int e = 0; e < d; ++e) acc[static_cast<std::size_t>(e)] = acc[static_cast<std::size_t>(e)] * correction + p * v[e];
          m = m_new;
        }
        T* o = out + (static_cast<std::size_t>(bi) * t + i) * c + static_cast<std::size_t>(hi) * d;
        for (int e = 0; e < d; ++e) o[e] = acc[static_cast<std::size_t>(e)] / l;
        lse[(static_cast<std::size_t>(bi) * h + hi) * t + i] = m + std::log(l);
      }
    }
  }
}

template <class T>
void flash_attention_backward(T* dqkv, const T* dout, const T* out, const T* qkv, const T* lse, int b, int t, int h,
                              int d) {
  const int c = h * d;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  auto row = [&](const T* base, int bi, int pos, int part, int hi) {
    return base + (static_cast<std::size_t>(bi) * t + pos) * 3 * c + static_cast<std::size_t>(part) * c +
           static_cast<std::size_t>(hi) * d;
  };
  auto orow = [&](const T* base, int bi, int pos, int hi) {
    return base + (static_cast<std::size_t>(bi) * t + pos) * c + static_cast<std::size_t>(hi) * d;
  };
  auto grad = [&](int bi, int pos, int part, int hi) {
    return dqkv + (static_cast<std::size_t>(bi) * t + pos) * 3 * c + static_cast<std::size_t>(part) * c +
           static_cast<std::size_t>(hi) * d;
  };
  auto dot = [d](const T* x, const T* y) {
    T s = 0;
    for (int e = 0; e < d; ++e) s += x[e] * y[e];
    return s;
  };
  std::vector<T> delta(static_cast<std::size_t>(t));  // D_i = dO_i . O_i
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      const T* l = lse + (static_cast<std::size_t>(bi) * h + hi) * t;
      for (int i = 0; i < t; ++i) delta[static_cast<std::size_t>(i)] = dot(orow(dout, bi, i, hi), orow(out, bi, i, hi));
      // p_ij = exp(scale q_i . k_j - lse_i); ds_ij = p_ij (dO_i . v_j - D_i)
      auto p_ds = [&](int i, int j, T& p, T& ds) {
        p = std::exp(scale * dot(row(qkv, bi, i, 0, hi), row(qkv, bi, j, 1, hi)) - l[i]);
        ds = p * (dot(orow(dout, bi, i, hi), row(qkv, bi, j, 2, hi)) - delta[static_cast<std::size_t>(i)]);
      };
      for (int i = 0; i < t; ++i) {  // dq_i = scale sum_{j <= i} ds_ij k_j
        T* dq = grad(bi, i, 0, hi);
        std::fill(dq, dq + d, T(0));
        for (int j = 0; j <= i; ++j) {
          T p = 0, ds = 0;
          p_ds(i, j, p, ds);
          const T* k = row(qkv, bi, j, 1, hi);
          for (int e = 0; e < d; ++e) dq[e] += scale * ds * k[e];
        }
      }
      for (int j = 0; j < t; ++j) {  // dk_j = scale sum_{i >= j} ds_ij q_i; dv_j = sum_{i >= j} p_ij dO_i
        T* dk = grad(bi, j, 1, hi);
        T* dv = grad(bi, j, 2, hi);
        std::fill(dk, dk + d, T(0));
        std::fill(dv, dv + d, T(0));
        for (int i = j; i < t; ++i) {
          T p = 0, ds = 0;
          p_ds(i, j, p, ds);
          const T* q = row(qkv, bi, i, 0, hi);
          const T* go = orow(dout, bi, i, hi);
          for (int e = 0; e < d; ++e) {
            dk[e] += scale * ds * q[e];
            dv[e] += p * go[e];
          }
        }
      }
    }
  }
}

template <class T>
void embedding_forward(T* x, const std::int32_t* tokens, const T* wte, const T* wpe, int b, int t, int c) {
  for (int bi = 0; bi < b; ++bi) {
    for (int i = 0; i < t; ++i) {
      const std::size_t row = static_cast<std::size_t>(bi) * t + i;
      const T* te = wte + static_cast<std::size_t>(tokens[row]) * c;
      const T* pe = wpe + static_cast<std::size_t>(i) * c;
      for (int j = 0; j < c; ++j) x[row * c + j] = te[j] + pe[j];
    }
  }
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dx, const std::int32_t* tokens, int b, int t, int c) {
  for (int bi = 0; bi < b; ++bi) {
    for (int i = 0; i < t; ++i) {
      const std::size_t row = static_cast<std::size_t>(bi) * t + i;
      T* te = dwte + static_cast<std::size_t>(tokens[row]) * c;
      T* pe = dwpe + static_cast<std::size_t>(i) * c;
      for (int j = 0; j < c; ++j) {
        te[j] += dx[row * c + j];
        pe[j] += dx[row * c + j];
      }
    }
  }
}

template <class T>
T cross_entropy(T* dlogits, const T* logits, const std::int32_t* targets, int n, int v) {
  T loss = 0;
  for (int i = 0; i < n; ++i) {
    const T* l = logits + static_cast<std::size_t>(i) * v;
    T* dl = dlogits + static_cast<std::size_t>(i) * v;
    const T maxv = *std::max_element(l, l + v);
    T sum = 0;
    for (int j = 0; j < v; ++j) sum += std::exp(l[j] - maxv);
    const int target = targets[i];
    if (target < 0 || target >= v) throw std::out_of_range("cross_entropy: target outside the vocabulary");
    loss += std::log(sum) - (l[target] - maxv);
    for (int j = 0; j < v; ++j) dl[j] = std::exp(l[j] - maxv) / sum / static_cast<T>(n);
    dl[target] -= T(1) / static_cast<T>(n);
  }
  return loss / static_cast<T>(n);
}

template <class T>
void adamw(T* param, const T* grad, T* m, T* v, std::int64_t count, const AdamW& h, int step) {
  const double c1 = 1.0 - std::pow(h.beta1, step);
  const double c2 = 1.0 - std::pow(h.beta2, step);
  for (std::int64_t i = 0; i < count; ++i) {
    const double g = grad[i];
    const double mi = h.beta1 * m[i] + (1.0 - h.beta1) * g;
    const double vi = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    const double update = (mi / c1) / (std::sqrt(vi / c2) + h.eps) + h.weight_decay * param[i];
    param[i] = static_cast<T>(param[i] - h.lr * update);
  }
}

// --- generic layers ------------------------------------------------------------------------

namespace {
// The stretches of nx values over ny: value j covers [begin(j), begin(j + 1)) with
// begin(j) = ceil(j·ny / nx), the i with floor(i·nx / ny) = j. Walked in order with
// j·ny = q·nx + r kept exact, so no size overflows and no division per value.
struct Stretches {
  std::int64_t nx, ny, q = 0, r = 0, step_q, step_r;
  Stretches(std::int64_t from, std::int64_t to) : nx(from), ny(to), step_q(to / from), step_r(to % from) {}
  [[nodiscard]] std::int64_t begin() const { return q + (r > 0 ? 1 : 0); }
  void next() {
    q += step_q;
    r += step_r;
    if (r >= nx) {
      r -= nx;
      ++q;
    }
  }
};
}  // namespace

// The source index of each of ny targets, floor(i·nx / ny), walked in order with
// i·nx = j·ny + r kept exact: for sampling (ny <= nx), where every run has at most one
// value and walking the targets is the shorter loop.
struct Samples {
  std::int64_t ny, j = 0, r = 0, step_j, step_r;
  Samples(std::int64_t from, std::int64_t to) : ny(to), step_j(from / to), step_r(from % to) {}
  void next() {
    j += step_j;
    r += step_r;
    if (r >= ny) {
      r -= ny;
      ++j;
    }
  }
};

// Calls f(j, begin, end) for each of nx values and its stretch [begin, end) of ny.
template <class F>
void for_each_stretch(std::int64_t nx, std::int64_t ny, F&& f) {
  Stretches s(nx, ny);
  std::int64_t b = 0;
  for (std::int64_t j = 0; j < nx; ++j) {
    s.next();
    const std::int64_t e = s.begin();
    f(j, b, e);
    b = e;
  }
}

template <class T>
void resample_forward(T* y, std::int64_t ny, const T* x, std::int64_t nx, bool relu) {
  if (ny <= nx) {
    Samples s(nx, ny);
    for (std::int64_t i = 0; i < ny; ++i, s.next()) y[i] = relu ? std::max(x[s.j], T(0)) : x[s.j];
    return;
  }
  for_each_stretch(nx, ny, [&](std::int64_t j, std::int64_t b, std::int64_t e) {
    std::fill(y + b, y + e, relu ? std::max(x[j], T(0)) : x[j]);  // a max, not a branch on the sign
  });
}

template <class T>
void resample_backward(T* dx, std::int64_t nx, const T* dy, std::int64_t ny, const T* relu_input) {
  auto masked = [&](std::int64_t j, T g) { return relu_input != nullptr ? g * static_cast<T>(relu_input[j] > T(0)) : g; };
  if (ny <= nx) {
    // Each value was sampled at most once: its gradient is that sample's, or 0.
    std::fill(dx, dx + nx, T(0));
    Samples s(nx, ny);
    for (std::int64_t i = 0; i < ny; ++i, s.next()) dx[s.j] = masked(s.j, dy[i]);
    return;
  }
  for_each_stretch(nx, ny, [&](std::int64_t j, std::int64_t b, std::int64_t e) {
    T sum = 0;
    for (std::int64_t i = b; i < e; ++i) sum += dy[i];
    dx[j] = masked(j, sum);
  });
}

template <class T>
void moe_permute(T* y, const T* x, const T* pos, const T* scale, int n, int k, int c) {
  const auto C = static_cast<std::size_t>(c);
  for (std::int64_t q = 0; q < static_cast<std::int64_t>(n) * k; ++q) {
    T* dst = y + static_cast<std::size_t>(pos[q]) * C;
    const T* src = x + static_cast<std::size_t>(q / k) * C;
    const T f = scale != nullptr ? scale[q] : T(1);
    for (std::size_t j = 0; j < C; ++j) dst[j] = f * src[j];
  }
}

template <class T>
void moe_unpermute(T* y, const T* x, const T* pos, const T* scale, int n, int k, int c, bool accumulate) {
  const auto C = static_cast<std::size_t>(c);
  for (std::int64_t i = 0; i < n; ++i) {
    T* dst = y + static_cast<std::size_t>(i) * C;
    if (!accumulate) std::fill(dst, dst + C, T(0));
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t q = i * k + j;
      const T* src = x + static_cast<std::size_t>(pos[q]) * C;
      const T f = scale != nullptr ? scale[q] : T(1);
      for (std::size_t m = 0; m < C; ++m) dst[m] += f * src[m];
    }
  }
}

template <class T>
void add_cyclic(T* y, std::int64_t count, const T* bias, std::int64_t nb) {
  if (nb <= 0) return;
  for (std::int64_t at = 0; at < count; at += nb) {
    const std::int64_t n = std::min(nb, count - at);
    for (std::int64_t j = 0; j < n; ++j) y[at + j] += bias[j];
  }
}

template <class T>
void cyclic_backward(T* dbias, std::int64_t nb, const T* dy, std::int64_t count) {
  if (nb <= 0) return;
  for (std::int64_t at = 0; at < count; at += nb) {
    const std::int64_t n = std::min(nb, count - at);
    for (std::int64_t j = 0; j < n; ++j) dbias[j] += dy[at + j];
  }
}

#define PARASIM_KERNELS(T)                                                                                        \
  template void gemm<T>(bool, bool, int, int, int, T, const T*, const T*, T, T*);                               \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int);                             \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);                    \
  template void layer_norm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int);                      \
  template void layer_norm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int, int); \
  template void gelu_forward<T>(T*, const T*, std::int64_t);                                                    \
  template void gelu_backward<T>(T*, const T*, const T*, std::int64_t);                                         \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int);                                     \
  template void flash_attention_forward<T>(T*, T*, const T*, int, int, int, int);                               \
  template void flash_attention_backward<T>(T*, const T*, const T*, const T*, const T*, int, int, int, int);    \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int, int, int, int);                    \
  template void embedding_forward<T>(T*, const std::int32_t*, const T*, const T*, int, int, int);               \
  template void embedding_backward<T>(T*, T*, const T*, const std::int32_t*, int, int, int);                    \
  template T cross_entropy<T>(T*, const T*, const std::int32_t*, int, int);                                     \
  template void adamw<T>(T*, const T*, T*, T*, std::int64_t, const AdamW&, int);                               \
  template void resample_forward<T>(T*, std::int64_t, const T*, std::int64_t, bool);                            \
  template void resample_backward<T>(T*, std::int64_t, const T*, std::int64_t, const T*);                       \
  template void add_cyclic<T>(T*, std::int64_t, const T*, std::int64_t);                                        \
  template void moe_permute<T>(T*, const T*, const T*, const T*, int, int, int);                                 \
  template void moe_unpermute<T>(T*, const T*, const T*, const T*, int, int, int, bool);                         \
  template void cyclic_backward<T>(T*, std::int64_t, const T*, std::int64_t);

PARASIM_KERNELS(float)
PARASIM_KERNELS(double)

}  // namespace parasim::exec::kernels
