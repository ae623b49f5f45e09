// The CPU device's fused operations against the unfused calls they stand for.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
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
