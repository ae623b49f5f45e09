// The CPU device's fused operations against the unfused calls they stand for.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/model/adam8bit.hpp"
#include "exec/model/fp8.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/random.hpp"
#include "exec/model/ring_attention.hpp"

using namespace parasim;

TEST_CASE("the fused bias, rounding and GELU give the unfused calls' values exactly", "[exec][np1]") {
  exec::CpuDevice dev;
  // 301 rows of 97 columns: several blocks of rows, the last one partial.
  const int n = 301, c = 97;
  const auto count = static_cast<std::size_t>(n) * c;
  std::uint64_t state = 5;
  std::vector<float> pre(count), bias(static_cast<std::size_t>(c));
  for (float& v : pre) v = static_cast<float>(2.0 * exec::normal(state));
  for (float& v : bias) v = static_cast<float>(exec::normal(state));
  for (const scenario::Dtype dtype : {scenario::Dtype::fp32, scenario::Dtype::bf16, scenario::Dtype::fp16}) {
    INFO(topology::to_string(dtype));
    exec::Buffer p1 = dev.allocate_floats(count), a1 = dev.allocate_floats(count);
    exec::Buffer p2 = dev.allocate_floats(count), a2 = dev.allocate_floats(count);
    exec::Buffer b = dev.allocate_floats(bias.size());
    dev.upload(p1.f(), pre.data(), count * sizeof(float));
    dev.upload(p2.f(), pre.data(), count * sizeof(float));
    dev.upload(b.f(), bias.data(), bias.size() * sizeof(float));
    dev.add_bias(p1.f(), b.f(), n, c);
    dev.round_to(dtype, p1.f(), static_cast<std::int64_t>(count));
    dev.gelu_forward(a1.f(), p1.f(), static_cast<std::int64_t>(count));
    dev.round_to(dtype, a1.f(), static_cast<std::int64_t>(count));
    dev.bias_gelu_forward(p2.f(), a2.f(), b.f(), n, c, dtype);
    std::vector<float> x1(count), x2(count), y1(count), y2(count);
    dev.download(x1.data(), p1.f(), count * sizeof(float));
    dev.download(x2.data(), p2.f(), count * sizeof(float));
    dev.download(y1.data(), a1.f(), count * sizeof(float));
    dev.download(y2.data(), a2.f(), count * sizeof(float));
    CHECK(x1 == x2);
    CHECK(y1 == y2);
    CHECK(x1 != pre);  // the bias was added
  }
}

TEST_CASE("16-bit storage: two bytes per value, rounded as round_to, read back exactly", "[exec][np1]") {
  exec::CpuDevice dev;
  const float inf = std::numeric_limits<float>::infinity();
  // By hand: bf16 keeps fp32's top 16 bits; fp16 is IEEE half (1, 5, 10 bits).
  const std::vector<float> x = {1.0F, -2.5F, 0.0F, -0.0F, 0.375F, 0x1p-24F, 0x1p-14F, inf, -inf};
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc020, 0x0000, 0x8000, 0x3ec0, 0x3380, 0x3880, 0x7f80, 0xff80};
  const std::vector<std::uint16_t> fp16 = {0x3c00, 0xc100, 0x0000, 0x8000, 0x3600, 0x0001, 0x0400, 0x7c00, 0xfc00};
  for (const auto& [dtype, bits] : {std::pair{scenario::Dtype::bf16, bf16}, std::pair{scenario::Dtype::fp16, fp16}}) {
    INFO(topology::to_string(dtype));
    std::vector<std::uint16_t> h(x.size());
    dev.pack_16(dtype, h.data(), x.data(), static_cast<std::int64_t>(x.size()));
    CHECK(h == bits);
    std::vector<float> back(x.size());
    dev.unpack_16(dtype, back.data(), h.data(), static_cast<std::int64_t>(x.size()));
    CHECK(back == x);
    CHECK(std::signbit(back[3]));
  }
  // Any value: packing rounds as round_to does (to nearest, ties to even), and the two
  // bytes give that value back exactly; fp16 past its range is infinite; NaN stays NaN.
  std::uint64_t state = 11;
  std::vector<float> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) {  // magnitudes from 2^-28 to 2^11
    v[i] = static_cast<float>(exec::normal(state) * std::ldexp(1.0, static_cast<int>(i % 40) - 28));
  }
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1] = 1.0F + 0x1p-8F;   // a bf16 tie (to even: 1); an fp16 value
  v[2] = 1.0F + 0x1p-11F;  // an fp16 tie (to even: 1); under half a bf16 step
  v[3] = 70000.0F;         // past fp16's largest value, 65504
  v[4] = 65504.0F;         // fp16's largest; in bf16 above a tie, up to 65536
  for (const scenario::Dtype dtype : {scenario::Dtype::bf16, scenario::Dtype::fp16}) {
    INFO(topology::to_string(dtype));
    std::vector<float> rounded = v;
    dev.round_to(dtype, rounded.data(), static_cast<std::int64_t>(rounded.size()));
    std::vector<std::uint16_t> h(v.size());
    std::vector<float> back(v.size());
    dev.pack_16(dtype, h.data(), v.data(), static_cast<std::int64_t>(v.size()));
    dev.unpack_16(dtype, back.data(), h.data(), static_cast<std::int64_t>(v.size()));
    CHECK(std::isnan(back[0]));
    CHECK(back[1] == (dtype == scenario::Dtype::fp16 ? 1.0F + 0x1p-8F : 1.0F));
    CHECK(back[2] == 1.0F);
    CHECK(back[3] == (dtype == scenario::Dtype::fp16 ? inf : 70144.0F));
    CHECK(back[4] == (dtype == scenario::Dtype::fp16 ? 65504.0F : 65536.0F));
    for (std::size_t i = 1; i < v.size(); ++i) {
      INFO(i << ": " << v[i]);
      REQUIRE(back[i] == rounded[i]);
    }
  }
}

TEST_CASE("the tiled (BLAS) flash and ring attention equal the reference kernels", "[exec][np1]") {
  // 2 sequences of 300 positions (three tiles of queries and keys, the last partial), 2
  // heads of 16, against the double reference: the whole sequence's flash attention, and
  // the ring over cp 3 (chunks of 50), forward and backward.
  exec::CpuDevice dev;
  const int b = 2, t = 300, h = 2, d = 16, c = h * d, cp = 3, tl = t / cp;
  std::uint64_t state = 11;
  std::vector<double> qkv(static_cast<std::size_t>(b) * t * 3 * c), dout(static_cast<std::size_t>(b) * t * c);
  for (double& v : qkv) v = exec::normal(state);
  for (double& v : dout) v = exec::normal(state);
  std::vector<double> out(dout.size()), lse(static_cast<std::size_t>(b) * h * t), dqkv(qkv.size());
  exec::kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), b, t, h, d);
  exec::kernels::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(), b, t, h, d);
  auto as_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  auto worst = [](const std::vector<float>& got, const std::vector<double>& want) {
    double w = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) w = std::max(w, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
    return w;
  };
  const std::vector<float> fq = as_float(qkv), fdout = as_float(dout);
  std::vector<float> fout(out.size()), flse(lse.size()), fdq(qkv.size(), 7.0F);
  dev.flash_attention_forward(fout.data(), flse.data(), fq.data(), b, t, h, d);
  dev.flash_attention_backward(fdq.data(), fdout.data(), fout.data(), fq.data(), flse.data(), b, t, h, d);
  CHECK(worst(fout, out) < 1e-5);
  CHECK(worst(flse, lse) < 1e-5);
  CHECK(worst(fdq, dqkv) < 1e-4);  // the 7s overwritten
  // The ring: rank r's rows, every block in ring order, the key and value gradients summed
  // into their owner's rows.
  auto rows_of = [&](const std::vector<float>& whole, int width, int rank) {
    std::vector<float> mine;
    for (int bi = 0; bi < b; ++bi) {
      for (int pos : exec::ring::positions(t, cp, rank)) {
        const float* row = whole.data() + (static_cast<std::size_t>(bi) * t + pos) * width;
        mine.insert(mine.end(), row, row + width);
      }
    }
    return mine;
  };
  const auto rows = static_cast<std::size_t>(b) * tl;
  std::vector<std::vector<float>> lq, kv, lo, ll, dq, dkv;
  for (int r = 0; r < cp; ++r) {
    lq.push_back(rows_of(fq, 3 * c, r));
    kv.emplace_back(rows * 2 * c);
    dev.kv_pack(kv.back().data(), lq.back().data(), static_cast<std::int64_t>(rows), c);
    dkv.emplace_back(rows * 2 * c, 0.0F);
  }
  for (int r = 0; r < cp; ++r) {
    std::vector<float> m(rows * h), l(rows * h);
    lo.emplace_back(rows * c);
    ll.emplace_back(rows * h);
    dev.ring_attention_begin(lo.back().data(), m.data(), l.data(), b, tl, h, d);
    for (int step = 0; step < cp; ++step) {
      const int owner = (r - step + cp) % cp;
      dev.ring_attention_block(lo.back().data(), m.data(), l.data(), lq[static_cast<std::size_t>(r)].data(),
                               kv[static_cast<std::size_t>(owner)].data(), exec::ring::positions(t, cp, r),
                               exec::ring::positions(t, cp, owner), b, h, d);
    }
    dev.ring_attention_end(lo.back().data(), ll.back().data(), lo.back().data(), m.data(), l.data(), b, tl, h, d);
  }
  for (int r = 0; r < cp; ++r) {
    dq.emplace_back(rows * 3 * c, 0.0F);
    const std::vector<float> ld = rows_of(fdout, c, r);
    for (int step = 0; step < cp; ++step) {
      const int owner = (r - step + cp) % cp;
      dev.ring_attention_block_backward(dq.back().data(), dkv[static_cast<std::size_t>(owner)].data(), ld.data(),
                                        lo[static_cast<std::size_t>(r)].data(), lq[static_cast<std::size_t>(r)].data(),
                                        kv[static_cast<std::size_t>(owner)].data(), ll[static_cast<std::size_t>(r)].data(),
                                        exec::ring::positions(t, cp, r), exec::ring::positions(t, cp, owner), b, h, d);
    }
  }
  const std::vector<float> fo = as_float(out), fd = as_float(dqkv);
  for (int r = 0; r < cp; ++r) {
    dev.kv_unpack_add(dq[static_cast<std::size_t>(r)].data(), dkv[static_cast<std::size_t>(r)].data(),
                      static_cast<std::int64_t>(rows), c);
    const std::vector<float> want_o = rows_of(fo, c, r), want_d = rows_of(fd, 3 * c, r);
    CHECK(worst(lo[static_cast<std::size_t>(r)], std::vector<double>(want_o.begin(), want_o.end())) < 1e-5);
    CHECK(worst(dq[static_cast<std::size_t>(r)], std::vector<double>(want_d.begin(), want_d.end())) < 1e-4);
  }
}

TEST_CASE("FP8 rounding and current scaling, by hand", "[exec][np1][fp8]") {
  using exec::fp8::e4m3;
  using exec::fp8::e5m2;
  // E4M3: 3 mantissa bits. Between 128 and 256 the step is 16; 134.4 rounds to 128 and 136
  // (a tie) to the even 128; 449 saturates to 448; the smallest subnormal is 2^-9.
  CHECK(exec::fp8::round(134.4F, e4m3) == 128.0F);
  CHECK(exec::fp8::round(136.0F, e4m3) == 128.0F);
  CHECK(exec::fp8::round(152.0F, e4m3) == 160.0F);
  CHECK(exec::fp8::round(-449.0F, e4m3) == -448.0F);
  CHECK(exec::fp8::round(0.0019531F, e4m3) == 0.001953125F);  // 2^-9
  CHECK(exec::fp8::round(0.0009F, e4m3) == 0.0F);
  // E5M2: 2 mantissa bits, up to 57344; between 16384 and 32768 the step is 4096.
  CHECK(exec::fp8::round(17203.2F, e5m2) == 16384.0F);
  CHECK(exec::fp8::round(1e6F, e5m2) == 57344.0F);
  // Current scaling: amax 1 maps to 448 (E4M3): 0.5 -> 224 (exact), 0.3 -> 134.4 -> 128,
  // scaled back 128 / 448; under E5M2 0.3 -> 17203.2 -> 16384, back 16384 / 57344.
  exec::CpuDevice dev;
  const std::vector<float> x{1.0F, -0.5F, 0.3F, 0.0F};
  std::vector<float> y(x.size());
  dev.fake_quantize_fp8(y.data(), x.data(), 4, false);
  CHECK(y == std::vector<float>{1.0F, -0.5F, 128.0F / 448.0F, 0.0F});
  dev.fake_quantize_fp8(y.data(), x.data(), 4, true);
  CHECK(y[2] == 16384.0F / 57344.0F);
  // An all-zero tensor stays zero (scale 1).
  const std::vector<float> zeros(3, 0.0F);
  dev.fake_quantize_fp8(y.data(), zeros.data(), 3, false);
  CHECK(y[0] == 0.0F);
  // Delayed scaling: the scale given (from earlier steps' amaxes), this tensor's amax kept.
  // Scale 2 under E4M3: 1 -> 2 (exact); 300 -> 600, past 448, saturates (back 224); -0.01
  // -> -0.02, subnormal: -10.24 quanta of 2^-9 round to -10 (back -0.009765625).
  const std::vector<float> late{1.0F, 300.0F, -0.01F};
  float amax = 5.0F;
  dev.fake_quantize_fp8_scaled(y.data(), late.data(), 3, false, 2.0F, &amax);
  CHECK(y[0] == 1.0F);
  CHECK(y[1] == 224.0F);
  CHECK(y[2] == -0.009765625F);
  CHECK(amax == 300.0F);
  amax = 500.0F;
  dev.fake_quantize_fp8_scaled(y.data(), late.data(), 3, false, 2.0F, &amax);
  CHECK(amax == 500.0F);  // a larger amax recorded earlier in the step stays
}

TEST_CASE("8-bit AdamW: the dynamic maps by hand, and a step against fp32 AdamW", "[exec][np1]") {
  namespace a8 = exec::adam8bit;
  // The maps: 256 sorted values holding 0 and 1. The finest signed step is 1e-6 times the
  // midpoint of linspace(0.1, 1, 2), 0.55; the unsigned one's first interval of
  // linspace(0.1, 1, 3) has midpoint 0.325. The signed map's most negative value is
  // -(0.1 + 0.9 * 127.5 / 128) = -0.99296875 (the last of 64 intervals' midpoints at 10^0).
  const auto& sm = a8::signed_map();
  const auto& um = a8::unsigned_map();
  CHECK(std::is_sorted(sm.begin(), sm.end()));
  CHECK(std::is_sorted(um.begin(), um.end()));
  CHECK(std::adjacent_find(sm.begin(), sm.end()) == sm.end());  // 256 distinct codes
  CHECK(std::adjacent_find(um.begin(), um.end()) == um.end());
  CHECK(sm.back() == 1.0F);
  CHECK(um.front() == 0.0F);
  CHECK(um.back() == 1.0F);
  CHECK(sm[0] == Approx(-0.99296875));
  const std::int64_t zero = std::find(sm.begin(), sm.end(), 0.0F) - sm.begin();
  CHECK(sm[static_cast<std::size_t>(zero + 1)] == Approx(5.5e-7));
  CHECK(um[1] == Approx(3.25e-7));
  CHECK(a8::quantize(0.0F, sm.data()) == zero);
  CHECK(a8::quantize(1.0F, um.data()) == 255);
  CHECK(sm[a8::quantize(0.5F, sm.data())] == Approx(0.5).margin(0.01));

  // Two blocks and a partial third (5000 values), from zero moments: the first step's
  // update uses the fp32 moments before they are stored, so the parameters equal fp32
  // AdamW's; the stored moments are within half a code step of them.
  const std::int64_t n = 5000;
  std::uint64_t state = 11;
  std::vector<float> p(static_cast<std::size_t>(n)), g(p.size());
  for (float& x : p) x = static_cast<float>(exec::normal(state));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(exec::normal(state) * (i < 2048 ? 1.0 : 1e-3));
  std::vector<float> p32 = p, m32(p.size(), 0.0F), v32(p.size(), 0.0F);
  exec::kernels::adamw(p32.data(), g.data(), m32.data(), v32.data(), n, exec::kernels::AdamW{1e-3, 0.9, 0.95, 1e-8, 0.0}, 1);
  exec::CpuDevice dev;
  std::vector<std::uint8_t> m(p.size(), 0), v(p.size(), 0);
  std::vector<float> m_max(3, 0.0F), v_max(3, 0.0F);
  REQUIRE(a8::blocks(n) == 3);
  dev.adamw8bit(p.data(), g.data(), m.data(), v.data(), m_max.data(), v_max.data(), n, 1e-3, 0.9, 0.95, 1e-8, 0.0, 1);
  double worst_p = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) worst_p = std::max(worst_p, static_cast<double>(std::abs(p[i] - p32[i])));
  CHECK(worst_p < 1e-6);
  for (std::size_t b = 0; b < 3; ++b) {
    const auto first = b * 2048;
    const auto last = std::min<std::size_t>(first + 2048, p.size());
    float top_m = 0.0F, top_v = 0.0F;
    for (std::size_t i = first; i < last; ++i) {
      top_m = std::max(top_m, std::abs(m32[i]));
      top_v = std::max(top_v, v32[i]);
    }
    CHECK(m_max[b] == Approx(top_m));  // each block its own maximum: 1e-3 of the first's
    CHECK(v_max[b] == Approx(top_v));
    for (std::size_t i = first; i < last; ++i) {
      // The map's widest gaps are 1/64 of the maximum (its top decade in 64 steps, and
      // in 128 for the unsigned map): half of that bounds the error.
      CHECK(std::abs(sm[m[i]] * m_max[b] - m32[i]) <= top_m / 128.0 + 1e-12);
      CHECK(std::abs(um[v[i]] * v_max[b] - v32[i]) <= top_v / 256.0 + 1e-12);
    }
  }
  CHECK(m_max[2] < 1e-2 * m_max[0]);
}
