// FlashAttention and ring attention on the host, in tiles on BLAS: for each sequence and
// head, a tile of queries against a tile of keys at a time (S = Q Kᵀ as a GEMM, the
// online softmax over S's rows, the output += P V as a GEMM), the algorithm of
// exec/model/kernels.hpp's flash_attention_* and exec/model/ring_attention.hpp (their
// reference, which the tests hold these to) at GEMM speed. Tiles all of whose keys come
// after all of their queries are skipped (causal).
#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/ring_attention.hpp"

namespace parasim::exec {

namespace {

constexpr int tile = 128;

// Rows of one head: element (i, e) at base[i * ld + e].
struct Rows {
  const float* base;
  int ld;
  [[nodiscard]] const float* row(int i) const { return base + static_cast<std::size_t>(i) * ld; }
};
struct MutableRows {
  float* base;
  int ld;
};

// Calls f(q0, nq, k0, nk) for each tile of up to `tile` queries and keys, skipping those
// whose first key comes after their last query (nothing of them is attended).
template <class F>
void for_each_tile(std::span<const int> qpos, std::span<const int> kpos, F f) {
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  for (int q0 = 0; q0 < tq; q0 += tile) {
    const int nq = std::min(tile, tq - q0);
    const int last = *std::max_element(qpos.begin() + q0, qpos.begin() + q0 + nq);
    for (int k0 = 0; k0 < tk; k0 += tile) {
      const int nk = std::min(tile, tk - k0);
      if (*std::min_element(kpos.begin() + k0, kpos.begin() + k0 + nk) <= last) f(q0, nq, k0, nk);
    }
  }
}

// One head of one sequence: queries q (qpos) against keys k and values v (kpos), merged
// into the running output acc (rows of d, stride ldacc) and each row's maximum m and sum l.
void forward_head(Rows q, Rows k, Rows v, MutableRows acc, float* m, float* l, std::span<const int> qpos,
                  std::span<const int> kpos, int d, std::vector<float>& s) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  s.resize(static_cast<std::size_t>(tile) * tile);
  for_each_tile(qpos, kpos, [&](int q0, int nq, int k0, int nk) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, d, scale, q.row(q0), q.ld, k.row(k0), k.ld, 0.0F,
                s.data(), nk);
    for (int i = 0; i < nq; ++i) {
      float* row = s.data() + static_cast<std::size_t>(i) * nk;
      const int at = qpos[static_cast<std::size_t>(q0 + i)];
      float top = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < nk; ++j) {
        if (kpos[static_cast<std::size_t>(k0 + j)] > at) row[j] = -std::numeric_limits<float>::infinity();
        top = std::max(top, row[j]);
      }
      const auto r = static_cast<std::size_t>(q0 + i);
      if (top == -std::numeric_limits<float>::infinity()) {  // no key of this tile for this row
        std::fill(row, row + nk, 0.0F);
        continue;
      }
      const float m_new = std::max(m[r], top);
      const float correction = m[r] == -std::numeric_limits<float>::infinity() ? 0.0F : std::exp(m[r] - m_new);
      float sum = 0.0F;
      for (int j = 0; j < nk; ++j) {
        row[j] = row[j] == -std::numeric_limits<float>::infinity() ? 0.0F : std::exp(row[j] - m_new);
        sum += row[j];
      }
      l[r] = l[r] * correction + sum;
      m[r] = m_new;
      float* a = acc.base + r * static_cast<std::size_t>(acc.ld);
      for (int e = 0; e < d; ++e) a[e] *= correction;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, d, nk, 1.0F, s.data(), nk, v.row(k0), v.ld, 1.0F,
                acc.base + static_cast<std::size_t>(q0) * acc.ld, acc.ld);
  });
}

// Its backward: dq += (rows of stride dq.ld), dk and dv += from the output's gradient dout,
// the output and each row's log-sum-exp.
void backward_head(Rows q, Rows k, Rows v, Rows dout, Rows out, const float* lse, MutableRows dq, MutableRows dk,
                   MutableRows dv, std::span<const int> qpos, std::span<const int> kpos, int d, std::vector<float>& s,
                   std::vector<float>& ds, std::vector<float>& delta) {
  const auto tq = static_cast<int>(qpos.size());
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  s.resize(static_cast<std::size_t>(tile) * tile);
  ds.resize(s.size());
  delta.resize(static_cast<std::size_t>(tq));
  for (int i = 0; i < tq; ++i) {
    delta[static_cast<std::size_t>(i)] = std::inner_product(dout.row(i), dout.row(i) + d, out.row(i), 0.0F);
  }
  for_each_tile(qpos, kpos, [&](int q0, int nq, int k0, int nk) {
    // P = exp(scale Q Kᵀ - lse), 0 where masked; dP = dO Vᵀ; dS = P (dP - D).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, d, scale, q.row(q0), q.ld, k.row(k0), k.ld, 0.0F,
                s.data(), nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, d, 1.0F, dout.row(q0), dout.ld, v.row(k0), v.ld, 0.0F,
                ds.data(), nk);
    for (int i = 0; i < nq; ++i) {
      float* p = s.data() + static_cast<std::size_t>(i) * nk;
      float* g = ds.data() + static_cast<std::size_t>(i) * nk;
      const int at = qpos[static_cast<std::size_t>(q0 + i)];
      const float row_lse = lse[q0 + i];
      const float row_delta = delta[static_cast<std::size_t>(q0 + i)];
      for (int j = 0; j < nk; ++j) {
        p[j] = kpos[static_cast<std::size_t>(k0 + j)] > at ? 0.0F : std::exp(p[j] - row_lse);
        g[j] = p[j] * (g[j] - row_delta);
      }
    }
    // dV += Pᵀ dO; dQ += scale dS K; dK += scale dSᵀ Q.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, d, nq, 1.0F, s.data(), nk, dout.row(q0), dout.ld, 1.0F,
                dv.base + static_cast<std::size_t>(k0) * dv.ld, dv.ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, d, nk, scale, ds.data(), nk, k.row(k0), k.ld, 1.0F,
                dq.base + static_cast<std::size_t>(q0) * dq.ld, dq.ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, d, nq, scale, ds.data(), nk, q.row(q0), q.ld, 1.0F,
                dk.base + static_cast<std::size_t>(k0) * dk.ld, dk.ld);
  });
}

const std::vector<int>& positions_up_to(int t) {
  thread_local std::vector<int> iota;
  if (static_cast<int>(iota.size()) != t) {
    iota.resize(static_cast<std::size_t>(t));
    std::iota(iota.begin(), iota.end(), 0);
  }
  return iota;
}

}  // namespace

void CpuDevice::kv_pack(float* kv, const float* qkv, std::int64_t rows, int c) {
  progress();
  ring::kv_pack(kv, qkv, rows, c);
}

void CpuDevice::kv_unpack_add(float* dqkv, const float* dkv, std::int64_t rows, int c) {
  progress();
  ring::kv_unpack_add(dqkv, dkv, rows, c);
}

void CpuDevice::ring_attention_begin(float* acc, float* m, float* l, int b, int tq, int heads, int d) {
  ring::forward_begin(acc, m, l, b, tq, heads, d);
}

void CpuDevice::ring_attention_block(float* acc, float* m, float* l, const float* qkv, const float* kv,
                                     std::span<const int> qpos, std::span<const int> kpos, int b, int heads, int d) {
  progress();
  const int c = heads * d;
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < heads; ++hi) {
      const float* q = qkv + static_cast<std::size_t>(bi) * tq * 3 * c + static_cast<std::size_t>(hi) * d;
      const float* k = kv + static_cast<std::size_t>(bi) * tk * 2 * c + static_cast<std::size_t>(hi) * d;
      const std::size_t row = (static_cast<std::size_t>(bi) * heads + hi) * tq;
      forward_head({q, 3 * c}, {k, 2 * c}, {k + c, 2 * c},
                   {acc + static_cast<std::size_t>(bi) * tq * c + static_cast<std::size_t>(hi) * d, c}, m + row,
                   l + row, qpos, kpos, d, scores_);
    }
  }
  count_attention_flops(b, tq, tk, heads, d, false);
}

void CpuDevice::ring_attention_end(float* out, float* lse, const float* acc, const float* m, const float* l, int b,
                                   int tq, int heads, int d) {
  ring::forward_end(out, lse, acc, m, l, b, tq, heads, d);
}

void CpuDevice::ring_attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* out,
                                              const float* qkv, const float* kv, const float* lse,
                                              std::span<const int> qpos, std::span<const int> kpos, int b, int heads,
                                              int d) {
  progress();
  const int c = heads * d;
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < heads; ++hi) {
      const std::size_t h0 = static_cast<std::size_t>(hi) * d;
      const std::size_t qr = static_cast<std::size_t>(bi) * tq;
      const std::size_t kr = static_cast<std::size_t>(bi) * tk;
      const float* k = kv + kr * 2 * c + h0;
      float* dk = dkv + kr * 2 * c + h0;
      backward_head({qkv + qr * 3 * c + h0, 3 * c}, {k, 2 * c}, {k + c, 2 * c}, {dout + qr * c + h0, c},
                    {out + qr * c + h0, c}, lse + (static_cast<std::size_t>(bi) * heads + hi) * tq,
                    {dqkv + qr * 3 * c + h0, 3 * c}, {dk, 2 * c}, {dk + c, 2 * c}, qpos, kpos, d, scores_, grads_,
                    deltas_);
    }
  }
  count_attention_flops(b, tq, tk, heads, d, true);
}

void CpuDevice::flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int heads, int d) {
  progress();
  const int c = heads * d;
  const std::vector<int>& pos = positions_up_to(t);
  std::vector<float>& m = row_max_;
  std::vector<float>& l = row_sum_;
  m.resize(static_cast<std::size_t>(b) * heads * t);
  l.resize(m.size());
  ring::forward_begin(out, m.data(), l.data(), b, t, heads, d);
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < heads; ++hi) {
      const float* q = qkv + static_cast<std::size_t>(bi) * t * 3 * c + static_cast<std::size_t>(hi) * d;
      const std::size_t row = (static_cast<std::size_t>(bi) * heads + hi) * t;
      forward_head({q, 3 * c}, {q + c, 3 * c}, {q + 2 * c, 3 * c},
                   {out + static_cast<std::size_t>(bi) * t * c + static_cast<std::size_t>(hi) * d, c}, m.data() + row,
                   l.data() + row, pos, pos, d, scores_);
    }
  }
  ring::forward_end(out, lse, out, m.data(), l.data(), b, t, heads, d);
  count_attention_flops(b, t, heads, d, false);
}

void CpuDevice::flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv,
                                         const float* lse, int b, int t, int heads, int d) {
  progress();
  const int c = heads * d;
  const std::vector<int>& pos = positions_up_to(t);
  std::fill_n(dqkv, static_cast<std::size_t>(b) * t * 3 * c, 0.0F);  // writes every entry
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < heads; ++hi) {
      const std::size_t h0 = static_cast<std::size_t>(hi) * d;
      const std::size_t r = static_cast<std::size_t>(bi) * t;
      const float* q = qkv + r * 3 * c + h0;
      float* dq = dqkv + r * 3 * c + h0;
      backward_head({q, 3 * c}, {q + c, 3 * c}, {q + 2 * c, 3 * c}, {dout + r * c + h0, c}, {out + r * c + h0, c},
                    lse + (static_cast<std::size_t>(bi) * heads + hi) * t, {dq, 3 * c}, {dq + c, 3 * c},
                    {dq + 2 * c, 3 * c}, pos, pos, d, scores_, grads_, deltas_);
    }
  }
  count_attention_flops(b, t, heads, d, true);
}

}  // namespace parasim::exec
