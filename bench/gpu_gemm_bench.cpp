// GEMM rates on one GPU at the shapes of a transformer layer, against the device preset's
// datasheet peak: for each hidden size h (2048 to 12288) and 8192 tokens, the layer's four
// GEMMs (QKV: tokens x 3h x h, projection: tokens x h x h, MLP up: tokens x 4h x h, MLP
// down: tokens x h x 4h), each in
//   * native 16-bit storage: bf16 / fp16 operands and output, fp32 accumulation (what a
//     framework with 16-bit tensors runs; the figure the issue's 70 % target is about);
//   * the executor's call: fp32 operands and output, cuBLAS allowed to down-convert them
//     (CUBLAS_COMPUTE_32F_FAST_16BF / _16F / _TF32) — what CudaDevice::gemm runs;
//   * fp32 (CUBLAS_COMPUTE_32F), for reference.
// Operands hold random values in [-1, 1] (all-zero operands run 10 to 15 % fast: the
// tensor cores draw less power). Each: 3 untimed calls, then the mean of `--reps` calls
// between CUDA events.
// Usage: parasim_gpu_gemm_bench [--device PRESET] [--tokens N] [--reps N] [--json]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <cstdlib>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "exec/cuda/cuda_device.hpp"
#include "scenario/load.hpp"

using namespace parasim;

namespace {

// 16-bit patterns of a float in [-1, 1] (normal or zero; no rounding needed for a benchmark).
std::uint16_t bf16_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}
std::uint16_t fp16_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000U;
  const int exponent = static_cast<int>((u >> 23) & 0xffU) - 127 + 15;
  if (exponent <= 0) return static_cast<std::uint16_t>(sign);
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exponent) << 10) | ((u >> 13) & 0x3ffU));
}

// Fills `bytes` of device memory with random values of type `t`: a 16 MiB host block,
// copied over and over.
void fill_random(void* dst, std::size_t bytes, cudaDataType t, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  std::vector<std::uint8_t> block(std::min<std::size_t>(bytes, std::size_t{16} << 20));
  for (std::size_t i = 0; i + 4 <= block.size(); i += t == CUDA_R_32F ? 4 : 2) {
    const float v = u(gen);
    if (t == CUDA_R_32F) {
      std::memcpy(&block[i], &v, 4);
    } else {
      const std::uint16_t h = t == CUDA_R_16BF ? bf16_bits(v) : fp16_bits(v);
      std::memcpy(&block[i], &h, 2);
    }
  }
  auto* out = static_cast<std::uint8_t*>(dst);
  for (std::size_t at = 0; at < bytes; at += block.size()) {
    const std::size_t n = std::min(block.size(), bytes - at);
    if (cudaMemcpy(out + at, block.data(), n, cudaMemcpyHostToDevice) != cudaSuccess) {
      std::fprintf(stderr, "error: filling the operands failed\n");
      std::exit(1);
    }
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "error: cuBLAS %s: status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

// The device preset for a CUDA device name, or "" when none matches.
std::string preset_for(const std::string& name) {
  if (name.find("H200") != std::string::npos) return "h200";
  if (name.find("H100") != std::string::npos) return "h100-sxm";
  if (name.find("A100") != std::string::npos) return "a100-80gb";
  if (name.find("L40S") != std::string::npos) return "l40s";
  return "";
}

struct Path {
  const char* name;
  scenario::Dtype dtype;  // the peak it is measured against
  cudaDataType store;   // operand and output type
  cublasComputeType_t compute;
};

}  // namespace

int main(int argc, char** argv) {
  std::string device;
  int tokens = 8192, reps = 20;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--tokens" && i + 1 < argc) tokens = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr, "usage: parasim_gpu_gemm_bench [--device PRESET] [--tokens N] [--reps N] [--json]\n");
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no usable GPU: nothing to measure\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  if (device.empty()) device = preset_for(prop.name);
  if (device.empty()) {
    std::fprintf(stderr, "error: no device preset for '%s'; name one with --device\n", prop.name);
    return 2;
  }
  const std::vector<std::string> sets{"cluster.device=" + device};
  const scenario::Scenario s = scenario::load_text(
      "cluster: {preset: dgx-h100, nodes: 1}\nmodel: {layers: 1, hidden: 64, heads: 1, vocab: 64, seq_len: 16}\n"
      "training: {global_batch: 8}\n",
      "gpu_gemm_bench", sets);
  const topology::DeviceSpec& spec = s.cluster.device;

  const std::vector<Path> paths{
      {"bf16 native", scenario::Dtype::bf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F},
      {"fp16 native", scenario::Dtype::fp16, CUDA_R_16F, CUBLAS_COMPUTE_32F},
      {"bf16 executor", scenario::Dtype::bf16, CUDA_R_32F, exec::gemm_compute_type(scenario::Dtype::bf16)},
      {"fp16 executor", scenario::Dtype::fp16, CUDA_R_32F, exec::gemm_compute_type(scenario::Dtype::fp16)},
      {"tf32 executor", scenario::Dtype::tf32, CUDA_R_32F, exec::gemm_compute_type(scenario::Dtype::tf32)},
      {"fp32", scenario::Dtype::fp32, CUDA_R_32F, exec::gemm_compute_type(scenario::Dtype::fp32)},
  };
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "create");
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  if (!json) {
    fmt::print("{} ({}): GEMMs of a transformer layer, {} tokens; % of the preset's dense peak\n", prop.name, device,
               tokens);
    fmt::print("{:<14} {:>6} {:<10} {:>22} {:>12} {:>8}\n", "path", "hidden", "gemm", "m x n x k", "TFLOP/s", "of peak");
  }
  for (const int hidden : {2048, 4096, 5120, 8192, 12288}) {
    const int m = tokens;
    const std::vector<std::pair<const char*, std::array<int, 2>>> gemms{
        {"qkv", {3 * hidden, hidden}}, {"proj", {hidden, hidden}}, {"mlp-up", {4 * hidden, hidden}}, {"mlp-down", {hidden, 4 * hidden}}};
    for (const Path& p : paths) {
      const std::size_t elem = p.store == CUDA_R_32F ? 4 : 2;
      for (const auto& [what, nk] : gemms) {
        const int n = nk[0], k = nk[1];
        void *a = nullptr, *b = nullptr, *c = nullptr;
        check(cudaMalloc(&a, elem * m * static_cast<std::size_t>(k)), "malloc");
        check(cudaMalloc(&b, elem * k * static_cast<std::size_t>(n)), "malloc");
        check(cudaMalloc(&c, elem * m * static_cast<std::size_t>(n)), "malloc");
        fill_random(a, elem * m * static_cast<std::size_t>(k), p.store, 1);
        fill_random(b, elem * k * static_cast<std::size_t>(n), p.store, 2);
        const float one = 1.0F, zero = 0.0F;
        // Row-major C[m x n] = A[m x k] B[k x n], as the executor's forward GEMMs.
        const exec::ColumnMajorGemm g = exec::column_major(false, false, m, n, k);
        auto call = [&] {
          check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, g.rows, g.cols, g.inner, &one, b, p.store, n, a, p.store, k,
                             &zero, c, p.store, n, p.compute, CUBLAS_GEMM_DEFAULT),
                "gemm");
        };
        for (int i = 0; i < 3; ++i) call();
        check(cudaEventRecord(e0), "record");
        for (int i = 0; i < reps; ++i) call();
        check(cudaEventRecord(e1), "record");
        check(cudaEventSynchronize(e1), "synchronize");
        float ms = 0.0F;
        check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        const double secs = static_cast<double>(ms) * 1e-3 / reps;
        const double rate = 2.0 * m * static_cast<double>(n) * k / secs;
        const double peak = spec.peak(p.dtype);
        if (json) {
          fmt::print(R"({{"device":"{}","preset":"{}","path":"{}","hidden":{},"gemm":"{}","m":{},"n":{},"k":{},"seconds":{:.6g},"flop_rate":{:.6g},"of_peak":{:.4f}}})"
                     "\n",
                     prop.name, device, p.name, hidden, what, m, n, k, secs, rate, rate / peak);
        } else {
          fmt::print("{:<14} {:>6} {:<10} {:>22} {:>12.1f} {:>7.1f}%\n", p.name, hidden, what,
                     fmt::format("{} x {} x {}", m, n, k), rate / 1e12, 100.0 * rate / peak);
        }
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
      }
    }
  }
  cublasDestroy(h);
  return 0;
}
