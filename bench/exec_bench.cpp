// Executor overhead on the CPU backend, one process (no mpirun needed):
//   1. GEMM: Device::gemm against cblas_sgemm called directly, at the GEMM shapes of a
//      small GPT layer (what the CPU executor runs), best of several repetitions.
//   2. Runner: a step of a deep, narrow GPT (many ops, little work each) on one rank; the
//      runner's cost per op is the step's wall time not covered by any op's span, divided
//      by the number of ops.
// Usage: parasim_exec_bench [--layers N]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/runner.hpp"
#include "exec/shard.hpp"
#include "scenario/load.hpp"

using namespace parasim;

namespace {

double seconds_of(auto&& f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 48;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0) layers = std::stoi(argv[i + 1]);
  }
  exec::CpuDevice dev;

  std::printf("GEMM through the CPU backend against OpenBLAS directly (fp32, one thread, best of repeated runs)\n");
  std::printf("%-28s %12s %12s %8s\n", "shape m x n x k", "backend", "OpenBLAS", "ratio");
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{256, 384, 128}, Shape{256, 512, 128}, Shape{256, 128, 512}, Shape{1024, 1024, 1024},
                        Shape{2048, 2048, 2048}}) {
    std::vector<float> a(static_cast<std::size_t>(s.m) * s.k, 0.5F), b(static_cast<std::size_t>(s.k) * s.n, 0.25F),
        c(static_cast<std::size_t>(s.m) * s.n);
    const int reps = s.m >= 1024 ? 5 : 200;
    const double flops = 2.0 * s.m * s.n * s.k * (s.m >= 1024 ? 1 : 20);
    const int inner = s.m >= 1024 ? 1 : 20;
    const double t_dev = seconds_of([&] {
      for (int i = 0; i < inner; ++i) dev.gemm(false, false, s.m, s.n, s.k, 1.0F, a.data(), s.k, b.data(), s.n, 0.0F, c.data(), s.n);
    }, reps);
    const double t_blas = seconds_of([&] {
      for (int i = 0; i < inner; ++i) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0F, a.data(), s.k, b.data(), s.n, 0.0F,
                    c.data(), s.n);
      }
    }, reps);
    std::printf("%-28s %9.1f GF/s %9.1f GF/s %7.1f %%\n",
                (std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k)).c_str(),
                flops / t_dev * 1e-9, flops / t_blas * 1e-9, 100.0 * t_blas / t_dev);
  }

  const std::string text = "cluster: {preset: cpu-host, gpus_per_node: 1}\nmodel: {layers: " + std::to_string(layers) +
                           ", hidden: 8, heads: 2, vocab: 16, seq_len: 4}\ntraining: {global_batch: 8, micro_batch: 1, "
                           "precision: fp32}\nplan: {dp: 1}\n";
  const scenario::Scenario s = scenario::load_text(text, "bench.yaml");
  const program::Program prog = program::compile(s);
  const auto shard = exec::make_shard(dev, s, 0);
  exec::Runner runner(dev, s, prog, *shard);
  dev.align_clock();
  double best_gap = 1e30, best_step = 0;
  std::size_t ops = 0;
  for (int i = 0; i < 20; ++i) {
    const exec::StepTiming t = runner.step(i);
    std::int64_t covered = 0;
    for (const auto& sp : t.spans) covered += sp.end_ns - sp.start_ns;
    const double gap = static_cast<double>(t.end_ns - t.start_ns - covered) * 1e-9;
    if (gap < best_gap) {
      best_gap = gap;
      best_step = static_cast<double>(t.end_ns - t.start_ns) * 1e-9;
    }
    ops = t.spans.size();
  }
  std::printf("\nrunner: GPT of %d layers, hidden 8, 8 micro-batches, one rank: %zu ops per step\n", layers, ops);
  std::printf("step %.3f ms, of which outside any op %.3f ms: %.2f us per op (best of 20 steps)\n", best_step * 1e3,
              best_gap * 1e3, best_gap / static_cast<double>(ops) * 1e6);
  return 0;
}
