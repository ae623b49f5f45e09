// The kernel-level compute model (sim/compute_model.hpp) on hand-computed cases: GEMM
// tiles in waves, the L2 cap on small tiles, and the host issuing kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "sim/compute_model.hpp"
#include "sim/simulate.hpp"

using namespace parasim;

namespace {

// 4 SMs of 1 TFLOP/s in all, main loops at the full rate, memory never the limit.
sim::DeviceProfile four_sms(double l2_bandwidth = 0.0) {
  sim::DeviceProfile p;
  p.peak = {1e12, 1e12, 1e12, 1e12};
  p.memory_bandwidth = 1e30;
  p.kernels.sms = 4;
  p.kernels.gemm_efficiency = 1.0;
  p.kernels.l2_bandwidth = l2_bandwidth;
  return p;
}

double gemm(const sim::DeviceProfile& p, long long m, long long n, long long k) {
  const workload::Kernel g{workload::KernelKind::gemm, "g", m, n, k, 1, 2, 0, 0.0, false};
  return sim::kernel_work_seconds(p, g, topology::Dtype::bf16);
}

// Two generic layers on one device with a kernel model so fast that only its host counts.
const char* const tiny_kernels = R"(cluster:
  gpus_per_node: 1
  device:
    peak: {fp32: 1000 PFLOPS}
    memory: 80GiB
    memory_bandwidth: 1000 PB/s
    kernels: {sms: 100, gemm_efficiency: 1, l2_bandwidth: 1000 PB/s, memory_efficiency: 1}
    host: {forward: 100us, backward: 50us}
  intra_node: {fabric: nvswitch, bandwidth: 100 GB/s}
model:
  layers:
    - {name: a, params: 1e4, forward_flops: 1e6, activations: 10}
    - {name: b, params: 1e4, forward_flops: 1e6, activations: 10}
training: {global_batch: 1, micro_batch: 1, precision: fp32}
plan: {dp: 1}
)";

}  // namespace

TEST_CASE("a GEMM that fills the SMs runs at the peak, one that does not pays for its last wave", "[sim][kernels]") {
  const sim::DeviceProfile p = four_sms();
  const double K = 1024;
  // 256 x 256: four 128 x 128 tiles, one wave on 4 SMs: exactly its FLOPs at the peak.
  CHECK(gemm(p, 256, 256, 1024) == Approx(2.0 * 256 * 256 * K / 1e12));
  // 320 x 320: no tile shape divides it. 64 x 64 tiles are best: 25 tiles in 7 waves of 4,
  // each tile 2 x 64 x 64 x K FLOPs at a quarter of the device: 12 % over the ideal.
  const double wave = 2.0 * 64 * 64 * K / (1e12 / 4);
  CHECK(gemm(p, 320, 320, 1024) == Approx(7 * wave));
  CHECK(gemm(p, 320, 320, 1024) / (2.0 * 320 * 320 * K / 1e12) == Approx(1.12));
}

TEST_CASE("tiles too small to reuse their operands are held back by the L2", "[sim][kernels]") {
  // Ridge at 64 FLOP per byte: 128 x 128 tiles in 16 bits (64 FLOP/B) run at full rate,
  // 128 x 64 (42.7) at two thirds, 64 x 64 (32) at half. For 320 x 320 the best is then three
  // waves of 128 x 128 tiles (or four of 128 x 64 at 2/3 the rate: the same).
  const sim::DeviceProfile p = four_sms(1e12 / 64);
  const double K = 1024;
  CHECK(gemm(p, 320, 320, 1024) == Approx(3 * 2.0 * 128 * 128 * K / (1e12 / 4)));
}

TEST_CASE("the host issues kernels one after another, a long kernel lets it run ahead", "[sim][kernels]") {
  // Device times 10, 1, 1, 1 us; one issued every 5 us from t = 0: the first ends at 10;
  // the second and third were issued by then (5, 10) and end at 11 and 12; the fourth is
  // issued at 15 and ends at 16.
  CHECK(sim::kernels_seconds(std::vector<double>{10e-6, 1e-6, 1e-6, 1e-6}, 0.0, 5e-6) == Approx(16e-6));
  // Host-bound: 1 us kernels issued every 5 us from 5 us end at 6, 11, 16.
  CHECK(sim::kernels_seconds(std::vector<double>{1e-6, 1e-6, 1e-6}, 5e-6, 5e-6) == Approx(16e-6));
  // Issued long ago: the device's own time.
  CHECK(sim::kernels_seconds(std::vector<double>{1e-6, 1e-6, 1e-6}, -1.0, 5e-6) == Approx(3e-6));
}

TEST_CASE("a step of tiny kernels takes what the host needs to issue them", "[sim][kernels][host]") {
  // One device with a kernel model so fast that only the host counts: 2 generic layers,
  // one micro-batch, fp32. Forward: 2 layers x 2 kernels at 100 us; backward 2 x 3 at
  // 50 us; after the gradients the host issues the optimizer's 3 kernels (norm, AdamW,
  // zeroing) at 100 us: 400 + 300 + 300 = 1 ms.
  const scenario::Scenario s = scenario::load_text(tiny_kernels, "host.yaml");
  const sim::Prediction p = sim::predict(s);
  CHECK(p.trace.step_seconds() == Approx(1e-3).epsilon(1e-3));
  // Without host costs the same step is the device's, microseconds.
  const scenario::Scenario fast = scenario::load_text(
      tiny_kernels, "host.yaml",
      std::vector<std::string>{"cluster.device.host.forward=0us", "cluster.device.host.backward=0us"});
  CHECK(sim::predict(fast).trace.step_seconds() < 1e-5);
}

TEST_CASE("the host issues a gradient bucket's all-reduce from the backward, once its layer is done",
          "[sim][kernels][host][dp]") {
  // dp 2 on the host-bound device above, a bucket per layer over a slow link, each
  // torch.distributed call costing the host 40 us. Forward: 4 kernels to 400 us; layer b's
  // backward kernels issued at 450, 500 and 550 us; its bucket's all-reduce then, at
  // 550 + 40 = 590 us, as the gradient hook issues it (not after layer a's backward, at
  // 740 + 40 us). Layer a's bucket follows it on the dp stream; the host waits for both
  // before it issues the optimizer's 3 kernels at 100 us each.
  const sim::Prediction p = sim::predict(
      scenario::load_text(tiny_kernels, "hooks.yaml",
                          std::vector<std::string>{"cluster.gpus_per_node=2", "cluster.device.host.communication=40us",
                                                   "cluster.intra_node.bandwidth=0.1 GB/s", "cluster.collectives=mpi",
                                                   "training.global_batch=2", "plan.dp=2", "plan.collective=ring",
                                                   "plan.bucket_size=40KB"}));
  std::vector<const report::Span*> buckets;  // L1, L0, then the empty input's
  for (const report::Span& sp : p.trace.spans) {
    if (sp.rank == 0 && sp.category == program::Category::dp_comm) buckets.push_back(&sp);
  }
  std::sort(buckets.begin(), buckets.end(), [](const auto* a, const auto* b) { return a->start < b->start; });
  REQUIRE(buckets.size() == 3);
  const double first = static_cast<double>(buckets[0]->start) * 1e-12;
  const double all_reduce = buckets[0]->seconds();
  CHECK(first == Approx(590e-6).epsilon(1e-4));
  CHECK(all_reduce > 200e-6);  // longer than layer a's backward and the call: back to back
  CHECK(buckets[1]->start == buckets[0]->end);
  CHECK(buckets[1]->seconds() == Approx(all_reduce));
  // The host waits for the last bucket, then issues the optimizer.
  CHECK(p.trace.step_seconds() == Approx(static_cast<double>(buckets[2]->end) * 1e-12 + 300e-6).epsilon(1e-4));
}

TEST_CASE("a power cap slows compute by the cube root of the cap over the board's limit", "[sim][kernels][power]") {
  // An A100 (400 W) capped at 200 W: the clock falls to (200 / 400)^(1/3) = 0.794 of its own,
  // so a large GEMM takes 1 / 0.794 = 1.26 times as long; a memory-bound kernel, nothing more.
  const char* yaml = "cluster: {preset: dgx-a100, nodes: 1}\nmodel: {layers: 2, hidden: 1024, heads: 16, vocab: 51200, seq_len: 1024}\n"
                     "training: {global_batch: 8}\n";
  const scenario::Scenario full = scenario::load_text(yaml, "a.yaml");
  scenario::Scenario capped = full;
  capped.cluster.device.power_limit = 200.0;
  REQUIRE(full.cluster.device.tdp == 400.0);
  CHECK(capped.cluster.device.clock_factor() == Approx(std::cbrt(0.5)));
  const sim::DeviceProfile a = sim::default_profile(full.cluster.device), b = sim::default_profile(capped.cluster.device);
  const workload::Kernel g{workload::KernelKind::gemm, "g", 8192, 8192, 8192, 1, 2, 0, 0.0, false};
  CHECK(sim::kernel_work_seconds(b, g, topology::Dtype::bf16) / sim::kernel_work_seconds(a, g, topology::Dtype::bf16) ==
        Approx(1.0 / std::cbrt(0.5)).epsilon(1e-9));
  workload::Kernel copy{workload::KernelKind::memory, "copy", 0, 0, 0, 1, 2, 0, 1e9, false};
  CHECK(sim::kernel_work_seconds(b, copy, topology::Dtype::bf16) == sim::kernel_work_seconds(a, copy, topology::Dtype::bf16));
  // Above the board's own limit nothing changes.
  capped.cluster.device.power_limit = 500.0;
  CHECK(capped.cluster.device.clock_factor() == 1.0);
}

TEST_CASE("FlashAttention-2 on an H100 runs at its own rates, on an A100 at the fused kernel's",
          "[sim][kernels][attention]") {
  // A flash kernel that fills the SMs (132 x 128 query rows, 4 heads' batches): its time is
  // its FLOPs over peak x the generation's fraction. H100: cuDNN's 0.5 / 0.4, FlashAttention-2
  // 0.33 / 0.25 (pytorch/pytorch#142132), so 0.5 / 0.33 and 0.4 / 0.25 the time; on an A100
  // FlashAttention-2 is the fused kernel, so the same.
  const char* h100 = "cluster: {preset: dgx-h100, nodes: 1}\nmodel: {layers: 2, hidden: 1024, heads: 16, vocab: 51200, "
                     "seq_len: 1024}\ntraining: {global_batch: 8}\n";
  const scenario::Scenario s = scenario::load_text(h100, "h.yaml");
  const sim::DeviceProfile p = sim::default_profile(s.cluster.device);
  REQUIRE(p.kernels.flash_v2_forward == 0.33);
  REQUIRE(p.kernels.flash_v2_backward == 0.25);
  for (const auto kind : {workload::KernelKind::flash_forward, workload::KernelKind::flash_backward}) {
    workload::Kernel k{kind, "flash", 132 * 128, 132 * 128, 128, 4, 2, 0, 0.0, true};
    const double fused = sim::kernel_work_seconds(p, k, topology::Dtype::bf16);
    k.v2 = true;
    const double v2 = sim::kernel_work_seconds(p, k, topology::Dtype::bf16);
    const bool forward = kind == workload::KernelKind::flash_forward;
    CHECK(v2 / fused == Approx(forward ? 0.5 / 0.33 : 0.4 / 0.25));
  }
  const scenario::Scenario a100 = scenario::load_text(std::string(h100).replace(std::string(h100).find("dgx-h100"), 8, "dgx-a100"), "a.yaml");
  CHECK(a100.cluster.device.kernels.flash_v2_forward == a100.cluster.device.kernels.flash_forward);
  CHECK(a100.cluster.device.kernels.flash_v2_backward == a100.cluster.device.kernels.flash_backward);
}
