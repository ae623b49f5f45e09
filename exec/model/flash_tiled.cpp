#include "exec/model/flash_tiled.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "exec/model/rounding.hpp"

namespace parasim::exec::flash_tiled {

namespace {

constexpr float minus_inf = -std::numeric_limits<float>::infinity();

// One head of one sequence: rows of qkv, out / dout and dqkv, and its lse.
struct Head {
  const float* qkv;
  int t, h, d, bi, hi;

  [[nodiscard]] std::size_t row(int pos, int part) const {
    const std::size_t c = static_cast<std::size_t>(h) * d;
    return (static_cast<std::size_t>(bi) * t + static_cast<std::size_t>(pos)) * 3 * c + static_cast<std::size_t>(part) * c +
           static_cast<std::size_t>(hi) * d;
  }
  [[nodiscard]] std::size_t out_row(int pos) const {
    return (static_cast<std::size_t>(bi) * t + static_cast<std::size_t>(pos)) * static_cast<std::size_t>(h) * d +
           static_cast<std::size_t>(hi) * d;
  }
  [[nodiscard]] std::size_t lse_at(int pos) const {
    return (static_cast<std::size_t>(bi) * h + static_cast<std::size_t>(hi)) * t + static_cast<std::size_t>(pos);
  }
};

// rows x d values from `src` (row r at src + offset(r)) into a contiguous tile, rounded.
template <class Offset>
void load_tile(std::vector<float>& tile, const float* src, int rows, int d, int format, Offset offset) {
  tile.assign(static_cast<std::size_t>(rows) * d, 0.0F);
  for (int r = 0; r < rows; ++r) {
    const float* from = src + offset(r);
    for (int e = 0; e < d; ++e) tile[static_cast<std::size_t>(r) * d + e] = rounding::round_format(from[e], format);
  }
}

float dot(const float* x, const float* y, int d) {
  float s = 0.0F;
  for (int e = 0; e < d; ++e) s += x[e] * y[e];
  return s;
}

}  // namespace

void forward(float* out, float* lse, const float* qkv, int b, int t, int h, int d, int format) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  std::vector<float> q, k, v, o, m, l, p(tile_k);
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      const Head hd{qkv, t, h, d, bi, hi};
      for (int i0 = 0; i0 < t; i0 += tile_q) {
        const int rows = std::min(tile_q, t - i0);
        load_tile(q, qkv, rows, d, format, [&](int r) { return hd.row(i0 + r, 0); });
        o.assign(static_cast<std::size_t>(rows) * d, 0.0F);
        m.assign(static_cast<std::size_t>(rows), minus_inf);
        l.assign(static_cast<std::size_t>(rows), 0.0F);
        for (int j0 = 0; j0 <= i0 + rows - 1; j0 += tile_k) {  // the key tiles up to the diagonal
          const int cols = std::min(tile_k, t - j0);
          load_tile(k, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 1); });
          load_tile(v, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 2); });
          for (int r = 0; r < rows; ++r) {
            const int i = i0 + r;
            const float* qr = q.data() + static_cast<std::size_t>(r) * d;
            float row_max = minus_inf;
            for (int c = 0; c < cols; ++c) {
              p[static_cast<std::size_t>(c)] =
                  j0 + c > i ? minus_inf : dot(qr, k.data() + static_cast<std::size_t>(c) * d, d) * scale;
              row_max = std::max(row_max, p[static_cast<std::size_t>(c)]);
            }
            const auto ru = static_cast<std::size_t>(r);
            const float m_new = std::max(m[ru], row_max);
            if (m_new == minus_inf) continue;  // every key of the tile after the row
            const float correction = std::exp(m[ru] - m_new);
            float sum = 0.0F;
            for (int c = 0; c < cols; ++c) {
              float& pc = p[static_cast<std::size_t>(c)];
              pc = std::exp(pc - m_new);  // 0 where masked
              sum += pc;
              pc = rounding::round_format(pc, format);  // P's GEMM operand
            }
            l[ru] = l[ru] * correction + sum;
            float* orow = o.data() + ru * d;
            for (int e = 0; e < d; ++e) {
              float acc = 0.0F;
              for (int c = 0; c < cols; ++c) acc += p[static_cast<std::size_t>(c)] * v[static_cast<std::size_t>(c) * d + e];
              orow[e] = orow[e] * correction + acc;
            }
            m[ru] = m_new;
          }
        }
        for (int r = 0; r < rows; ++r) {
          const auto ru = static_cast<std::size_t>(r);
          float* to = out + hd.out_row(i0 + r);
          for (int e = 0; e < d; ++e) to[e] = o[ru * d + e] / l[ru];
          lse[hd.lse_at(i0 + r)] = m[ru] + std::log(l[ru]);
        }
      }
    }
  }
}

void backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse, int b, int t, int h,
              int d, int format) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  std::vector<float> q, k, v, go, acc_a, acc_b, delta(static_cast<std::size_t>(t));
  for (int bi = 0; bi < b; ++bi) {
    for (int hi = 0; hi < h; ++hi) {
      const Head hd{qkv, t, h, d, bi, hi};
      for (int i = 0; i < t; ++i) {
        delta[static_cast<std::size_t>(i)] = dot(dout + hd.out_row(i), out + hd.out_row(i), d);
      }
      // p_ij and ds_ij of query row i (tile row r) and key j (tile row c).
      const auto p_ds = [&](int r, int c, int i, float& p, float& ds) {
        const float s = dot(q.data() + static_cast<std::size_t>(r) * d, k.data() + static_cast<std::size_t>(c) * d, d);
        p = std::exp(s * scale - lse[hd.lse_at(i)]);
        const float dp = dot(go.data() + static_cast<std::size_t>(r) * d, v.data() + static_cast<std::size_t>(c) * d, d);
        ds = p * (dp - delta[static_cast<std::size_t>(i)]);
      };
      // dK, dV: each key tile over the query tiles at or after it.
      for (int j0 = 0; j0 < t; j0 += tile_k) {
        const int cols = std::min(tile_k, t - j0);
        load_tile(k, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 1); });
        load_tile(v, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 2); });
        acc_a.assign(static_cast<std::size_t>(cols) * d, 0.0F);  // dk
        acc_b.assign(static_cast<std::size_t>(cols) * d, 0.0F);  // dv
        for (int i0 = j0 / tile_q * tile_q; i0 < t; i0 += tile_q) {
          const int rows = std::min(tile_q, t - i0);
          load_tile(q, qkv, rows, d, format, [&](int r) { return hd.row(i0 + r, 0); });
          load_tile(go, dout, rows, d, format, [&](int r) { return hd.out_row(i0 + r); });
          for (int c = 0; c < cols; ++c) {
            for (int r = 0; r < rows; ++r) {
              if (i0 + r < j0 + c) continue;
              float p = 0.0F, ds = 0.0F;
              p_ds(r, c, i0 + r, p, ds);
              const float pr = rounding::round_format(p, format), dsr = rounding::round_format(ds, format);
              for (int e = 0; e < d; ++e) {
                acc_a[static_cast<std::size_t>(c) * d + e] += dsr * q[static_cast<std::size_t>(r) * d + e];
                acc_b[static_cast<std::size_t>(c) * d + e] += pr * go[static_cast<std::size_t>(r) * d + e];
              }
            }
          }
        }
        for (int c = 0; c < cols; ++c) {
          float* dk = dqkv + hd.row(j0 + c, 1);
          float* dv = dqkv + hd.row(j0 + c, 2);
          for (int e = 0; e < d; ++e) {
            dk[e] = scale * acc_a[static_cast<std::size_t>(c) * d + e];
            dv[e] = acc_b[static_cast<std::size_t>(c) * d + e];
          }
        }
      }
      // dQ: each query tile over the key tiles up to its diagonal.
      for (int i0 = 0; i0 < t; i0 += tile_q) {
        const int rows = std::min(tile_q, t - i0);
        load_tile(q, qkv, rows, d, format, [&](int r) { return hd.row(i0 + r, 0); });
        load_tile(go, dout, rows, d, format, [&](int r) { return hd.out_row(i0 + r); });
        acc_a.assign(static_cast<std::size_t>(rows) * d, 0.0F);
        for (int j0 = 0; j0 <= i0 + rows - 1; j0 += tile_k) {
          const int cols = std::min(tile_k, t - j0);
          load_tile(k, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 1); });
          load_tile(v, qkv, cols, d, format, [&](int c) { return hd.row(j0 + c, 2); });
          for (int r = 0; r < rows; ++r) {
            for (int c = 0; c < cols; ++c) {
              if (i0 + r < j0 + c) continue;
              float p = 0.0F, ds = 0.0F;
              p_ds(r, c, i0 + r, p, ds);
              const float dsr = rounding::round_format(ds, format);
              for (int e = 0; e < d; ++e) {
                acc_a[static_cast<std::size_t>(r) * d + e] += dsr * k[static_cast<std::size_t>(c) * d + e];
              }
            }
          }
        }
        for (int r = 0; r < rows; ++r) {
          float* dq = dqkv + hd.row(i0 + r, 0);
          for (int e = 0; e < d; ++e) dq[e] = scale * acc_a[static_cast<std::size_t>(r) * d + e];
        }
      }
    }
  }
}

}  // namespace parasim::exec::flash_tiled
