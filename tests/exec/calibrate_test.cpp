// Fitting a device profile to measurements, on hand-made measurements whose fit is worked
// out by hand, and nccl-tests' bus-bandwidth factors.
#include <catch2/catch.hpp>

#include "exec/calibrate.hpp"

using namespace parasim::exec;

TEST_CASE("bus bandwidth factors are nccl-tests'", "[exec][calibrate]") {
  CHECK(bus_factor("all-reduce", 2) == 1.0);
  CHECK(bus_factor("all-reduce", 8) == 1.75);
  CHECK(bus_factor("reduce-scatter", 4) == 0.75);
  CHECK(bus_factor("all-gather", 2) == 0.5);
  CHECK(bus_factor("send/recv", 2) == 1.0);
  CHECK_THROWS_WITH(bus_factor("broadcast", 2), Catch::Contains("no bus bandwidth factor for 'broadcast'"));
  const CommSample s{"all-reduce", 4, 8e6, 2e-3};
  CHECK(s.algbw() == Approx(4e9));
  CHECK(s.busbw() == Approx(6e9));  // 4 GB/s x 2 (4-1)/4
}

TEST_CASE("GEMMs measured in several dtypes: a peak each, efficiency against each dtype's own peak",
          "[exec][calibrate]") {
  using parasim::scenario::Dtype;
  auto gemm = [](int n, Dtype d, double rate) { return GemmSample{n, n, n, d, 2.0 * n * n * n / rate, "NN"}; };
  Calibration c;
  // fp32 peaks at 60 TFLOP/s (size 4096), bf16 at 600 (size 4096). At size 1024 fp32 runs
  // 30 (0.5 of its peak) and bf16 420 (0.7 of its peak): the bin's median of 0.5 and 0.7
  // is 0.6. At 4096 both are at their peak.
  c.gemms = {gemm(1024, Dtype::fp32, 30e12), gemm(4096, Dtype::fp32, 60e12), gemm(1024, Dtype::bf16, 420e12),
             gemm(4096, Dtype::bf16, 600e12)};
  const ProfileFit f = fit_profile(c);
  CHECK(f.peak[static_cast<std::size_t>(Dtype::fp32)] == Approx(60e12));
  CHECK(f.peak[static_cast<std::size_t>(Dtype::bf16)] == Approx(600e12));
  CHECK(f.peak[static_cast<std::size_t>(Dtype::tf32)] == 0.0);
  REQUIRE(f.efficiency.size() == 2);
  CHECK(f.efficiency[0].first == Approx(1024.0));
  CHECK(f.efficiency[0].second == Approx(0.6));
  CHECK(f.efficiency[1].second == Approx(1.0));
}

TEST_CASE("the profile fitted to hand-made measurements", "[exec][calibrate]") {
  Calibration c;
  // Rates: 2·m·n·k / seconds. 64³ at 50 and 60 GFLOP/s (two forms), 32 x 128 x 64 (also
  // size 64) at 70, 128³ at 100 (the best), 512³ at 80.
  auto gemm = [](int m, int n, int k, double rate, const char* form) {
    return GemmSample{m, n, k, parasim::scenario::Dtype::fp32, 2.0 * m * n * k / rate, form};
  };
  c.gemms = {gemm(64, 64, 64, 50e9, "NN"), gemm(64, 64, 64, 60e9, "NT"), gemm(32, 128, 64, 70e9, "NN"),
             gemm(128, 128, 128, 100e9, "NN"), gemm(512, 512, 512, 80e9, "TN")};
  // Kernels: only the largest size counts, the median of 8 MB / 1 ms = 8 GB/s and
  // 16 MB / 3 ms = 5.33 GB/s (two: their mean), 6.67 GB/s; AdamW
  // on 2^20 parameters in 4 ms is 32 B x 2^20 / 4 ms for the optimizer.
  c.kernels = {{"gelu_forward", 1 << 16, 1e5, 1e-3},
               {"gelu_forward", 1 << 20, 8e6, 1e-3},
               {"layer_norm_backward", 1 << 20, 16e6, 3e-3},
               {"adamw", 1 << 20, 28.0 * (1 << 20), 4e-3}};
  c.launch_seconds = 4e-9;
  // Link: the best send/recv algbw at >= 1 MiB is 2^20 B / 110 us = 9.532 GB/s; latency is
  // the 1 KiB message's 1.1 us less 1024 B at that rate. Collectives do not enter the link;
  // they are kept as busbw curves, by op, group and size.
  c.comms = {{"send/recv", 2, 1024, 1.1e-6},
             {"send/recv", 2, 1 << 20, 110e-6},
             {"send/recv", 2, 4 << 20, 500e-6},
             {"all-reduce", 4, 1 << 20, 20e-6},
             {"all-reduce", 2, 1 << 20, 10e-6},
             {"all-reduce", 2, 1024, 2e-6}};
  const ProfileFit f = fit_profile(c);
  CHECK(f.peak[0] == Approx(100e9));
  CHECK(f.peak[2] == 0.0);  // bf16 not measured
  REQUIRE(f.efficiency.size() == 3);
  CHECK(f.efficiency[0].first == Approx(64.0));
  CHECK(f.efficiency[0].second == Approx(0.6));  // median of 0.5, 0.6, 0.7
  CHECK(f.efficiency[1].first == Approx(128.0));
  CHECK(f.efficiency[1].second == Approx(1.0));
  CHECK(f.efficiency[2].first == Approx(512.0));
  CHECK(f.efficiency[2].second == Approx(0.8));
  CHECK(f.memory_bandwidth == Approx((8e9 + 16e9 / 3) / 2));
  CHECK(f.host_kernel == 0.0);  // CPU ranks run each kernel on the calling thread: no host figures
  CHECK(f.host_communication == 0.0);
  CHECK(f.optimizer_bandwidth == Approx(32.0 * (1 << 20) / 4e-3));
  CHECK(f.launch_overhead == 4e-9);
  const double bw = double(1 << 20) / 110e-6;
  CHECK(f.link_bandwidth == Approx(bw));
  CHECK(f.link_latency == Approx(1.1e-6 - 1024 / bw));
  REQUIRE(f.collectives.size() == 3);
  CHECK(f.collectives[0].group == 2);
  CHECK(f.collectives[0].bytes == 1024);
  CHECK(f.collectives[0].busbw == Approx(1024 / 2e-6 * 1.0));  // 2(n-1)/n = 1 for two ranks
  CHECK(f.collectives[1].bytes == 1 << 20);
  CHECK(f.collectives[2].group == 4);
  CHECK(f.collectives[2].busbw == Approx((1 << 20) / 20e-6 * 1.5));  // 2 x 3/4
}

TEST_CASE("a profile without communication has no link figures", "[exec][calibrate]") {
  Calibration c;
  c.gemms = {{64, 64, 64, parasim::scenario::Dtype::fp32, 1e-5, "NN"}};
  c.kernels = {{"accumulate", 1024, 12288, 1e-6}};
  const ProfileFit f = fit_profile(c);
  CHECK(f.link_bandwidth == 0.0);
  REQUIRE(f.efficiency.size() == 1);
  CHECK(f.efficiency[0].first == Approx(64.0));
  CHECK(f.efficiency[0].second == 1.0);
}

TEST_CASE("on a device that queues kernels, the host's costs and the device's launch are fitted apart",
          "[exec][calibrate]") {
  Calibration c;
  c.gemms = {{64, 64, 64, parasim::scenario::Dtype::fp32, 1e-5, "NN"}};
  // Three kernels at the largest size: 1, 2 and 10 GB/s; the slow one does not drag the
  // median (2 GB/s), where the bytes over the time would be 13e6 / 7.1e-3 = 1.83 GB/s.
  c.kernels = {{"gelu_forward", 1 << 20, 1e6, 1e-3},
               {"residual_add", 1 << 20, 2e6, 1e-3},
               {"layer_norm_backward", 1 << 20, 10e6, 1e-3},
               {"causal_softmax_forward", 1 << 16, 1e3, 1e-3}};
  c.launch_seconds = 6e-6;  // back to back from the host: the host's pace, not the device's
  c.sms = 132;
  c.issue_seconds = 5.5e-6;
  c.device_launch_seconds = 2.2e-6;
  c.post_seconds = 9e-6;
  ProfileFit f = fit_profile(c);
  CHECK(f.memory_bandwidth == Approx(2e9));
  CHECK(f.launch_overhead == 2.2e-6);
  CHECK(f.host_kernel == 5.5e-6);
  CHECK(f.host_communication == 9e-6);
  // One rank posts no collective: a call costs at least issuing the kernel it launches.
  c.post_seconds = 0.0;
  f = fit_profile(c);
  CHECK(f.host_communication == 5.5e-6);
}

TEST_CASE("a GEMM far from its neighbours' rate is set aside and sets no peak", "[exec][calibrate]") {
  using parasim::scenario::Dtype;
  auto gemm = [](int n, double rate, const char* form) {
    return GemmSample{n, n, n, Dtype::fp32, 2.0 * n * n * n / rate, form};
  };
  Calibration c;
  // 64³ in three forms at 50, 60 and 55 GFLOP/s; two more 64³ samples, one timed 15 x too
  // fast (900: over 4 x the others' median) and one 11 x too slow (5: under a quarter).
  // 512³ has no neighbour within 25 % of its size: kept, however it ran.
  c.gemms = {gemm(64, 50e9, "NN"), gemm(64, 60e9, "NT"), gemm(64, 55e9, "TN"), gemm(64, 900e9, "NN"),
             gemm(64, 5e9, "NT"), gemm(512, 1e9, "NN")};
  CHECK(reject_outliers(c) == 2);
  CHECK(c.gemms[0].rejected.empty());
  CHECK(c.gemms[2].rejected.empty());
  // Each against the median of the other four 64³ samples: (50 + 55) / 2 and (55 + 60) / 2.
  CHECK_THAT(c.gemms[3].rejected, Catch::Contains("9e+11 FLOP/s against 5.25e+10"));
  CHECK_THAT(c.gemms[4].rejected, Catch::Contains("5e+09 FLOP/s against 5.75e+10"));
  CHECK(c.gemms[5].rejected.empty());
  const ProfileFit f = fit_profile(c);
  CHECK(f.peak[0] == Approx(60e9));  // not the 900 set aside
  REQUIRE(f.efficiency.size() == 2);
  CHECK(f.efficiency[0].second == Approx(55.0 / 60.0));  // median of 50, 60, 55 over 60
}

TEST_CASE("a message slower than one four times larger is set aside, a latency-bound series is not",
          "[exec][calibrate]") {
  Calibration c;
  // 1 KiB to 4 MiB: latency-bound at first (the time barely grows), then bandwidth-bound.
  const double times[] = {2e-6, 3e-6, 6e-6, 20e-6, 70e-6, 260e-6, 1.0e-3};
  for (int i = 0; i < 7; ++i) c.comms.push_back({"all-reduce", 2, double(1024 << (2 * i)), times[i]});
  CHECK(reject_outliers(c) == 0);
  // The 1 MiB all-reduce disturbed to 16 s (64 KB/s), and the 4 MiB one to 1 s (over 16 x
  // the 1 MiB one's 260 us): both set aside, the others kept.
  c.comms[5].seconds = 16.0;
  CHECK(reject_outliers(c) == 1);
  CHECK_THAT(c.comms[5].rejected, Catch::Contains("more than twice the 4194304-byte message's"));
  c.comms[5].seconds = 260e-6;
  c.comms[5].rejected.clear();
  c.comms[6].seconds = 1.0;
  CHECK(reject_outliers(c) == 1);
  CHECK_THAT(c.comms[6].rejected, Catch::Contains("more than 16 times"));
  const ProfileFit f = fit_profile(c);
  CHECK(f.collectives.size() == 6);  // the 4 MiB point takes no part in the curve
  CHECK(f.collectives.back().bytes == double(1 << 20));
}
