// calibrate() on two CPU ranks: every rank measures the same grid at once and rank 0 gets
// the whole set: the quick GEMM grid in three forms, the kernels, ping-pong and each
// collective at each size, with figures a real machine gives.
#include <catch2/catch.hpp>

#include <set>

#include "exec/calibrate.hpp"
#include "exec/cpu/cpu_device.hpp"

using namespace parasim::exec;

TEST_CASE("calibrate measures GEMMs, kernels and communication on every rank at once", "[exec][calibrate][np2]") {
  CpuDevice dev;
  REQUIRE(dev.world() == 2);
  CalibrateOptions o;
  o.quick = true;
  o.max_comm_bytes = 16 << 10;
  o.seconds_per_point = 0.002;
  const Calibration c = calibrate(dev, o);
  CHECK(c.ranks == 2);
  CHECK(c.backend == dev.name());
  REQUIRE(c.gemms.size() == 4 * 3);  // 32³, 64³, 128³, 256 x 384 x 128; NN, NT, TN
  for (const GemmSample& g : c.gemms) {
    INFO(g.m << " x " << g.n << " x " << g.k << " " << g.form);
    CHECK(g.rate() > 1e8);   // far below any core with a BLAS
    CHECK(g.rate() < 1e13);  // far above one
  }
  CHECK(c.kernels.size() == 9);
  for (const KernelSample& k : c.kernels) CHECK(k.bandwidth() > 1e7);
  CHECK(c.launch_seconds > 0.0);
  CHECK(c.launch_seconds < 1e-4);
  // Ping-pong and three collectives on the 2-rank group, at 1, 4 and 16 KiB.
  REQUIRE(c.comms.size() == 4 * 3);
  std::set<std::pair<std::string, double>> seen;
  for (const CommSample& s : c.comms) {
    CHECK(s.group == 2);
    CHECK(s.seconds > 0.0);
    CHECK(s.seconds < 0.1);
    seen.insert({s.op, s.bytes});
  }
  for (const char* op : {"send/recv", "all-reduce", "reduce-scatter", "all-gather"}) {
    for (double b : {1024.0, 4096.0, 16384.0}) CHECK(seen.count({op, b}) == 1);
  }
  const ProfileFit f = fit_profile(c);
  CHECK(f.link_bandwidth > 0.0);
  CHECK(f.efficiency.size() >= 3);
}
