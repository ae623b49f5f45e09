// The CUDA Device on one GPU as one rank (no mpirun): its GEMMs in every transpose form and
// strided-batched, one-rank NCCL collectives, and a whole training run against the CPU
// executor's losses. Two ranks cannot share one GPU under NCCL, so the parallel modes are
// checked by gpu-check.sh on hosts with more GPUs.
#include <catch2/catch.hpp>

#ifdef PARASIM_HAVE_CUDA_DEVICE
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/cuda/cuda_device.hpp"
#include "exec/execute.hpp"
#include "exec/model/kernels.hpp"
#include "scenario/load.hpp"
#include "tests/exec/host_vectors.hpp"

using namespace parasim;

using test::random_values;
using test::relative;

namespace {

exec::Buffer on(exec::Device& dev, const std::vector<float>& host) {
  exec::Buffer b = dev.allocate_floats(host.size());
  dev.upload(b.f(), host.data(), host.size() * sizeof(float));
  return b;
}

std::vector<float> back(exec::Device& dev, const exec::Buffer& b, std::size_t n) {
  std::vector<float> h(n);
  dev.download(h.data(), b.f(), n * sizeof(float));
  return h;
}

}  // namespace

TEST_CASE("the CUDA device's GEMMs in every transpose form and strided-batched equal the host's", "[cuda][device]") {
  exec::CudaDevice dev;
  const int m = 37, n = 53, k = 71;  // no multiple of a tile
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      const auto a = random_values(static_cast<std::size_t>(m) * k, 1, -1.0F, 1.0F);
      const auto b = random_values(static_cast<std::size_t>(k) * n, 2, -1.0F, 1.0F);
      std::vector<float> want(static_cast<std::size_t>(m) * n);
      exec::kernels::gemm<float>(ta, tb, m, n, k, 1.0F, a.data(), b.data(), 0.0F, want.data());
      const exec::Buffer ad = on(dev, a), bd = on(dev, b), cd = dev.allocate_floats(want.size());
      dev.gemm(ta, tb, m, n, k, 1.0F, ad.f(), ta ? m : k, bd.f(), tb ? k : n, 0.0F, cd.f(), n);
      CHECK(relative(back(dev, cd, want.size()), want) < 1e-5);
    }
  }
  // Attention's scores per head: Q Kᵀ over 3 heads whose rows interleave in one buffer
  // (leading dimension 3d, head stride d), as the shard calls it.
  const int t = 29, d = 16, heads = 3;
  const auto qk = random_values(static_cast<std::size_t>(t) * 2 * heads * d, 3, -1.0F, 1.0F);
  std::vector<float> want(static_cast<std::size_t>(heads) * t * t);
  for (int hd = 0; hd < heads; ++hd) {
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j < t; ++j) {
        double s = 0.0;
        for (int e = 0; e < d; ++e) {
          s += static_cast<double>(qk[static_cast<std::size_t>(i) * 2 * heads * d + hd * d + e]) *
               qk[static_cast<std::size_t>(j) * 2 * heads * d + heads * d + hd * d + e];
        }
        want[(static_cast<std::size_t>(hd) * t + i) * t + j] = static_cast<float>(s);
      }
    }
  }
  const exec::Buffer qkd = on(dev, qk), sd = dev.allocate_floats(want.size());
  dev.gemm_batched(false, true, t, t, d, 1.0F, qkd.f(), 2 * heads * d, d, qkd.f() + heads * d, 2 * heads * d, d, 0.0F,
                   sd.f(), t, static_cast<std::int64_t>(t) * t, heads);
  CHECK(relative(back(dev, sd, want.size()), want) < 1e-5);
}

TEST_CASE("the CUDA device's fused bias, rounding and GELU equal the unfused calls", "[cuda][device]") {
  exec::CudaDevice dev;
  const int n = 301, c = 97;
  const auto count = static_cast<std::size_t>(n) * c;
  const auto pre = random_values(count, 7, -1.0F, 1.0F);
  const auto bias = random_values(static_cast<std::size_t>(c), 8, -1.0F, 1.0F);
  for (const scenario::Dtype dtype : {scenario::Dtype::fp32, scenario::Dtype::bf16, scenario::Dtype::fp16}) {
    INFO(topology::to_string(dtype));
    const exec::Buffer p1 = on(dev, pre), p2 = on(dev, pre), b = on(dev, bias);
    const exec::Buffer a1 = dev.allocate_floats(count), a2 = dev.allocate_floats(count);
    dev.add_bias(p1.f(), b.f(), n, c);
    dev.round_to(dtype, p1.f(), static_cast<std::int64_t>(count));
    dev.gelu_forward(a1.f(), p1.f(), static_cast<std::int64_t>(count));
    dev.round_to(dtype, a1.f(), static_cast<std::int64_t>(count));
    dev.bias_gelu_forward(p2.f(), a2.f(), b.f(), n, c, dtype);
    CHECK(relative(back(dev, p2, count), back(dev, p1, count)) < 1e-6);
    CHECK(relative(back(dev, a2, count), back(dev, a1, count)) < 1e-6);
  }
}

TEST_CASE("the CUDA device's FP8 casts, current and delayed, equal the CPU device's", "[cuda][device][fp8]") {
  exec::CudaDevice dev;
  exec::CpuDevice host;
  const auto x = random_values(10007, 9, -3.0F, 3.0F);
  for (const bool e5m2 : {false, true}) {
    std::vector<float> want(x.size());
    host.fake_quantize_fp8(want.data(), x.data(), static_cast<std::int64_t>(x.size()), e5m2);
    const exec::Buffer xd = on(dev, x), yd = dev.allocate_floats(x.size());
    dev.fake_quantize_fp8(yd.f(), xd.f(), static_cast<std::int64_t>(x.size()), e5m2);
    CHECK(back(dev, yd, x.size()) == want);
    // Delayed: a given scale (saturating past the format's largest value), the amax kept.
    float amax = 0.5F;
    host.fake_quantize_fp8_scaled(want.data(), x.data(), static_cast<std::int64_t>(x.size()), e5m2, 200.0F, &amax);
    const exec::Buffer ad = on(dev, {0.5F});
    dev.fake_quantize_fp8_scaled(yd.f(), xd.f(), static_cast<std::int64_t>(x.size()), e5m2, 200.0F, ad.f());
    CHECK(back(dev, yd, x.size()) == want);
    CHECK(back(dev, ad, 1)[0] == amax);
  }
}

TEST_CASE("FP8 GEMMs on tensor cores multiply the fake-quantized operands exactly, in every transpose form",
          "[cuda][device][fp8]") {
  // The operands as the shard hands them: fake-quantized (current scaling for the input
  // and the weight, a given scale for the E5M2 gradient). On a GPU with FP8 tensor cores
  // (compute capability 8.9 and up) cuBLASLt's FP8 matmul runs; the products of FP8 values
  // are exact, so only the fp32 sums' order and (forward) Hopper's fast accumulation differ
  // from the host's double sums.
  exec::CudaDevice dev;
  dev.set_gemm_precision(scenario::Dtype::fp8);
  const int m = 64, n = 96, k = 128;
  for (const bool gradient : {false, true}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        INFO("gradient " << gradient << " trans_a " << ta << " trans_b " << tb);
        const auto a = random_values(static_cast<std::size_t>(m) * k, 21, -2.0F, 2.0F);
        const auto b = random_values(static_cast<std::size_t>(k) * n, 22, -0.05F, 0.05F);
        const exec::Buffer ad = on(dev, a), bd = on(dev, b);
        const exec::Buffer qa = dev.allocate_floats(a.size()), qb = dev.allocate_floats(b.size());
        dev.fake_quantize_fp8(qa.f(), ad.f(), static_cast<std::int64_t>(a.size()), false);
        if (gradient) {
          const exec::Buffer amax = on(dev, {0.0F});
          dev.fake_quantize_fp8_scaled(qb.f(), bd.f(), static_cast<std::int64_t>(b.size()), true, 1000.0F, amax.f());
        } else {
          dev.fake_quantize_fp8(qb.f(), bd.f(), static_cast<std::int64_t>(b.size()), false);
        }
        const std::vector<float> ha = back(dev, qa, a.size()), hb = back(dev, qb, b.size());
        std::vector<float> want(static_cast<std::size_t>(m) * n, 0.5F);
        const exec::Buffer cd = on(dev, want);
        exec::kernels::gemm<float>(ta, tb, m, n, k, 1.0F, ha.data(), hb.data(), 1.0F, want.data());
        const std::int64_t before = dev.fp8_gemms();
        dev.gemm(ta, tb, m, n, k, 1.0F, qa.f(), ta ? m : k, qb.f(), tb ? k : n, 1.0F, cd.f(), n);
        CHECK(dev.fp8_gemms() == before + (dev.fp8_tensor_cores() ? 1 : 0));
        CHECK(dev.fp8_fallbacks() == 0);
        CHECK(relative(back(dev, cd, want.size()), want) < (gradient ? 1e-5 : 1e-3));
        // Quantized again with other values, the same buffer's codes are cast again.
        const auto a2 = random_values(a.size(), 23, -1.0F, 1.0F);
        dev.upload(ad.f(), a2.data(), a2.size() * sizeof(float));
        dev.fake_quantize_fp8(qa.f(), ad.f(), static_cast<std::int64_t>(a2.size()), false);
        const std::vector<float> ha2 = back(dev, qa, a2.size());
        std::vector<float> want2(want.size(), 0.0F);
        exec::kernels::gemm<float>(ta, tb, m, n, k, 1.0F, ha2.data(), hb.data(), 0.0F, want2.data());
        dev.gemm(ta, tb, m, n, k, 1.0F, qa.f(), ta ? m : k, qb.f(), tb ? k : n, 0.0F, cd.f(), n);
        CHECK(relative(back(dev, cd, want2.size()), want2) < (gradient ? 1e-5 : 1e-3));
      }
    }
  }
}

TEST_CASE("an FP8 GEMM into a matrix inside a buffer runs or falls back, never ends the run", "[cuda][device][fp8]") {
  // The output starts 16 bytes into its buffer (as a slice of a larger tensor would):
  // cuBLASLt is told that alignment, so it either picks a kernel that takes it or refuses,
  // and a refusal runs the GEMM on bf16 tensor cores, counted. Either way the product is right.
  exec::CudaDevice dev;
  dev.set_gemm_precision(scenario::Dtype::fp8);
  const int m = 32, n = 48, k = 64;
  const auto a = random_values(static_cast<std::size_t>(m) * k, 31, -1.0F, 1.0F);
  const auto b = random_values(static_cast<std::size_t>(k) * n, 32, -1.0F, 1.0F);
  const exec::Buffer ad = on(dev, a), bd = on(dev, b);
  const exec::Buffer qa = dev.allocate_floats(a.size()), qb = dev.allocate_floats(b.size());
  dev.fake_quantize_fp8(qa.f(), ad.f(), static_cast<std::int64_t>(a.size()), false);
  dev.fake_quantize_fp8(qb.f(), bd.f(), static_cast<std::int64_t>(b.size()), false);
  const std::vector<float> ha = back(dev, qa, a.size()), hb = back(dev, qb, b.size());
  std::vector<float> want(static_cast<std::size_t>(m) * n, 0.0F);
  exec::kernels::gemm<float>(false, false, m, n, k, 1.0F, ha.data(), hb.data(), 0.0F, want.data());
  const exec::Buffer out = dev.zeroed_floats(want.size() + 4);
  const std::int64_t before = dev.fp8_gemms() + dev.fp8_fallbacks();
  REQUIRE_NOTHROW(dev.gemm(false, false, m, n, k, 1.0F, qa.f(), k, qb.f(), n, 0.0F, out.f() + 4, n));
  if (dev.fp8_tensor_cores()) CHECK(dev.fp8_gemms() + dev.fp8_fallbacks() == before + 1);
  std::vector<float> got = back(dev, out, want.size() + 4);
  got.erase(got.begin(), got.begin() + 4);
  CHECK(relative(got, want) < 1e-3);
}

TEST_CASE("operands quantized inside one buffer leave no FP8 codes behind when it is released", "[cuda][device][fp8]") {
  // calibrate's way: copies quantized at offsets inside one buffer, each multiplied (its
  // codes cast and kept). The buffer's release drops every copy's tag and codes, so the
  // memory in use returns to where it was (before, only the copy at the start went).
  exec::CudaDevice dev;
  dev.set_gemm_precision(scenario::Dtype::fp8);
  const int m = 64, n = 64, k = 64, copies = 4;
  const exec::Buffer b = on(dev, random_values(static_cast<std::size_t>(k) * n, 33, -1.0F, 1.0F));
  dev.fake_quantize_fp8(b.f(), b.f(), static_cast<std::int64_t>(k) * n, false);
  const exec::Buffer c = dev.zeroed_floats(static_cast<std::size_t>(m) * n);
  // One product first, so that b's codes (kept while b lives) are counted in the base.
  const exec::Buffer a0 = on(dev, random_values(static_cast<std::size_t>(m) * k, 35, -1.0F, 1.0F));
  dev.fake_quantize_fp8(a0.f(), a0.f(), static_cast<std::int64_t>(m) * k, false);
  dev.gemm(false, false, m, n, k, 1.0F, a0.f(), k, b.f(), n, 0.0F, c.f(), n);
  const std::size_t base = dev.in_use();
  {
    const std::size_t each = static_cast<std::size_t>(m) * k;
    const exec::Buffer a = on(dev, random_values(each * copies, 34, -1.0F, 1.0F));
    for (int i = 0; i < copies; ++i) {
      float* at = a.f() + static_cast<std::size_t>(i) * each;
      dev.fake_quantize_fp8(at, at, static_cast<std::int64_t>(each), false);
      dev.gemm(false, false, m, n, k, 1.0F, at, k, b.f(), n, 0.0F, c.f(), n);
    }
    dev.synchronize();
  }
  CHECK(dev.in_use() == base);
}

TEST_CASE("one-rank NCCL collectives complete and leave the data as it is (an all-to-all copies it)", "[cuda][device][nccl]") {
  exec::CudaDevice dev;
  const std::vector<int> me{0};
  const exec::Comm comm = dev.comm_create(me, 0);
  const auto v = random_values(1000, 4, -1.0F, 1.0F);
  const exec::Buffer b = on(dev, v);
  dev.wait(dev.all_reduce(b.f(), 1000, comm));
  const std::vector<std::int64_t> whole{1000};
  dev.wait(dev.reduce_scatter(b.f(), whole, comm));
  dev.wait(dev.all_gather(b.f(), whole, comm));
  CHECK(back(dev, b, v.size()) == v);
  // An all-to-all with itself: its block copied across.
  const exec::Buffer c = dev.allocate_floats(v.size());
  dev.wait(dev.all_to_all(b.f(), whole, c.f(), whole, comm));
  CHECK(back(dev, c, v.size()) == v);
}

namespace {

// The tiny GPT of the executor tests on one GPU, in `precision` (the YAML after the key), trained 4 measured steps
// (after 2 of warm-up) on the CPU and on the GPU: the losses step by step agree to
// `epsilon`, relatively (GEMMs and reductions sum in other orders).
exec::Measurement train_on_both(exec::CudaDevice& gpu, const std::string& precision, double epsilon,
                                const std::string& attention = "naive") {
  const scenario::Scenario s = scenario::load_text(
      "cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 1}\n"
      "model: {layers: 2, hidden: 64, heads: 4, vocab: 128, seq_len: 32}\n"
      "training: {global_batch: 8, micro_batch: 2, precision: " +
          precision + ", attention: " + attention +
          "}\n"
          "plan: {dp: 1}\nrun: {steps: 4, warmup: 2, seed: 7}\n",
      "one-gpu.yaml");
  exec::RunOptions options;
  options.steps = 4;
  options.warmup = 2;
  exec::CpuDevice cpu;
  const exec::Measurement want = exec::execute(s, cpu, options);
  exec::Measurement got = exec::execute(s, gpu, options);
  REQUIRE(got.steps.size() == want.steps.size());
  for (std::size_t i = 0; i < got.steps.size(); ++i) {
    INFO(precision << " step " << i << ": cuda " << got.steps[i].loss << ", cpu " << want.steps[i].loss);
    CHECK(got.steps[i].loss == Approx(want.steps[i].loss).epsilon(epsilon));
  }
  return got;
}

}  // namespace

TEST_CASE("the CUDA executor on one GPU trains as the CPU executor does", "[cuda][device][executor]") {
  // fp32 on both (cuBLAS's GEMMs in true fp32), 6 steps of AdamW: the same losses to about
  // 4 digits.
  exec::CudaDevice gpu;
  const exec::Measurement got = train_on_both(gpu, "fp32", 2e-4);
  CHECK(got.steps.back().loss < got.steps.front().loss);  // it learns
  CHECK(got.peak_memory.at(0) > 0.0);
}

TEST_CASE("the CUDA executor in fp8 multiplies on FP8 tensor cores and trains as the CPU executor's emulation",
          "[cuda][device][executor][fp8]") {
  // The linear layers' GEMMs take the same FP8 values on both (current scaling: the CPU
  // multiplies them in fp32, the GPU on FP8 tensor cores where it has them); hidden 64 and
  // MLP 256 keep every GEMM's inner size a multiple of 16, as cuBLASLt's FP8 needs.
  exec::CudaDevice gpu;
  train_on_both(gpu, "fp8, fp8_recipe: current", 2e-3);
  if (gpu.fp8_tensor_cores()) CHECK(gpu.fp8_gemms() > 0);
  CHECK(gpu.fp8_fallbacks() == 0);
}
TEST_CASE("the CUDA executor's fused attention in bf16 runs on tensor cores and trains as the CPU executor does",
          "[cuda][device][executor][flash]") {
  // Head size 16: the tensor-core kernels, whose P and dS are rounded to bf16 as
  // FlashAttention-2 rounds them (the CPU's fused attention keeps them fp32), so the losses
  // agree to bf16's rounding rather than to fp32's.
  exec::CudaDevice gpu;
  const exec::Measurement got = train_on_both(gpu, "bf16", 5e-3, "flash");
  int dev = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (major >= 8) {
    CHECK(gpu.attention_tensor_cores() > 0);
    CHECK(gpu.attention_cuda_cores() == 0);
    CHECK(got.kernel_paths.find("on tensor cores") != std::string::npos);
  }
}
#endif
