// The simulator end to end on plans whose step time can be worked out by hand: an ideal
// device (GEMMs at exactly the peak, no launch cost, unlimited memory bandwidth), layers of
// equal cost, links without latency and collectives as plain flows (collectives: mpi; the
// cases that work out a ring choose it, where MPI would run libnbc's binomial tree).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "workload/memory.hpp"
#include "sim/rank_compute.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

using namespace parasim;

namespace {

// `layers` equal generic layers of `params` parameters and 1 GFLOP forward per sample,
// on `gpus` devices of 1 TFLOP/s fp32 joined by a 100 GB/s NVSwitch.
scenario::Scenario equal_layers(int gpus, int layers, double params, const std::string& training,
                                const std::string& plan) {
  std::string text = fmt::format(R"(cluster:
  gpus_per_node: {}
  device: {{peak: {{fp32: 1 TFLOPS}}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}}
  intra_node: {{fabric: nvswitch, bandwidth: 100 GB/s, latency: 0us}}
  collectives: mpi
model:
  layers:
)",
                                 gpus);
  for (int l = 0; l < layers; ++l) {
    text += fmt::format("    - {{name: l{}, params: {}, forward_flops: 1e9, activations: 1}}\n", l, params);
  }
  text += "training: {" + training + ", precision: fp32}\nplan: {" + plan + "}\n";
  return scenario::load_text(text, "ideal.yaml");
}

sim::DeviceProfile ideal(const scenario::Scenario& s) {
  sim::DeviceProfile p = sim::default_profile(s.cluster.device);
  p.gemm_efficiency = {{1.0, 1.0}};
  p.memory_bandwidth = 1e30;
  p.launch_overhead = 0.0;
  return p;
}

double step(const scenario::Scenario& s) {
  const program::Program prog = program::compile(s);
  return sim::simulate(s, prog, ideal(s)).step_seconds();
}

// The optimizer's share: 12 FLOPs per parameter held, at the fp32 peak.
double optimizer(double params) { return 12.0 * params / 1e12; }

}  // namespace

TEST_CASE("one device runs its ops back to back", "[sim][simulate]") {
  // 4 layers x 1 ms forward + 2 ms backward, 4 micro-batches: 48 ms + the optimizer.
  const auto s = equal_layers(1, 4, 1000, "global_batch: 4, micro_batch: 1", "dp: 1");
  CHECK(step(s) == Approx(48e-3 + optimizer(4000)).epsilon(1e-5));
}

TEST_CASE("pipeline step time is (m + p - 1) stage slots: the bubble falls out", "[sim][simulate][bubble]") {
  // p = 4 stages of one layer: a micro-batch costs 1 ms forward, 2 ms backward per stage.
  // GPipe and 1F1B both take (m + p - 1) x 3 ms; the bubble is (p-1)/(m+p-1).
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (int m : {1, 4, 8, 32}) {
      const auto s = equal_layers(4, 4, 1000, fmt::format("global_batch: {}, micro_batch: 1", m),
                                  fmt::format("dp: 1, pp: 4, schedule: {}", schedule));
      const double t = step(s) - optimizer(1000);
      CHECK(t == Approx((m + 3) * 3e-3).epsilon(1e-4));
      CHECK((t - m * 3e-3) / t == Approx(3.0 / (m + 3)).epsilon(1e-3));
    }
  }
}

TEST_CASE("interleaving divides the pipeline bubble by v", "[sim][simulate][bubble]") {
  // 8 layers on 4 stages with v = 2: each chunk is one layer. Busy time 3 ms x 2 per
  // micro-batch; the idle time drops from 3 x 6 ms to 3 x 6 / 2 ms.
  const int m = 8;
  const auto flat = equal_layers(4, 8, 1000, "global_batch: 8, micro_batch: 1", "dp: 1, pp: 4");
  const auto inter = equal_layers(4, 8, 1000, "global_batch: 8, micro_batch: 1", "dp: 1, pp: 4, virtual_stages: 2");
  const double busy = m * 6e-3;
  const double bubble_flat = step(flat) - optimizer(2000) - busy;
  const double bubble_inter = step(inter) - optimizer(2000) - busy;
  CHECK(bubble_flat == Approx(3 * 6e-3).epsilon(1e-4));
  CHECK(bubble_inter == Approx(bubble_flat / 2).epsilon(1e-3));
}

TEST_CASE("DP buckets hide their all-reduce when backward is longer", "[sim][simulate][dp]") {
  // dp 2, one micro-batch, 4 layers of P = 25M parameters (the ring chosen, not MPI's
  // libnbc): a bucket per layer of 100 MB, all-reduced over a 2-ring in 2 x 50 MB / 100 GB/s = 1 ms, less than a layer's 2 ms
  // backward. Only the last bucket's 1 ms shows after the 4 + 8 ms of compute.
  const double P = 25e6;
  const auto s = equal_layers(2, 4, P, "global_batch: 2, micro_batch: 1", "dp: 2, collective: ring, bucket_size: 100MB");
  CHECK(step(s) == Approx(12e-3 + 1e-3 + optimizer(4 * P)).epsilon(1e-5));
  // Without overlap all four all-reduces follow the backward: 12 + 4 x 1 ms.
  const auto flat = equal_layers(2, 4, P, "global_batch: 2, micro_batch: 1", "dp: 2, collective: ring, bucket_size: 100MB, overlap_dp: false");
  CHECK(step(flat) == Approx(12e-3 + 4e-3 + optimizer(4 * P)).epsilon(1e-5));
}

TEST_CASE("DP buckets expose exactly the remainder when backward is shorter", "[sim][simulate][dp]") {
  // P = 100M: 400 MB buckets take 4 ms each, longer than a layer's 2 ms backward. They run
  // back to back from the first bucket's readiness at 4 + 2 = 6 ms: done at 6 + 4 x 4 =
  // 22 ms, so 10 ms beyond the backward's end at 12 ms are exposed.
  const double P = 100e6;
  const auto s = equal_layers(2, 4, P, "global_batch: 2, micro_batch: 1", "dp: 2, collective: ring, bucket_size: 400MB");
  CHECK(step(s) == Approx(22e-3 + optimizer(4 * P)).epsilon(1e-5));
}

TEST_CASE("ZeRO-1's parameter all-gathers hide under the next forward with overlap_param_gather",
          "[sim][simulate][dp]") {
  // dp 2, zero 1, 4 layers of P = 25M: a bucket per layer of 100 MB, whose reduce-scatter
  // and all-gather each move 50 MB per rank, 0.5 ms. Without the overlap: 4 + 8 ms of
  // compute, the last reduce-scatter's 0.5 ms, the optimizer on half the parameters, then
  // the four gathers, 4 x 0.5 ms.
  const double P = 25e6;
  const auto after = equal_layers(2, 4, P, "global_batch: 2, micro_batch: 1", "dp: 2, collective: ring, zero: 1, bucket_size: 100MB");
  CHECK(step(after) == Approx(12.5e-3 + optimizer(2 * P) + 2e-3).epsilon(1e-5));
  // With it the gathers open the step in forward order: the first layer waits 0.5 ms for
  // its own, the other three finish under the forward (1 ms a layer); the step is 1.5 ms
  // shorter.
  const auto under = equal_layers(2, 4, P, "global_batch: 2, micro_batch: 1",
                                  "dp: 2, collective: ring, zero: 1, bucket_size: 100MB, overlap_param_gather: true");
  CHECK(step(under) == Approx(0.5e-3 + 12.5e-3 + optimizer(2 * P)).epsilon(1e-5));
  // Gathers longer than a layer's forward (P = 100M: 2 ms each) leave the forward waiting
  // on each: the last gather ends at 8 ms, then the last layer's 1 ms forward and the
  // backward's 8 ms, the last reduce-scatter's 2 ms.
  const double Q = 100e6;
  const auto slow = equal_layers(2, 4, Q, "global_batch: 2, micro_batch: 1",
                                 "dp: 2, collective: ring, zero: 1, bucket_size: 400MB, overlap_param_gather: true");
  CHECK(step(slow) == Approx(8e-3 + 1e-3 + 8e-3 + 2e-3 + optimizer(2 * Q)).epsilon(1e-5));
}

TEST_CASE("simulating the same scenario twice gives the same trace bit for bit", "[sim][simulate]") {
  const auto s = scenario::load_text(R"(cluster: {preset: hgx-h100, nodes: 2}
model: {layers: 8, hidden: 1024, heads: 16, vocab: 32000, seq_len: 1024}
training: {global_batch: 32, micro_batch: 2}
plan: {tp: 4, pp: 2, dp: 2, virtual_stages: 2}
)",
                                     "det.yaml");
  const program::Program prog = program::compile(s);
  const report::Trace a = sim::simulate(s, prog);
  const report::Trace b = sim::simulate(s, prog);
  REQUIRE(a.spans.size() == b.spans.size());
  CHECK(a.step_end == b.step_end);
  bool same = true;
  for (std::size_t i = 0; i < a.spans.size(); ++i) {
    same = same && a.spans[i].start == b.spans[i].start && a.spans[i].end == b.spans[i].end &&
           a.spans[i].op == b.spans[i].op;
  }
  CHECK(same);
  CHECK(a.spans.size() == prog.ops.size());
}

TEST_CASE("hierarchical all-reduce: reduce-scatter in nodes, all-reduce across, all-gather in nodes", "[sim][simulate][collectives]") {
  // 2 nodes x 4 GPUs, dp 8, one bucket of S bytes. Inside a node (100 GB/s, no latency):
  // reduce-scatter and all-gather take 3/4 S / 100 GB/s each. Across: 4 rings of 2, each
  // all-reducing S/4 over the single 10 GB/s NIC per node they share: 2 steps of S/8 bytes,
  // 4 flows on the NIC at 2.5 GB/s each, 4 us per hop (attach 0, NIC-switch 2 us x 2).
  const std::string text = R"(cluster:
  nodes: 2
  gpus_per_node: 4
  device: {peak: {fp32: 1 TFLOPS}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}
  intra_node: {fabric: nvswitch, bandwidth: 100 GB/s, latency: 0us}
  inter_node: {nics_per_node: 1, nic_bandwidth: 10 GB/s, latency: 4us, attach_bandwidth: 100 GB/s}
  collectives: mpi
model:
  layers:
    - {name: l0, params: 25e6, forward_flops: 1e9, activations: 1}
training: {global_batch: 8, micro_batch: 1, precision: fp32}
plan: {dp: 8, bucket_size: 1GB, collective: hierarchical}
)";
  const scenario::Scenario s = scenario::load_text(text, "hier.yaml");
  const double S = 25e6 * 4;
  const double inside = 0.75 * S / 100e9;
  const double across = 2 * (4e-6 + (S / 8) / 2.5e9);
  // forward 1 ms, backward 2 ms, then the all-reduce, then the optimizer; the messages
  // across the nodes are MPI rendezvous over TCP, whose acknowledgements (64 bytes a hop
  // back first, network.hpp) add a few microseconds.
  CHECK(step(s) == Approx(3e-3 + 2 * inside + across + optimizer(25e6)).margin(10e-6));
  // A flat ring over 8 ranks crosses the NIC twice per step with 1/8 chunks.
  const scenario::Scenario ring =
      scenario::load_text(text, "hier.yaml", std::vector<std::string>{"plan.collective=ring"});
  CHECK(step(ring) > step(s));
}

TEST_CASE("memory counters peak where the schedule's in-flight count says", "[sim][simulate][counters]") {
  // Each stage's memory over time, from the events, peaks at the memory report's figure,
  // which counts in-flight micro-batches from the schedule's order instead.
  for (const char* schedule : {"1f1b", "gpipe"}) {
    const auto s = scenario::load_text(R"(cluster: {preset: hgx-h100, nodes: 1}
model: {layers: 8, hidden: 1024, heads: 16, vocab: 32000, seq_len: 1024}
training: {global_batch: 16, micro_batch: 2}
plan: {tp: 2, pp: 4, dp: 1}
)",
                                       "mem.yaml", std::vector<std::string>{std::string("plan.schedule=") + schedule});
    const program::Program prog = program::compile(s);
    const report::Trace t = sim::simulate(s, prog, nullptr, true);
    const workload::MemoryReport mem = workload::memory_per_rank(s);
    int memory_counters = 0;
    for (const report::Counter& c : t.counters) {
      if (c.rank < 0) continue;
      ++memory_counters;
      const auto& stage = mem.stages[static_cast<std::size_t>(scenario::coord_of(s.plan, c.rank).pp)];
      INFO(schedule << " rank " << c.rank);
      CHECK(c.peak() == Approx(stage.total()).epsilon(1e-12));
      // Everything stored for the backward pass is freed by the end of the step.
      CHECK(c.samples.back().second == Approx(stage.total() - stage.activations - stage.logits).epsilon(1e-12));
    }
    CHECK(memory_counters == s.plan.world());
  }
}

TEST_CASE("link counters show a lone transfer at full rate, and two sharing at half", "[sim][simulate][counters]") {
  // Two ranks, one 1 GB forward activation each way; pp 2 on a 100 GB/s NVSwitch: every
  // send crosses gpu0 -> nvswitch alone, so the busiest link runs at 100 % while it sends.
  const auto s = equal_layers(2, 2, 1e6, "global_batch: 1, micro_batch: 1", "pp: 2");
  const program::Program prog = program::compile(s);
  const report::Trace t = sim::simulate(s, prog, ideal(s), nullptr, true);
  bool found = false;
  for (const report::Counter& c : t.counters) {
    if (c.link < 0 || c.samples.empty()) continue;
    found = true;
    CHECK(c.peak() == Approx(1.0).epsilon(1e-12));
    CHECK(c.samples.back().second == 0.0);
  }
  CHECK(found);
}

TEST_CASE("tp communication overlap: the ring's blocks run under the GEMM blocks, or wait for them, by hand", "[simulate][tp]") {
  // One layer of a GPT (h 256, 4 heads, s 128, b 1) over tp 4 with sequence parallelism, on
  // the ideal device: a column block of the QKV GEMM is 2 x 32 x 192 x 256 FLOP = 3.146 us;
  // a ring block is 32 rows x 256 x 4 bytes. At 100 GB/s it travels in 0.328 us, under the
  // GEMM: the four blocks run back to back. At 1 GB/s it takes 32.77 us: block j starts j
  // transfers after the ring begins, as each block is passed on once it has arrived.
  for (const double gbps : {100.0, 1.0}) {
    const std::string text = fmt::format(R"(cluster:
  gpus_per_node: 4
  device: {{peak: {{fp32: 1 TFLOPS}}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}}
  intra_node: {{fabric: nvswitch, bandwidth: {} GB/s, latency: 0us}}
  collectives: mpi
model: {{layers: 1, hidden: 256, heads: 4, vocab: 1024, seq_len: 128}}
training: {{global_batch: 1, micro_batch: 1, precision: fp32, recompute: none}}
plan: {{tp: 4, sequence_parallel: true, tp_comm_overlap: true}}
)",
                                         gbps);
    const scenario::Scenario s = scenario::load_text(text, "overlap.yaml");
    const program::Program prog = program::compile(s);
    const report::Trace t = sim::simulate(s, prog, ideal(s));
    const double gemm = 2.0 * 32 * 192 * 256 / 1e12;
    const double hop = 32.0 * 256 * 4 / (gbps * 1e9);
    std::vector<double> start(4, -1.0), end(4, -1.0);
    double ring_begins = -1.0;
    for (const report::Span& sp : t.spans) {
      const program::Op& o = prog.ops[static_cast<std::size_t>(sp.op)];
      if (o.rank != 0 || o.what != program::ComputeWhat::layer_attention || o.category != program::Category::forward)
        continue;
      if (o.kind == program::OpKind::compute && o.piece == program::LayerPiece::prepare)
        ring_begins = static_cast<double>(sp.end) * 1e-12;
      if (o.kind == program::OpKind::compute && o.piece == program::LayerPiece::column) {
        start[static_cast<std::size_t>(o.step)] = static_cast<double>(sp.start) * 1e-12;
        end[static_cast<std::size_t>(o.step)] = static_cast<double>(sp.end) * 1e-12;
      }
    }
    REQUIRE(ring_begins >= 0.0);
    for (int j = 0; j < 4; ++j) {
      INFO(fmt::format("{} GB/s, block {}", gbps, j));
      CHECK(end[static_cast<std::size_t>(j)] - start[static_cast<std::size_t>(j)] == Approx(gemm).epsilon(1e-6));
      CHECK(start[static_cast<std::size_t>(j)] - ring_begins == Approx(j * std::max(gemm, hop)).margin(1e-12));
    }
  }
}

TEST_CASE("GB200 NVL72: a tensor-parallel group of 16 stays in the NVLink domain, on DGX B200 it leaves the node", "[simulate][presets]") {
  // The same GPT-3 175B plan (2 layers, tp 16) on one NVL72 rack and on two DGX B200 nodes:
  // its tp traffic crosses only NVLink in the first, NICs too in the second.
  for (const char* cluster : {"gb200-nvl72", "dgx-b200"}) {
    const std::string text = fmt::format(R"(cluster: {{preset: {}, nodes: {}}}
model: {{preset: gpt3-175b, layers: 2}}
training: {{global_batch: 2, micro_batch: 1, precision: bf16}}
plan: {{tp: 16, dp: 1, pp: 1, sequence_parallel: true}}
)",
                                         cluster, std::string(cluster) == "dgx-b200" ? 2 : 1);
    const scenario::Scenario s = scenario::load_text(text, "blackwell.yaml");
    const report::Trace t = sim::predict(s).trace;
    const topology::Cluster c(s.cluster);
    double intra = 0.0, inter = 0.0;
    for (const report::LinkUse& l : t.links) {
      const double tp = l.by_dimension[0];
      (c.link(l.link).cls == topology::LinkClass::intra ? intra : inter) += tp;
    }
    INFO(cluster);
    CHECK(intra > 0.0);
    if (std::string(cluster) == "gb200-nvl72") {
      CHECK(inter == 0.0);
    } else {
      CHECK(inter > 0.0);
    }
  }
}

TEST_CASE("a collective's SMs slow the compute beside it by the share it holds", "[sim][simulate][contention]") {
  // dp 2 on NCCL, 4 layers with a bucket each: each of the first three buckets' all-reduce
  // (c seconds) runs under the next layer's backward (longer than c), the last after the
  // backward. With collective_sms 25 of 100 SMs the compute beside a collective runs at
  // 0.75: in c it does 0.75 c of work, so each of those three layers ends 0.25 c later and
  // the step 0.75 c later. No other op overlaps a collective.
  const std::string text = R"(cluster:
  gpus_per_node: 2
  device:
    peak: {fp32: 1 TFLOPS}
    memory: 80GiB
    memory_bandwidth: 1000 TB/s
    workspace: 0B
    kernels: {sms: 100, gemm_efficiency: 1.0, l2_bandwidth: 1000 TB/s, memory_efficiency: 1.0, collective_sms: 25}
  intra_node: {fabric: nvswitch, bandwidth: 100 GB/s, latency: 0us}
model:
  layers:
    - {name: l0, params: 25e6, forward_flops: 1e10, activations: 1}
    - {name: l1, params: 25e6, forward_flops: 1e10, activations: 1}
    - {name: l2, params: 25e6, forward_flops: 1e10, activations: 1}
    - {name: l3, params: 25e6, forward_flops: 1e10, activations: 1}
training: {global_batch: 2, micro_batch: 1, precision: fp32}
plan: {dp: 2, collective: ring, bucket_size: 100MB}
)";
  const scenario::Scenario held = scenario::load_text(text, "contention.yaml");
  const scenario::Scenario free =
      scenario::load_text(text, "contention.yaml", std::vector<std::string>{"cluster.device.kernels.collective_sms=0"});
  const program::Program prog = program::compile(held);
  const report::Trace a = sim::simulate(free, prog);
  const report::Trace b = sim::simulate(held, prog);
  // c: the first bucket's all-reduce, uncontended.
  double c = 0.0;
  int collectives = 0;
  for (const report::Span& sp : a.spans) {
    if (sp.rank != 0 || sp.kind != program::OpKind::collective) continue;
    if (++collectives == 1) c = static_cast<double>(sp.end - sp.start) * 1e-12;
  }
  REQUIRE(collectives >= 4);
  REQUIRE(c > 0.0);
  const double slower = static_cast<double>(b.step_end - a.step_end) * 1e-12;
  CHECK(slower == Approx(0.75 * c).epsilon(1e-3));
  // The collectives themselves take as long: SMs, not links, are what they share.
  double c_held = 0.0;
  for (const report::Span& sp : b.spans) {
    if (sp.rank == 0 && sp.kind == program::OpKind::collective) {
      c_held = static_cast<double>(sp.end - sp.start) * 1e-12;
      break;
    }
  }
  CHECK(c_held == Approx(c).epsilon(1e-9));
  // As many SMs as the device has are refused at the key.
  CHECK_THROWS_WITH(scenario::load_text(text, "contention.yaml",
                                        std::vector<std::string>{"cluster.device.kernels.collective_sms=100"}),
                    Catch::Contains("collective_sms") && Catch::Contains("fewer SMs than the device's 100"));
}

TEST_CASE("collectives on several streams hold their SMs together, up to the device's", "[sim][contention]") {
  sim::CollectiveHold hold(100, 2);
  CHECK(hold.speed(0) == 1.0);
  CHECK(hold.change(0, 24, +1));
  CHECK(hold.speed(0) == Approx(0.76));
  CHECK(hold.change(0, 16, +1));  // a second stream's collective beside it
  CHECK(hold.speed(0) == Approx(0.60));
  CHECK(hold.speed(1) == 1.0);
  CHECK(hold.change(0, 24, -1));
  CHECK(hold.speed(0) == Approx(0.84));
  CHECK_FALSE(hold.change(1, 0, +1));  // holding none changes nothing
  for (int i = 0; i < 5; ++i) hold.change(1, 24, +1);
  CHECK(hold.speed(1) == 0.0);  // never more than every SM
  CHECK(hold.change(0, 16, -1));
  CHECK(hold.speed(0) == 1.0);
}

TEST_CASE("tp overlap's reduce-scatters hold Transformer Engine's SMs, not NCCL's channels", "[sim][contention]") {
  // One tp group of 2 with sequence parallelism and tp overlap, no dp or pp: the
  // collectives beside compute are the userbuffers reduce-scatters (16 SMs whatever NCCL
  // holds), so the step moves with collective_sms only by the norms' sum after the backward
  // (no compute beside it), and is slower than with no SMs held at all.
  const std::string text = R"(cluster: {preset: dgx-h100, nodes: 1, gpus_per_node: 2}
model: {name: small, layers: 4, hidden: 2048, heads: 16, ffn_hidden: 8192, vocab: 32000, seq_len: 2048}
training: {global_batch: 2, micro_batch: 1}
plan: {tp: 2, sequence_parallel: true, tp_comm_overlap: true}
)";
  auto step = [&](int sms) {
    const scenario::Scenario s = scenario::load_text(
        text, "ub.yaml", std::vector<std::string>{fmt::format("cluster.device.kernels.collective_sms={}", sms)});
    return static_cast<double>(sim::simulate(s, program::compile(s)).step_end) * 1e-12;
  };
  const double none = step(0), nccl24 = step(24), nccl64 = step(64);
  CHECK(nccl24 > none * 1.001);
  CHECK(nccl64 == Approx(nccl24).epsilon(0.002));
}
