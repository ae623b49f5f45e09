// Device profiles: what `parasim calibrate` writes is what the simulator reads back, a
// profile for another device is refused at its key and line, and measured links replace
// the cluster's in the simulation (checked against the ring all-reduce's closed form).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "sim/compute_model.hpp"
#include "sim/simulate.hpp"

using namespace parasim;
namespace fs = std::filesystem;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / fmt::format("parasim-profile-test-{}", name);
  std::ofstream(p) << text;
  return p.string();
}

// Two devices, dp 2, the gradient all-reduce after backward (not overlapped): 4 layers of
// 1M fp32 parameters = 16 MB in one bucket, on one node or (`across`) two.
scenario::Scenario two_devices(bool across = false) {
  std::string text = across ? "cluster:\n  gpus_per_node: 1\n  nodes: 2\n"
                              "  inter_node: {nics_per_node: 1, nic_bandwidth: 10 GB/s, latency: 0us}\n"
                            : "cluster:\n  gpus_per_node: 2\n";
  text += R"(  device: {name: cpu-core, peak: {fp32: 1 TFLOPS}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}
  intra_node: {fabric: shared-memory, bandwidth: 100 GB/s, latency: 0us}
model:
  layers:
)";
  for (int l = 0; l < 4; ++l) text += fmt::format("    - {{name: l{}, params: 1e6, forward_flops: 1e9, activations: 1}}\n", l);
  text += "training: {global_batch: 2, micro_batch: 1, precision: fp32}\nplan: {dp: 2, overlap_dp: false, collective: ring}\n";
  return scenario::load_text(text, "two.yaml");
}

// A profile whose compute costs nothing, so a step is its communication.
sim::DeviceProfile free_compute(const scenario::Scenario& s) {
  sim::DeviceProfile p = sim::default_profile(s.cluster.device);
  p.gemm_efficiency = {{1.0, 1.0}};
  p.memory_bandwidth = 1e30;
  p.launch_overhead = 0.0;
  return p;
}

}  // namespace

TEST_CASE("a profile written by profile_yaml reads back to the same figures", "[sim][profile]") {
  const scenario::Scenario s = scenario::load((fs::path(PARASIM_SOURCE_DIR) / "scenarios/quickstart.yaml").string());
  sim::DeviceProfile p;
  p.device = "cpu-core";
  p.peak = {112.9e9, 112.9e9, 112.9e9, 112.9e9, 112.9e9};
  p.gemm_efficiency = {{32, 0.7168}, {50.8, 0.8449}, {1574, 0.9362}};
  p.memory_bandwidth = 7.123e9;
  p.optimizer_bandwidth = 5.4e9;
  p.launch_overhead = 3.3e-9;
  p.intra_node = sim::LinkFigures{9.432e9, 0.8205e-6};
  p.collectives = {{program::CollectiveOp::all_reduce, 2, {{1024, 0.4553e9}, {1048576, 3.702e9}}},
                   {program::CollectiveOp::all_gather, 2, {{1024, 0.7e9}}},
                   {program::CollectiveOp::all_gather, 4, {{4096, 1.5e9}}}};
  const std::string path = write_temp("roundtrip.yaml", "backend: cpu\nranks: 2\n" + sim::profile_yaml(p) +
                                                            "measurements:\n  gemm:\n    - [32, 32, 32, NN, 8e-07, 8e10]\n");
  const sim::DeviceProfile q = sim::load_profile(path, s.cluster.device);
  CHECK(q.name == "cpu-core (measured)");
  for (std::size_t d = 0; d < 4; ++d) CHECK(q.peak[d] == Approx(p.peak[d]).epsilon(1e-4));
  REQUIRE(q.gemm_efficiency.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(q.gemm_efficiency[i].first == Approx(p.gemm_efficiency[i].first).epsilon(1e-4));
    CHECK(q.gemm_efficiency[i].second == Approx(p.gemm_efficiency[i].second).epsilon(1e-4));
  }
  CHECK(q.memory_bandwidth == Approx(7.123e9).epsilon(1e-4));
  CHECK(q.optimizer_bandwidth == Approx(5.4e9).epsilon(1e-4));
  CHECK(q.launch_overhead == Approx(3.3e-9).epsilon(1e-4));
  REQUIRE(q.intra_node.has_value());
  CHECK(q.intra_node->bandwidth == Approx(9.432e9).epsilon(1e-4));
  CHECK(q.intra_node->latency == Approx(0.8205e-6).epsilon(1e-4));
  CHECK_FALSE(q.inter_node.has_value());
  REQUIRE(q.collectives.size() == 3);
  CHECK(q.collectives[0].op == program::CollectiveOp::all_reduce);
  CHECK(q.collectives[0].busbw[1].first == 1048576);
  CHECK(q.collectives[0].busbw[1].second == Approx(3.702e9).epsilon(1e-4));
  CHECK(q.collectives[2].group == 4);
  // Interpolation in log(size) between measured points: halfway in log between 32 and 50.8.
  CHECK(q.efficiency(std::sqrt(32 * 50.8)) == Approx((0.7168 + 0.8449) / 2).epsilon(1e-4));

  const topology::ClusterSpec c = sim::with_profile_links(s.cluster, q);
  CHECK(c.intra.bandwidth == Approx(9.432e9).epsilon(1e-4));
  CHECK(c.intra.latency == Approx(0.8205e-6).epsilon(1e-4));
  CHECK(c.inter.nic_bandwidth == s.cluster.inter.nic_bandwidth);  // not measured: kept
}

TEST_CASE("a GPU profile keeps the preset's kernel model and may record its own host costs", "[sim][profile]") {
  const scenario::Scenario s =
      scenario::load_text("cluster: dgx-a100\nmodel: tiny-gpt\ntraining: {global_batch: 8}\n", "a100.yaml");
  sim::DeviceProfile p = sim::default_profile(s.cluster.device);
  REQUIRE(p.kernel_model());
  CHECK(p.kernels.sms == 108);
  CHECK(p.memory_bandwidth == Approx(2039e9 * 0.75));
  // A measured profile (what calibrate writes) with the host's costs of the run it was
  // measured for; the preset's SMs and tiles stand.
  p.host = {12e-6, 6e-6, 20e-6};
  p.memory_bandwidth = 1.6e12;
  const std::string path = write_temp("gpu.yaml", sim::profile_yaml(p));
  const sim::DeviceProfile q = sim::load_profile(path, s.cluster.device);
  CHECK(q.kernel_model());
  CHECK(q.kernels.sms == 108);
  CHECK(q.memory_bandwidth == Approx(1.6e12).epsilon(1e-4));
  CHECK(q.host.forward == Approx(12e-6).epsilon(1e-4));
  CHECK(q.host.backward == Approx(6e-6).epsilon(1e-4));
  CHECK(q.host.communication == Approx(20e-6).epsilon(1e-4));
  // Its own kernel constants, when it has them, replace the preset's.
  const std::string own = write_temp("gpu-kernels.yaml", "device: A100-SXM4-80GB\nkernels: {sms: 54, gemm_efficiency: 0.5, "
                                                          "l2_bandwidth: 2 TB/s, memory_efficiency: 0.5}\n");
  const sim::DeviceProfile k = sim::load_profile(own, s.cluster.device);
  CHECK(k.kernels.sms == 54);
  CHECK(k.memory_bandwidth == Approx(2039e9 * 0.5));
  CHECK(k.host.forward == s.cluster.device.host.forward);
}

TEST_CASE("a bad profile is refused at its key and line", "[sim][profile]") {
  const scenario::Scenario s = scenario::load((fs::path(PARASIM_SOURCE_DIR) / "scenarios/quickstart.yaml").string());
  auto message = [&](const std::string& name, const std::string& text) {
    try {
      sim::load_profile(write_temp(name, text), s.cluster.device);
    } catch (const scenario::ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("device.yaml", "device: h100-sxm\nmemory_bandwidth: 3 TB/s\n"),
             Catch::Contains("device.yaml:1:9: device: the profile was measured for device 'h100-sxm', but the "
                             "scenario's cluster has 'cpu-core'"));
  CHECK_THAT(message("link.yaml", "device: cpu-core\nlinks:\n  intra_node: {bandwidth: 5 GB/s}\n"),
             Catch::Contains("link.yaml:3:15: links.intra_node.latency"));
  CHECK_THAT(message("key.yaml", "device: cpu-core\nlinks:\n  intra: {bandwidth: 5 GB/s, latency: 1us}\n"),
             Catch::Contains("key.yaml:3:3: links.intra: unknown key 'intra'"));
  CHECK_THAT(message("coll.yaml", "device: cpu-core\ncollectives:\n  all-reduce:\n    - [2, 4096, 1.5]\n    - [2, 1024, 1.0]\n"),
             Catch::Contains("coll.yaml:5:7: collectives.all-reduce: expected sizes ascending within a group"));
  CHECK_THAT(message("coll1.yaml", "device: cpu-core\ncollectives:\n  all-reduce:\n    - [1, 4096, 1.5]\n"),
             Catch::Contains("coll1.yaml:4:7: collectives.all-reduce: expected a group of 2 or more ranks"));
  CHECK_THAT(message("coll2.yaml", "device: cpu-core\ncollectives:\n  broadcast:\n    - [2, 4096, 1.5]\n"),
             Catch::Contains("coll2.yaml:3:3: collectives.broadcast: unknown key 'broadcast'"));
  CHECK_THAT(message("eff.yaml", "device: cpu-core\ngemm_efficiency:\n  - [64, 0.5]\n  - [32, 0.9]\n"),
             Catch::Contains("eff.yaml:4:5: gemm_efficiency: expected a positive size above the previous one"));
  // A file that is no profile is named as such, none of its text shown (it printed the
  // first line of whatever file hardware.profile named); an empty one is no profile either
  // (it was read as one measuring nothing, "(measured)").
  const std::string secret = message("secret.yaml", "root:*:20228:0:99999:7:::\nbin:*:20228:0:99999:7:::\n");
  CHECK_THAT(secret, Catch::Contains("is not a device profile") && Catch::Contains("parasim calibrate"));
  CHECK(secret.find("root") == std::string::npos);
  CHECK(secret.find("20228") == std::string::npos);
  CHECK_THAT(message("empty.yaml", ""), Catch::Contains("empty.yaml") && Catch::Contains("is not a device profile"));
  CHECK_THAT(message("nodevice.yaml", "memory_bandwidth: 3 TB/s\n"), Catch::Contains("is not a device profile"));
  // A zero peak for a type the device computes is refused at its key (simulate divided by
  // it and blamed the model's size).
  CHECK_THAT(message("zero.yaml", "device: cpu-core\npeak: {fp32: 0 FLOPS}\n"),
             Catch::Contains("zero.yaml:2:14: peak.fp32: a measured peak must be positive"));
}

TEST_CASE("measured links replace the cluster's: a ring all-reduce slows as its link", "[sim][profile]") {
  // A two-rank ring moves 2 (n-1)/n = 1 times the 16 MB buffer over each device's link, so
  // the step grows by 16 MB / bandwidth.
  const scenario::Scenario s = two_devices();
  const program::Program prog = program::compile(s);
  sim::DeviceProfile p = free_compute(s);
  const double fast = sim::simulate(s, prog, p).step_seconds();
  p.intra_node = sim::LinkFigures{10e9, 0.0};
  const double slow = sim::simulate(s, prog, p).step_seconds();
  CHECK(slow - fast == Approx(16e6 / 10e9 - 16e6 / 100e9).epsilon(0.01));
  p.intra_node = sim::LinkFigures{10e9, 5e-6};  // a latency per ring step (two for two ranks)
  const double late = sim::simulate(s, prog, p).step_seconds();
  CHECK(late > slow);
  CHECK(late - slow < 20e-6);
}

TEST_CASE("the optimizer moves its bytes at the profile's optimizer bandwidth", "[sim][profile]") {
  const scenario::Scenario s = scenario::load((fs::path(PARASIM_SOURCE_DIR) / "scenarios/quickstart.yaml").string());
  const program::Program prog = program::compile(s);
  sim::DeviceProfile p = sim::default_profile(s.cluster.device);
  const auto it = std::find_if(prog.ops.begin(), prog.ops.end(),
                               [](const program::Op& o) { return o.category == program::Category::optimizer; });
  REQUIRE(it != prog.ops.end());
  const double shared = sim::compute_seconds(p, prog, *it, s.training.precision);  // memory_bandwidth
  p.optimizer_bandwidth = p.memory_bandwidth / 2;
  const double own = sim::compute_seconds(p, prog, *it, s.training.precision);
  // fp32: 32 bytes per parameter held; twice the time for them at half the bandwidth.
  CHECK(it->bytes == Approx(32.0 * it->flops / 12.0));
  CHECK(own - shared == Approx(it->bytes / p.memory_bandwidth));
}

TEST_CASE("measured collective rates: the slowdown against the link, by size and group", "[sim][profile]") {
  sim::DeviceProfile p;
  p.intra_node = sim::LinkFigures{10e9, 0.0};
  p.collectives = {{program::CollectiveOp::all_reduce, 2, {{1e3, 1e9}, {1e5, 5e9}}},
                   {program::CollectiveOp::all_reduce, 4, {{1e3, 0.5e9}, {1e5, 2e9}}}};
  using program::CollectiveOp;
  // At and beyond the measured sizes, clamped; halfway in log size (1e4), halfway in busbw.
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 1e3) == Approx(10.0));
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 10.0) == Approx(10.0));
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 1e5) == Approx(2.0));
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 1e9) == Approx(2.0));
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 1e4) == Approx(10.0 / 3.0));
  // The largest measured group not above the call's (3 -> 2, 8 -> 4); below all: the smallest.
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 3, 1e5) == Approx(2.0));
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 8, 1e5) == Approx(5.0));
  // Nothing measured for the op, or no measured link: the link's rate.
  CHECK(p.collective_slowdown(CollectiveOp::all_gather, 2, 1e5) == 1.0);
  p.intra_node.reset();
  CHECK(p.collective_slowdown(CollectiveOp::all_reduce, 2, 1e5) == 1.0);
}

TEST_CASE("a measured all-reduce rate inside a node sets the simulated all-reduce's time", "[sim][profile]") {
  // The setup of the link test above: a 16 MB two-rank ring all-reduce on a 10 GB/s link
  // takes 16 MB / 10 GB/s; measured at a busbw of 2.5 GB/s it takes 16 MB / 2.5 GB/s.
  const scenario::Scenario s = two_devices();
  const program::Program prog = program::compile(s);
  sim::DeviceProfile p = free_compute(s);
  p.intra_node = sim::LinkFigures{10e9, 0.0};
  const double link = sim::simulate(s, prog, p).step_seconds();
  p.collectives = {{program::CollectiveOp::all_reduce, 2, {{1e6, 2.5e9}, {64e6, 2.5e9}}}};
  const double measured = sim::simulate(s, prog, p).step_seconds();
  CHECK(measured - link == Approx(16e6 / 2.5e9 - 16e6 / 10e9).epsilon(0.01));
  // Across nodes the curve does not apply: the same plan on two one-device nodes.
  const scenario::Scenario two = two_devices(true);
  p.collectives.clear();
  const double across = sim::simulate(two, program::compile(two), p).step_seconds();
  p.collectives = {{program::CollectiveOp::all_reduce, 2, {{1e6, 2.5e9}, {64e6, 2.5e9}}}};
  CHECK(sim::simulate(two, program::compile(two), p).step_seconds() == across);
}
