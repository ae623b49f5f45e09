// A cluster that is not uniform (cluster.degraded, cluster.jitter): a degraded device's
// compute takes 1 / factor as long, op by op; a degraded link carries its share of the
// bandwidth; jitter keeps each rank's mean compute and costs the step what synchronised
// ranks wait for; such a cluster is never folded.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

using namespace parasim;

namespace {

// 8 GPUs of one H100 node, dp 8: every rank computes the same ops, long enough that the
// devices, not the host issuing their kernels, set their pace.
const std::string dp8 = R"(cluster: {preset: hgx-h100}
model: {layers: 4, hidden: 4096, heads: 32, vocab: 1000, seq_len: 2048}
training: {global_batch: 32, micro_batch: 1}
plan: {dp: 8}
)";

// Each compute op's duration in picoseconds, by op id.
std::map<std::int64_t, std::int64_t> compute_durations(const report::Trace& t, int rank) {
  std::map<std::int64_t, std::int64_t> out;
  for (const report::Span& sp : t.spans) {
    if (sp.rank == rank && sp.kind == program::OpKind::compute) out[sp.op] = sp.end - sp.start;
  }
  return out;
}

scenario::Scenario load(const std::string& text, const std::vector<std::string>& sets = {}) {
  return scenario::load_text(text, "t.yaml", sets);
}

sim::Prediction full(const scenario::Scenario& s) {
  return sim::predict(s, {false, sim::FoldMode::never, {}, {}});
}

}  // namespace

TEST_CASE("a degraded device's compute ops take 1 / factor as long, op by op", "[sim][degraded]") {
  // Op by op: the collectives' hold on the SMs (which the straggler's changed timing moves
  // under other ops) left out.
  const std::string free = "cluster.device.kernels.collective_sms=0";
  const scenario::Scenario uniform = load(dp8, {free});
  const scenario::Scenario slow = load(dp8, {"cluster.degraded=[{rank: 5, factor: 0.5}]", free});
  REQUIRE(slow.cluster.compute_factor(5) == 0.5);
  REQUIRE(slow.cluster.compute_factor(4) == 1.0);
  const sim::Prediction u = full(uniform);
  const sim::Prediction d = full(slow);
  for (int rank : {4, 5}) {
    const auto a = compute_durations(u.trace, rank);
    const auto b = compute_durations(d.trace, rank);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() > 10);
    // The device's time doubles (picoseconds rounded once per op); an op whose kernels wait
    // for the host to issue them (the step's first) less.
    std::size_t doubled = 0;
    for (const auto& [op, ps] : a) {
      if (rank == 4) CHECK(std::abs(b.at(op) - ps) <= 2);
      if (rank == 5) {
        CHECK(b.at(op) > ps);
        CHECK(b.at(op) <= 2 * ps + 2);
        doubled += std::abs(b.at(op) - 2 * ps) <= 2 ? 1 : 0;
      }
    }
    if (rank == 5) CHECK(static_cast<double>(doubled) >= 0.9 * static_cast<double>(a.size()));
  }
  // The others wait for it: the bottleneck is the straggler, the step at least its compute.
  const topology::Cluster cluster(slow.cluster);
  const report::StepFigures f = report::step_figures(slow, d.trace, cluster);
  CHECK(f.slowest_rank == 5);
  CHECK(f.slowest_compute == Approx(2 * f.median_compute).epsilon(0.01));
  CHECK(f.limit.kind == "straggler");
  CHECK_THAT(f.bottleneck, Catch::Matchers::Contains("rank 5 computes at 0.5x"));
  CHECK(f.step_time >= f.slowest_compute);
  CHECK(f.step_time > report::step_figures(uniform, u.trace, cluster).step_time * 1.5);
  // A node's entry slows each of its devices; entries multiply.
  const scenario::Scenario node = load(dp8, {"cluster.degraded=[{node: 0, factor: 0.5}, {rank: 2, factor: 0.5}]"});
  CHECK(node.cluster.compute_factor(0) == 0.5);
  CHECK(node.cluster.compute_factor(2) == 0.25);
}

TEST_CASE("a degraded link carries its share of the bandwidth", "[sim][degraded]") {
  // Two nodes of one GPU and one NIC each, a pipeline across them: each micro-batch's
  // activation (4 x 2048 x 4096 x 2 bytes = 64 MiB) crosses gpu -> nic -> switch -> nic ->
  // gpu, bound by the NIC's 50 GB/s.
  const std::string text = R"(cluster:
  nodes: 2
  gpus_per_node: 1
  device: h100-sxm
  intra_node: {fabric: nvswitch, bandwidth: 450 GB/s}
  inter_node: {nics_per_node: 1, nic_bandwidth: 400Gbps, latency: 5us}
model: {layers: 2, hidden: 4096, heads: 32, vocab: 1000, seq_len: 2048}
training: {global_batch: 8, micro_batch: 4}
plan: {pp: 2}
)";
  const scenario::Scenario uniform = load(text);
  const scenario::Scenario slow = load(text, {"cluster.degraded=[{link: n0.nic0, factor: 0.25}]"});
  const topology::Cluster a(uniform.cluster), b(slow.cluster);
  const std::vector<int> links = b.links_named("n0.nic0");
  CHECK(links.size() == 4);  // gpu <-> nic and nic <-> switch, both ways
  for (int id : links) CHECK(b.link(id).bandwidth == a.link(id).bandwidth * 0.25);
  const std::string up = b.link_name(links.front());  // a link named alone: one direction
  REQUIRE(b.links_named(up).size() == 1);
  CHECK(b.links_named(up).front() == links.front());
  // The forward transfers: their time beyond the latency grows 4x.
  auto sends = [](const sim::Prediction& p) {
    std::vector<double> out;
    for (const report::Span& sp : p.trace.spans) {
      if (sp.kind == program::OpKind::send && !p.program.ops[static_cast<std::size_t>(sp.op)].gradient) {
        out.push_back(sp.seconds());
      }
    }
    return out;
  };
  const auto fast = sends(full(uniform));
  const auto degraded = sends(full(slow));
  REQUIRE(fast.size() == 2);
  REQUIRE(degraded.size() == 2);
  const double bytes = 4.0 * 2048 * 4096 * 2;
  CHECK(fast[0] == Approx(bytes / 50e9).epsilon(0.02));
  CHECK(degraded[0] == Approx(bytes / 12.5e9).epsilon(0.02));
}

TEST_CASE("jitter keeps each rank's mean compute, costs the step the waiting, and repeats bit for bit",
          "[sim][degraded]") {
  const std::string tp2 = R"(cluster: {preset: hgx-h100}
model: {layers: 8, hidden: 1024, heads: 16, vocab: 1000, seq_len: 512}
training: {global_batch: 64, micro_batch: 1}
plan: {tp: 2, dp: 4}
)";
  const scenario::Scenario uniform = load(tp2);
  const scenario::Scenario noisy = load(tp2, {"cluster.jitter={sigma: 0.1, seed: 7}"});
  const sim::Prediction u = full(uniform);
  const sim::Prediction n = full(noisy);
  // The mean of exp(sigma z - sigma^2 / 2) is 1: over ~1,000 ops a rank's compute moves by
  // about 0.1 / sqrt(1000) = 0.3 %.
  std::int64_t before = 0, after = 0;
  int ops = 0, changed = 0;
  const auto a = compute_durations(u.trace, 3);
  const auto b = compute_durations(n.trace, 3);
  for (const auto& [op, ps] : a) {
    before += ps;
    after += b.at(op);
    ++ops;
    changed += b.at(op) != ps ? 1 : 0;
  }
  REQUIRE(ops > 500);
  CHECK(changed == ops);
  CHECK(static_cast<double>(after) == Approx(static_cast<double>(before)).epsilon(0.02));
  // The tp pairs wait for the slower of each pair at every all-reduce.
  CHECK(n.trace.step_end > u.trace.step_end);
  // Deterministic: the same seed, the same spans; another seed, another step.
  const sim::Prediction again = full(noisy);
  REQUIRE(again.trace.spans.size() == n.trace.spans.size());
  for (std::size_t i = 0; i < n.trace.spans.size(); ++i) {
    CHECK(again.trace.spans[i].end == n.trace.spans[i].end);
  }
  const sim::Prediction other = full(load(tp2, {"cluster.jitter={sigma: 0.1, seed: 8}"}));
  CHECK(other.trace.step_end != n.trace.step_end);
}

TEST_CASE("a cluster that is not uniform is simulated rank by rank, never folded", "[sim][degraded]") {
  const scenario::Scenario slow = load(dp8, {"cluster.degraded=[{rank: 5, factor: 0.5}]"});
  const sim::Prediction p = sim::predict(slow, {false, sim::FoldMode::always, {}, {}});
  CHECK_FALSE(p.program.one_replica());
  CHECK_THAT(p.not_folded, Catch::Matchers::Contains("not uniform"));
  // A list entry reached by its index, as a sweep varies it.
  const scenario::Scenario half =
      load(dp8, {"cluster.degraded=[{rank: 5, factor: 0.5}]", "cluster.degraded.0.factor=0.25"});
  CHECK(half.cluster.compute_factor(5) == 0.25);
}
