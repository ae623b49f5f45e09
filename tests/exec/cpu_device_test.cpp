// The CPU device's fused operations against the unfused calls they stand for.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/model/fp8.hpp"
#include "exec/model/random.hpp"

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
  for (const plan::Dtype dtype : {plan::Dtype::fp32, plan::Dtype::bf16, plan::Dtype::fp16}) {
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
}
