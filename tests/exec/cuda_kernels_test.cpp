// Every CUDA kernel against the host kernels (the CPU backend's reference, model/kernels.hpp)
// on fresh random inputs: the same operation, fp32, within a relative error stated per
// kernel (reductions in another order: 1e-5 of the largest value; exp and tanh from the
// device's libraries: 1e-5; the rounding kernels: exact).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "exec/cuda/kernels.hpp"
#include "exec/model/batch_norm.hpp"
#include "exec/model/flash_tiled.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/ring_attention.hpp"
#include "tests/exec/host_vectors.hpp"
#ifdef PARASIM_HAVE_CUDA_DEVICE
#include <cublas_v2.h>

#include "exec/cuda/cuda_device.hpp"
#endif

namespace k = parasim::exec::kernels;
namespace cu = parasim::exec::cuda;
namespace tiled = parasim::exec::flash_tiled;

namespace {

using parasim::test::random_values;
using parasim::test::relative;

std::vector<float> zeros(std::size_t n, float value = 0.0F) { return std::vector<float>(n, value); }

// A device copy of a host vector, freed with the object.
template <class T>
struct On {
  T* p = nullptr;
  std::size_t n = 0;
  explicit On(const std::vector<T>& host) : n(host.size()) {
    void* raw = nullptr;
    REQUIRE(cudaMalloc(&raw, std::max<std::size_t>(n, 1) * sizeof(T)) == cudaSuccess);
    p = static_cast<T*>(raw);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~On() { cudaFree(p); }
  On(const On&) = delete;
  On& operator=(const On&) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

// Rounded to the nearest bf16 / fp16 value on the host (as the CPU backend rounds).
float to_bf16(float f) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffU + ((bits >> 16) & 1U);
  bits &= 0xffff0000U;
  std::memcpy(&f, &bits, 4);
  return f;
}
float to_fp16(float f) { return static_cast<float>(static_cast<_Float16>(f)); }

}  // namespace

TEST_CASE("CUDA layer norm forward and backward equal the host kernels", "[cuda]") {
  const int n = 37, c = 300;
  const auto x = random_values(n * c, 1), gamma = random_values(c, 2), beta = random_values(c, 3);
  const auto dy = random_values(n * c, 4);
  std::vector<float> y(n * c), mean(n), rstd(n), dx = random_values(n * c, 5), dg = random_values(c, 6),
                                                 db = random_values(c, 7);
  On<float> dx_d(dx), dg_d(dg), db_d(db);
  k::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), n, c);
  k::layer_norm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(), gamma.data(), n,
                         c);
  On<float> x_d(x), g_d(gamma), b_d(beta), y_d(zeros(n * c)), m_d(zeros(n)),
      r_d(zeros(n)), dy_d(dy);
  cu::layer_norm_forward(nullptr, y_d.p, m_d.p, r_d.p, x_d.p, g_d.p, b_d.p, n, c);
  cu::layer_norm_backward(nullptr, dx_d.p, dg_d.p, db_d.p, dy_d.p, x_d.p, m_d.p, r_d.p, g_d.p, n, c);
  CHECK(relative(y_d.get(), y) < 1e-5);
  CHECK(relative(m_d.get(), mean) < 1e-5);
  CHECK(relative(r_d.get(), rstd) < 1e-5);
  CHECK(relative(dx_d.get(), dx) < 1e-5);  // adds into the gradients it is given
  CHECK(relative(dg_d.get(), dg) < 1e-5);
  CHECK(relative(db_d.get(), db) < 1e-5);
}

TEST_CASE("CUDA GELU, softmax, bias and element-wise kernels equal the host kernels", "[cuda]") {
  const std::int64_t count = 10007;
  const auto x = random_values(count, 11), dy = random_values(count, 12);
  std::vector<float> y(count), dx = random_values(count, 13);
  On<float> dx_d(dx);
  k::gelu_forward(y.data(), x.data(), count);
  k::gelu_backward(dx.data(), x.data(), dy.data(), count);
  On<float> x_d(x), y_d(zeros(count)), dy_d(dy);
  cu::gelu_forward(nullptr, y_d.p, x_d.p, count);
  cu::gelu_backward(nullptr, dx_d.p, x_d.p, dy_d.p, count);
  CHECK(relative(y_d.get(), y) < 1e-5);
  CHECK(relative(dx_d.get(), dx) < 1e-5);

  // Causal softmax over 3 blocks of 50 x 50 scores and its backward, against the
  // attention kernels' definition: p = softmax(scale s) over j <= i, 0 above.
  const int batch = 3, t = 50;
  const float scale = 0.125F;
  const auto s = random_values(static_cast<std::size_t>(batch) * t * t, 14, -8.0F, 8.0F);
  const auto dp = random_values(s.size(), 15);
  std::vector<float> p(s.size(), 0.0F), ds(s.size());
  for (int r = 0; r < batch * t; ++r) {
    const int i = r % t;
    double m = -1e30, sum = 0.0;
    for (int j = 0; j <= i; ++j) m = std::max(m, static_cast<double>(s[r * t + j] * scale));
    for (int j = 0; j <= i; ++j) sum += std::exp(s[r * t + j] * scale - m);
    for (int j = 0; j <= i; ++j) p[r * t + j] = static_cast<float>(std::exp(s[r * t + j] * scale - m) / sum);
    double dot = 0.0;
    for (int j = 0; j < t; ++j) dot += p[r * t + j] * dp[r * t + j];
    for (int j = 0; j < t; ++j) ds[r * t + j] = static_cast<float>(scale * p[r * t + j] * (dp[r * t + j] - dot));
  }
  On<float> s_d(s), dp_d(dp), ds_d(zeros(s.size()));
  cu::causal_softmax_forward(nullptr, s_d.p, s_d.p, batch, t, scale);  // in place, as the shard calls it
  cu::causal_softmax_backward(nullptr, ds_d.p, s_d.p, dp_d.p, batch, t, scale);
  CHECK(relative(s_d.get(), p) < 1e-5);
  CHECK(relative(ds_d.get(), ds) < 1e-5);

  // Bias, its gradient, add, accumulate, scale.
  const int n = 65, c = 129;
  const auto out = random_values(n * c, 16), bias = random_values(c, 17);
  std::vector<float> with_bias = out, dbias(c, 1.0F);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < c; ++j) {
      with_bias[i * c + j] += bias[j];
      dbias[j] += out[i * c + j];
    }
  }
  On<float> out_d(out), bias_d(bias), dbias_d(zeros(c, 1.0F));
  cu::bias_backward(nullptr, dbias_d.p, out_d.p, n, c);
  cu::add_bias(nullptr, out_d.p, bias_d.p, n, c);
  CHECK(relative(out_d.get(), with_bias) < 1e-6);
  CHECK(relative(dbias_d.get(), dbias) < 1e-5);
  const auto a = random_values(count, 18), b = random_values(count, 19);
  std::vector<float> sum(count);
  for (std::int64_t i = 0; i < count; ++i) sum[i] = 2.0F * (a[i] + b[i] + b[i]);
  On<float> a_d(a), b_d(b), y2_d(zeros(count));
  cu::add(nullptr, y2_d.p, a_d.p, b_d.p, count);
  cu::accumulate(nullptr, y2_d.p, b_d.p, count);
  cu::scale(nullptr, y2_d.p, 2.0F, count);
  CHECK(relative(y2_d.get(), sum) < 1e-6);
}

TEST_CASE("CUDA column sums over wide and tall matrices equal the host's, the same bit for bit each run", "[cuda]") {
  // Widths and heights that are no multiple of the 32-column tiles, as a 4h bias of a
  // partitioned MLP or a norm over thousands of tokens has.
  for (const auto& [n, c] : {std::pair{1031, 3001}, std::pair{4099, 257}, std::pair{3, 5000}}) {
    INFO("n " << n << " c " << c);
    const auto out = random_values(static_cast<std::size_t>(n) * c, 41);
    std::vector<double> want(static_cast<std::size_t>(c), 0.0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < c; ++j) want[j] += out[static_cast<std::size_t>(i) * c + j];
    }
    std::vector<float> expected(want.begin(), want.end());
    On<float> out_d(out), first(zeros(c)), second(zeros(c));
    cu::bias_backward(nullptr, first.p, out_d.p, n, c);
    cu::bias_backward(nullptr, second.p, out_d.p, n, c);
    const std::vector<float> a = first.get();
    // Thousands of fp32 terms summed in another order than the host's: within 1e-4 of the
    // largest sum.
    CHECK(relative(a, expected) < 1e-4);
    CHECK(a == second.get());
    // The layer norm's parameter gradients, the same reduction with two sums.
    const auto x = random_values(static_cast<std::size_t>(n) * c, 42), dy = random_values(x.size(), 43);
    const auto gamma = random_values(c, 44), beta = random_values(c, 45);
    std::vector<float> y(x.size()), mean(n), rstd(n), dx(x.size(), 0.0F), dg(c, 0.0F), db(c, 0.0F);
    k::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), n, c);
    k::layer_norm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(), rstd.data(), gamma.data(),
                           n, c);
    On<float> x_d(x), dy_d(dy), m_d(mean), r_d(rstd), g_d(gamma), dx_d(zeros(x.size())), dg_d(zeros(c)), db_d(zeros(c));
    cu::layer_norm_backward(nullptr, dx_d.p, dg_d.p, db_d.p, dy_d.p, x_d.p, m_d.p, r_d.p, g_d.p, n, c);
    CHECK(relative(dg_d.get(), dg) < 1e-4);
    CHECK(relative(db_d.get(), db) < 1e-4);
  }
}

TEST_CASE("CUDA fused (flash) attention equals the host's, forward and backward", "[cuda]") {
  // Head sizes below, at and above one warp (d = 16, 64, 128), sequences of 77 positions.
  for (const int d : {16, 64, 128}) {
    INFO("head size " << d);
    const int b = 2, t = 77, h = 3, c = h * d;
    const auto qkv = random_values(static_cast<std::size_t>(b) * t * 3 * c, 51, -1.0F, 1.0F);
    const auto dout = random_values(static_cast<std::size_t>(b) * t * c, 52);
    std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(b) * h * t), dqkv(qkv.size());
    k::flash_attention_forward(out.data(), lse.data(), qkv.data(), b, t, h, d);
    k::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(), b, t, h, d);
    On<float> qkv_d(qkv), dout_d(dout), out_d(zeros(out.size())), lse_d(zeros(lse.size())),
        dqkv_d(zeros(qkv.size(), 9.0F));
    cu::flash_attention_forward(nullptr, out_d.p, lse_d.p, qkv_d.p, b, t, h, d);
    cu::flash_attention_backward(nullptr, dqkv_d.p, dout_d.p, out_d.p, qkv_d.p, lse_d.p, b, t, h, d);
    CHECK(relative(out_d.get(), out) < 1e-5);
    CHECK(relative(lse_d.get(), lse) < 1e-5);
    CHECK(relative(dqkv_d.get(), dqkv) < 1e-4);  // every entry written (the 9s gone)
  }
}

TEST_CASE("CUDA flash attention on tensor cores equals FlashAttention-2's tiles on the host, bit for bit each run",
          "[cuda][flash]") {
  // bf16 and fp16 operands; head sizes 16, 64 and 128 (the 1.3B scenario's); 77 positions (a
  // full tile of 64 and a partial one) and 130 (three tiles). The host model
  // (exec/model/flash_tiled.hpp) rounds the same operands at the same points, so the
  // kernels differ from it only by the order of the tensor cores' fp32 sums (and a 16-bit
  // rounding that order may tip): within 2.5e-3 (bf16) and 5e-4 (fp16) of the largest
  // value, twice that for the gradients. Against the untiled fp32 attention on the same
  // rounded inputs the host model itself is at most 1.3e-3 / 2.0e-3 off (bf16: output,
  // gradients) and 1.4e-4 / 2.2e-4 (fp16): the bounds are about 4x those. The backward reads the host
  // model's forward output, so each pass is checked on its own; it writes every entry.
  int dev = 0, major = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess);
  for (const int format : {1, 2}) {
    for (const int d : {16, 64, 128}) {
      for (const int t : {77, 130}) {
        INFO("format " << format << ", head size " << d << ", " << t << " positions");
        if (major < 8) {
          CHECK_FALSE(cu::flash_attention_tc_supported(d, format));  // no bf16 tensor cores before Ampere
          continue;
        }
        REQUIRE(cu::flash_attention_tc_supported(d, format));
        const int b = 2, h = 3, c = h * d;
        const auto round = [format](std::vector<float> v) {
          for (float& x : v) x = format == 1 ? to_bf16(x) : to_fp16(x);
          return v;
        };
        const auto qkv = round(random_values(static_cast<std::size_t>(b) * t * 3 * c, 61, -1.0F, 1.0F));
        const auto dout = round(random_values(static_cast<std::size_t>(b) * t * c, 62));
        std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(b) * h * t), dqkv(qkv.size());
        tiled::forward(out.data(), lse.data(), qkv.data(), b, t, h, d, format);
        tiled::backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(), b, t, h, d, format);
        std::vector<float> ref_out(out.size()), ref_lse(lse.size()), ref_dqkv(qkv.size());
        k::flash_attention_forward(ref_out.data(), ref_lse.data(), qkv.data(), b, t, h, d);
        k::flash_attention_backward(ref_dqkv.data(), dout.data(), ref_out.data(), qkv.data(), ref_lse.data(), b, t, h, d);

        On<float> qkv_d(qkv), dout_d(dout), out_d(zeros(out.size())), lse_d(zeros(lse.size()));
        REQUIRE(cu::flash_attention_tc_forward(nullptr, out_d.p, lse_d.p, qkv_d.p, b, t, h, d, format));
        const double tight = format == 1 ? 2.5e-3 : 5e-4;
        CHECK(relative(out_d.get(), out) < tight);
        CHECK(relative(lse_d.get(), lse) < 1e-5);  // P's rounding does not reach lse
        CHECK(relative(out_d.get(), ref_out) < (format == 1 ? 5e-3 : 6e-4));

        On<float> host_out(out), host_lse(lse), delta(zeros(lse.size()));
        On<float> dqkv_d(zeros(qkv.size(), 9.0F)), again(zeros(qkv.size(), 9.0F));
        REQUIRE(cu::flash_attention_tc_backward(nullptr, dqkv_d.p, delta.p, dout_d.p, host_out.p, qkv_d.p, host_lse.p, b,
                                                t, h, d, format));
        REQUIRE(cu::flash_attention_tc_backward(nullptr, again.p, delta.p, dout_d.p, host_out.p, qkv_d.p, host_lse.p, b,
                                                t, h, d, format));
        const std::vector<float> got = dqkv_d.get();
        CHECK(relative(got, dqkv) < 2 * tight);  // every entry written (the 9s gone)
        CHECK(relative(got, ref_dqkv) < (format == 1 ? 8e-3 : 1e-3));
        CHECK(std::memcmp(got.data(), again.get().data(), got.size() * sizeof(float)) == 0);  // deterministic
      }
    }
  }
  // fp32 / tf32 operands (format 0) and head sizes without a build stay on the CUDA cores.
  CHECK_FALSE(cu::flash_attention_tc_supported(64, 0));
  CHECK_FALSE(cu::flash_attention_tc_supported(80, 1));
  CHECK_FALSE(cu::flash_attention_tc_supported(256, 1));
}

TEST_CASE("CUDA ring attention equals the host's: one rank's blocks, forward and backward", "[cuda]") {
  // cp 3 over 84 positions (chunks of 14), rank 1 (chunks 1 and 4): its queries against
  // its own block and rank 0's, with the host reference (exec/model/ring_attention.hpp).
  namespace ring = parasim::exec::ring;
  for (const int d : {16, 64}) {
    INFO("head size " << d);
    const int b = 2, t = 84, h = 2, c = h * d, cp = 3, tl = t / cp;
    const auto rows = static_cast<std::size_t>(b) * tl;
    const auto qkv = random_values(rows * 3 * c, 61, -1.0F, 1.0F);
    const auto other = random_values(rows * 3 * c, 62, -1.0F, 1.0F);
    const auto dout = random_values(rows * c, 63);
    const std::vector<int> mine = ring::positions(t, cp, 1), theirs = ring::positions(t, cp, 0);
    std::vector<float> kv(rows * 2 * c), kv0(rows * 2 * c);
    ring::kv_pack(kv.data(), qkv.data(), static_cast<std::int64_t>(rows), c);
    ring::kv_pack(kv0.data(), other.data(), static_cast<std::int64_t>(rows), c);
    std::vector<float> acc(rows * c), m(rows * h), l(rows * h), out(rows * c), lse(rows * h);
    ring::forward_begin(acc.data(), m.data(), l.data(), b, tl, h, d);
    ring::forward_block(acc.data(), m.data(), l.data(), qkv.data(), kv.data(), mine, mine, b, h, d);
    ring::forward_block(acc.data(), m.data(), l.data(), qkv.data(), kv0.data(), mine, theirs, b, h, d);
    ring::forward_end(out.data(), lse.data(), acc.data(), m.data(), l.data(), b, tl, h, d);
    std::vector<float> dq = zeros(rows * 3 * c), dkv = zeros(rows * 2 * c), dkv0 = zeros(rows * 2 * c);
    ring::backward_block(dq.data(), dkv.data(), dout.data(), out.data(), qkv.data(), kv.data(), lse.data(), mine, mine,
                         b, h, d);
    ring::backward_block(dq.data(), dkv0.data(), dout.data(), out.data(), qkv.data(), kv0.data(), lse.data(), mine,
                         theirs, b, h, d);
    On<float> qkv_d(qkv), kv_d(zeros(kv.size())), kv0_d(kv0), acc_d(zeros(acc.size())), m_d(zeros(m.size())),
        l_d(zeros(l.size())), out_d(zeros(out.size())), lse_d(zeros(lse.size())), dout_d(dout), dq_d(zeros(dq.size())),
        dkv_d(zeros(dkv.size())), dkv0_d(zeros(dkv0.size()));
    On<int> mine_d(mine), theirs_d(theirs);
    cu::kv_pack(nullptr, kv_d.p, qkv_d.p, static_cast<std::int64_t>(rows), c);
    CHECK(kv_d.get() == kv);
    cu::ring_attention_begin(nullptr, acc_d.p, m_d.p, l_d.p, b, tl, h, d);
    cu::ring_attention_block(nullptr, acc_d.p, m_d.p, l_d.p, qkv_d.p, kv_d.p, mine_d.p, mine_d.p, b, tl, tl, h, d);
    cu::ring_attention_block(nullptr, acc_d.p, m_d.p, l_d.p, qkv_d.p, kv0_d.p, mine_d.p, theirs_d.p, b, tl, tl, h, d);
    cu::ring_attention_end(nullptr, out_d.p, lse_d.p, acc_d.p, m_d.p, l_d.p, b, tl, h, d);
    CHECK(relative(out_d.get(), out) < 1e-5);
    CHECK(relative(lse_d.get(), lse) < 1e-5);
    cu::ring_attention_block_backward(nullptr, dq_d.p, dkv_d.p, dout_d.p, out_d.p, qkv_d.p, kv_d.p, lse_d.p, mine_d.p,
                                      mine_d.p, b, tl, tl, h, d);
    cu::ring_attention_block_backward(nullptr, dq_d.p, dkv0_d.p, dout_d.p, out_d.p, qkv_d.p, kv0_d.p, lse_d.p, mine_d.p,
                                      theirs_d.p, b, tl, tl, h, d);
    CHECK(relative(dq_d.get(), dq) < 1e-4);
    CHECK(relative(dkv_d.get(), dkv) < 1e-4);
    CHECK(relative(dkv0_d.get(), dkv0) < 1e-4);
    ring::kv_unpack_add(dq.data(), dkv.data(), static_cast<std::int64_t>(rows), c);
    cu::kv_unpack_add(nullptr, dq_d.p, dkv_d.p, static_cast<std::int64_t>(rows), c);
    CHECK(relative(dq_d.get(), dq) < 1e-4);
  }
}

TEST_CASE("CUDA embedding and vocabulary-parallel cross-entropy equal the CPU definitions", "[cuda]") {
  const int b = 3, t = 7, c = 40, vocab = 50, v0 = 20, vn = 25;
  std::vector<std::int32_t> tokens(b * t);
  for (int i = 0; i < b * t; ++i) tokens[i] = (i * 17 + 3) % vocab;  // some repeat, some outside the slice
  const auto wte = random_values(static_cast<std::size_t>(vn) * c, 21), wpe = random_values(static_cast<std::size_t>(t) * c, 22);
  const auto dx = random_values(static_cast<std::size_t>(b) * t * c, 23);
  std::vector<float> x(b * t * c), dwte(vn * c, 0.0F), dwpe(t * c, 0.0F);
  for (int row = 0; row < b * t; ++row) {
    const int tok = tokens[row] - v0;
    for (int j = 0; j < c; ++j) {
      x[row * c + j] = (tok >= 0 && tok < vn ? wte[tok * c + j] : 0.0F) + wpe[(row % t) * c + j];
      if (tok >= 0 && tok < vn) dwte[tok * c + j] += dx[row * c + j];
      dwpe[(row % t) * c + j] += dx[row * c + j];
    }
  }
  On<std::int32_t> tok_d(tokens);
  On<float> wte_d(wte), wpe_d(wpe), x_d(zeros(x.size())), dx_d(dx), dwte_d(zeros(dwte.size())),
      dwpe_d(zeros(dwpe.size()));
  cu::embedding_forward(nullptr, x_d.p, tok_d.p, wte_d.p, wpe_d.p, b, t, c, v0, vn);
  cu::embedding_backward(nullptr, dwte_d.p, dwpe_d.p, dx_d.p, tok_d.p, b, t, c, v0, vn);
  CHECK(relative(x_d.get(), x) < 1e-6);
  CHECK(relative(dwte_d.get(), dwte) < 1e-5);
  CHECK(relative(dwpe_d.get(), dwpe) < 1e-5);

  // Two vocabulary slices of one row set: stats per slice, then the loss and gradients of
  // slice 1 from both slices' stats, against the whole-vocabulary cross-entropy.
  const int n = 9, v = 64, slice = 32;
  const auto logits = random_values(static_cast<std::size_t>(n) * v, 24, -5.0F, 5.0F);
  std::vector<std::int32_t> targets(n);
  for (int i = 0; i < n; ++i) targets[i] = (i * 13) % v;
  std::vector<float> dl(n * v);
  const float mean_loss = k::cross_entropy(dl.data(), logits.data(), targets.data(), n, v);
  std::vector<float> slices[2];
  for (int part = 0; part < 2; ++part) {
    for (int i = 0; i < n; ++i) slices[part].insert(slices[part].end(), logits.begin() + i * v + part * slice,
                                                    logits.begin() + i * v + (part + 1) * slice);
  }
  On<std::int32_t> tgt_d(targets);
  On<float> l0(slices[0]), l1(slices[1]), stats(zeros(2 * n * 3)), loss(zeros(n)),
      dl1(zeros(slices[1].size()));
  cu::cross_entropy_stats(nullptr, stats.p, l0.p, tgt_d.p, n, slice, 0);
  cu::cross_entropy_stats(nullptr, stats.p + n * 3, l1.p, tgt_d.p, n, slice, slice);
  const float scale = 1.0F / n;
  cu::cross_entropy_backward(nullptr, dl1.p, loss.p, l1.p, stats.p, 2, tgt_d.p, n, slice, slice, scale);
  const auto losses = loss.get();
  double total = 0.0;
  for (float l : losses) total += l;
  CHECK(total / n == Approx(mean_loss).epsilon(1e-5));
  std::vector<float> want;
  for (int i = 0; i < n; ++i) want.insert(want.end(), dl.begin() + i * v + slice, dl.begin() + (i + 1) * v);
  CHECK(relative(dl1.get(), want) < 1e-5);
}

TEST_CASE("CUDA GEMM-equivalent kernels, AdamW and rounding equal the host kernels", "[cuda]") {
  for (const auto& [nx, ny] : std::vector<std::pair<std::int64_t, std::int64_t>>{{7, 30}, {30, 7}, {1000, 999}, {5, 5}}) {
    const auto x = random_values(static_cast<std::size_t>(nx), 31), dy = random_values(static_cast<std::size_t>(ny), 32);
    std::vector<float> y(ny), dx(nx);
    k::resample_forward(y.data(), ny, x.data(), nx, true);
    k::resample_backward(dx.data(), nx, dy.data(), ny, x.data());
    On<float> x_d(x), dy_d(dy), y_d(zeros(ny)), dx_d(zeros(nx));
    cu::resample_forward(nullptr, y_d.p, ny, x_d.p, nx, true);
    cu::resample_backward(nullptr, dx_d.p, nx, dy_d.p, ny, x_d.p);
    INFO(nx << " -> " << ny);
    CHECK(relative(y_d.get(), y) == 0.0);
    CHECK(relative(dx_d.get(), dx) < 1e-6);
  }
  const std::int64_t count = 1001, nb = 13;
  const auto y0 = random_values(count, 33), bias = random_values(nb, 34);
  std::vector<float> y = y0, db(nb, 0.5F);
  k::add_cyclic(y.data(), count, bias.data(), nb);
  k::cyclic_backward(db.data(), nb, y0.data(), count);
  On<float> y_d(y0), y0_d(y0), bias_d(bias), db_d(zeros(nb, 0.5F));
  cu::add_cyclic(nullptr, y_d.p, count, bias_d.p, nb);
  cu::cyclic_backward(nullptr, db_d.p, nb, y0_d.p, count);
  CHECK(relative(y_d.get(), y) < 1e-6);
  CHECK(relative(db_d.get(), db) < 1e-5);

  // A mixture of experts' permutation of 37 tokens x 19 values, 3 copies each, and back.
  {
    const int n = 37, kk = 3, c = 19;
    const auto xs = random_values(static_cast<std::size_t>(n) * c, 40);
    const auto gates = random_values(static_cast<std::size_t>(n) * kk, 41);
    std::vector<float> pos(static_cast<std::size_t>(n) * kk);
    for (std::size_t q = 0; q < pos.size(); ++q) pos[q] = static_cast<float>((q * 7) % pos.size());  // a permutation (7 and 111 coprime)
    std::vector<float> rows(pos.size() * c), back(static_cast<std::size_t>(n) * c, 0.0F);
    k::moe_permute(rows.data(), xs.data(), pos.data(), gates.data(), n, kk, c);
    k::moe_unpermute(back.data(), rows.data(), pos.data(), gates.data(), n, kk, c, false);
    On<float> x_d(xs), g_d(gates), pos_d(pos), rows_d(zeros(rows.size())), back_d(zeros(back.size()));
    cu::moe_permute(nullptr, rows_d.p, x_d.p, pos_d.p, g_d.p, n, kk, c);
    cu::moe_unpermute(nullptr, back_d.p, rows_d.p, pos_d.p, g_d.p, n, kk, c, false);
    CHECK(relative(rows_d.get(), rows) == 0.0);
    CHECK(relative(back_d.get(), back) < 1e-6);
  }

  // Three AdamW steps (the host runs them in double, the device in float).
  auto p = random_values(count, 35), m = std::vector<float>(count, 0.0F), v = m;
  On<float> p_d(p), m_d(m), v_d(v);
  for (int step = 1; step <= 3; ++step) {
    const auto g = random_values(count, 36 + static_cast<std::uint32_t>(step));
    k::adamw(p.data(), g.data(), m.data(), v.data(), count, k::AdamW{1e-3, 0.9, 0.95, 1e-8, 0.1}, step);
    On<float> g_d(g);
    cu::adamw(nullptr, p_d.p, g_d.p, m_d.p, v_d.p, count, 1e-3F, 0.9F, 0.95F, 1e-8F, 0.1F, step);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  CHECK(relative(p_d.get(), p) < 1e-6);
  CHECK(relative(m_d.get(), m) < 1e-5);

  // Rounding: bf16 by the same bit arithmetic as the CPU backend, fp16 by the hardware's
  // round-to-nearest-even; exact.
  const auto r = random_values(4096, 40, -70000.0F, 70000.0F);
  std::vector<float> bf = r, hf = r;
  for (float& f : bf) f = to_bf16(f);
  for (float& f : hf) f = to_fp16(f);  // beyond 65504: infinite, as on the device
  On<float> bf_d(r), hf_d(r);
  cu::round_bf16(nullptr, bf_d.p, static_cast<std::int64_t>(r.size()));
  cu::round_fp16(nullptr, hf_d.p, static_cast<std::int64_t>(r.size()));
  CHECK(bf_d.get() == bf);
  CHECK(hf_d.get() == hf);

  // 16-bit storage: packed as rounded, unpacked exactly (the rounded values back).
  for (const int format : {1, 2}) {
    INFO("format " << format);
    On<float> x_d(r), back_d(r);
    On<std::uint16_t> h_d(std::vector<std::uint16_t>(r.size()));
    cu::pack_16(nullptr, h_d.p, x_d.p, static_cast<std::int64_t>(r.size()), format);
    cu::unpack_16(nullptr, back_d.p, h_d.p, static_cast<std::int64_t>(r.size()), format);
    CHECK(back_d.get() == (format == 1 ? bf : hf));
    if (format == 1) {  // bf16: the top half of the rounded value's bits
      const auto h = h_d.get();
      for (std::size_t i = 0; i < 8; ++i) CHECK(h[i] == std::bit_cast<std::uint32_t>(bf[i]) >> 16);
    }
  }
}

TEST_CASE("CUDA BatchNorm equals the host's: statistics, merge, normalisation and both backward kernels", "[cuda][bn]") {
  // Three samples of 1,000 values, a stretch of 901 of them at 50 in 7 channels (runs of
  // 128 and 129), two members' statistics merged.
  const parasim::exec::BnShape s{3, 1000, 50, 901, 7};
  const parasim::exec::BnShape& g = s;
  const auto x = random_values(3000, 60), dy = random_values(3000, 61), x2 = random_values(3000, 62);
  const auto gamma = random_values(7, 63), beta = random_values(7, 64);
  std::vector<float> stats(30), mi(14), y = x, sums(14), dgamma(7, 0.5F), dbeta(7, 0.25F), dx = dy;
  k::bn_stats(stats.data(), x.data(), s);
  k::bn_stats(stats.data() + 15, x2.data(), s);
  k::bn_merge(mi.data(), stats.data(), 2, s);
  k::bn_normalize(y.data(), x.data(), mi.data(), gamma.data(), beta.data(), s);
  k::bn_backward_reduce(sums.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(), mi.data(), s);
  k::bn_backward_input(dx.data(), dy.data(), x.data(), mi.data(), gamma.data(), sums.data(), 6.0, s);
  On<float> x_d(x), x2_d(x2), dy_d(dy), gamma_d(gamma), beta_d(beta), stats_d(zeros(30)), mi_d(zeros(14)), y_d(x),
      sums_d(zeros(14)), dgamma_d(zeros(7, 0.5F)), dbeta_d(zeros(7, 0.25F)), dx_d(dy);
  cu::bn_stats(nullptr, stats_d.p, x_d.p, g);
  cu::bn_stats(nullptr, stats_d.p + 15, x2_d.p, g);
  cu::bn_merge(nullptr, mi_d.p, stats_d.p, 2, g, parasim::exec::batch_norm_eps);
  cu::bn_normalize(nullptr, y_d.p, x_d.p, mi_d.p, gamma_d.p, beta_d.p, g);
  cu::bn_backward_reduce(nullptr, sums_d.p, dgamma_d.p, dbeta_d.p, dy_d.p, x_d.p, mi_d.p, g);
  cu::bn_backward_input(nullptr, dx_d.p, dy_d.p, x_d.p, mi_d.p, gamma_d.p, sums_d.p, 6.0, g);
  CHECK(relative(stats_d.get(), stats) < 1e-6);
  CHECK(relative(mi_d.get(), mi) < 1e-6);
  CHECK(relative(y_d.get(), y) < 1e-6);  // the values outside the stretch untouched
  CHECK(relative(sums_d.get(), sums) < 1e-6);
  CHECK(relative(dgamma_d.get(), dgamma) < 1e-6);
  CHECK(relative(dbeta_d.get(), dbeta) < 1e-6);
  CHECK(relative(dx_d.get(), dx) < 1e-6);
  // The reductions' tree is fixed: the same bits again.
  On<float> again(zeros(15));
  cu::bn_stats(nullptr, again.p, x_d.p, g);
  const std::vector<float> first = stats_d.get();
  CHECK(again.get() == std::vector<float>(first.begin(), first.begin() + 15));
}

TEST_CASE("CUDA count of non-finite values equals the host's", "[cuda]") {
  auto x = random_values(100003, 50);
  x[0] = INFINITY;
  x[77] = -INFINITY;
  x[100002] = NAN;
  x[5000] = std::numeric_limits<float>::quiet_NaN();
  std::int64_t want = 0;
  for (float f : x) want += std::isfinite(f) ? 0 : 1;
  REQUIRE(want == 4);
  On<float> x_d(x);
  On<unsigned long long> n_d(std::vector<unsigned long long>{99});
  cu::count_nonfinite(nullptr, n_d.p, x_d.p, static_cast<std::int64_t>(x.size()));
  CHECK(n_d.get()[0] == static_cast<unsigned long long>(want));
  cu::count_nonfinite(nullptr, n_d.p, x_d.p + 1, 76);  // a finite stretch
  CHECK(n_d.get()[0] == 0);
}

TEST_CASE("CUDA sum of squares equals the host's in double, and a NaN shows", "[cuda]") {
  auto x = random_values(100003, 51);
  double want = 0.0;
  for (float f : x) want += static_cast<double>(f) * f;
  On<float> x_d(x);
  On<double> sum_d(std::vector<double>{99.0});
  cu::sum_squares(nullptr, sum_d.p, x_d.p, static_cast<std::int64_t>(x.size()));
  CHECK(sum_d.get()[0] == Approx(want).epsilon(1e-12));
  x[5000] = NAN;
  On<float> nan_d(x);
  cu::sum_squares(nullptr, sum_d.p, nan_d.p, static_cast<std::int64_t>(x.size()));
  CHECK(std::isnan(sum_d.get()[0]));
}

#ifdef PARASIM_HAVE_CUDA_DEVICE
// The executor's GEMMs in each precision (cuBLAS on fp32 operands with the compute type of
// gemm_compute_type) against the host's fp32 GEMM. On operands already rounded to the
// 16-bit format, as the shard rounds them, every precision is exact up to fp32
// accumulation (1e-5 of the largest value); on raw fp32 operands the down-conversion
// costs at most its rounding: tf32 and fp16 2^-11, bf16 2^-8 per operand, summed over k
// at random signs (bounds 2e-3, 2e-3, 1e-2 of the largest value).
TEST_CASE("CUDA GEMMs in fp32, tf32, bf16 and fp16 equal the host GEMM within each format's rounding", "[cuda]") {
  using parasim::scenario::Dtype;
  const int m = 96, n = 80, k = 512;
  cublasHandle_t h = nullptr;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  struct Case {
    Dtype dtype;
    bool prerounded;
    double bound;
  };
  for (const Case c : {Case{Dtype::fp32, false, 1e-5}, Case{Dtype::tf32, false, 2e-3}, Case{Dtype::bf16, false, 1e-2},
                       Case{Dtype::fp16, false, 2e-3}, Case{Dtype::bf16, true, 1e-5}, Case{Dtype::fp16, true, 1e-5}}) {
    auto a = random_values(static_cast<std::size_t>(m) * k, 60, -1.0F, 1.0F);
    auto b = random_values(static_cast<std::size_t>(k) * n, 61, -1.0F, 1.0F);
    if (c.prerounded) {
      for (auto* v : {&a, &b}) {
        for (float& f : *v) f = c.dtype == Dtype::bf16 ? to_bf16(f) : to_fp16(f);
      }
    }
    std::vector<float> want(static_cast<std::size_t>(m) * n);
    k::gemm<float>(false, false, m, n, k, 1.0F, a.data(), b.data(), 0.0F, want.data());
    On<float> a_d(a), b_d(b), c_d(zeros(want.size()));
    const auto g = parasim::exec::column_major(false, false, m, n, k);
    const float one = 1.0F, zero = 0.0F;
    REQUIRE(cublasGemmEx(h, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
                         g.rows, g.cols, g.inner, &one, b_d.p, CUDA_R_32F, n, a_d.p, CUDA_R_32F, k, &zero, c_d.p,
                         CUDA_R_32F, n, parasim::exec::gemm_compute_type(c.dtype),
                         CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    INFO(parasim::topology::to_string(c.dtype) << (c.prerounded ? ", operands pre-rounded" : ""));
    CHECK(relative(c_d.get(), want) < c.bound);
  }
  cublasDestroy(h);
}
#endif
