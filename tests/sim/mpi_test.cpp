// What the simulator models of MPI on CPU ranks (cluster.collectives: mpi), each case
// worked out by hand: Open MPI's nonblocking collectives as libnbc runs them (binomial
// reduce and broadcast), rendezvous sends above the transport's eager limit, and the CPU
// time a rank's traffic between nodes takes from its compute.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../topology/fixtures.hpp"
#include "scenario/load.hpp"
#include "report/trace.hpp"
#include "sim/collectives.hpp"
#include "sim/simulate.hpp"

using namespace parasim;
using namespace parasim::sim;

namespace {

// `nodes` nodes of one device each, every NIC at B = 1 GB/s on one switch, `a` seconds
// NIC to NIC.
topology::ClusterSpec one_per_node(int nodes, double a) {
  topology::ClusterSpec s = topology::test::dgx(nodes, topology::NetworkShape::single_switch);
  s.gpus_per_node = 1;
  s.inter.nics_per_node = 1;
  s.inter.nic_bandwidth = 1e9;
  s.inter.latency = a;
  s.library = topology::CollectiveLibrary::mpi;
  return s;
}

// One hop's latency, device to device through the switch.
double hop(const topology::Cluster& c) {
  Engine engine;
  Network net(engine, c);
  return net.router().route(0, 1).latency;
}

double run_alone(const topology::Cluster& c, Algorithm a, program::CollectiveOp op, int n, double S) {
  Engine engine;
  Network net(engine, c);
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  double end = -1.0;
  run_collective(net, a, CollectiveCall{op, devices, S}, [&] { end = engine.now().to_seconds(); });
  engine.run();
  return end;
}

}  // namespace

TEST_CASE("libnbc's collectives on two ranks: the all-reduce there and back, the reduce-scatter 3S/2B",
          "[sim][mpi]") {
  const topology::Cluster c(one_per_node(2, 0.0));
  const double a = hop(c);
  const double B = 1e9;
  const double S = 64e6;
  // Member 1 sends S to member 0, which reduces and sends S back: two hops.
  CHECK(run_alone(c, Algorithm::binomial, program::CollectiveOp::all_reduce, 2, S) ==
        Approx(2 * (a + S / B)).epsilon(1e-9));
  // The same reduce, then member 0 sends member 1 its half.
  CHECK(run_alone(c, Algorithm::binomial, program::CollectiveOp::reduce_scatter, 2, S) ==
        Approx(2 * a + 1.5 * S / B).epsilon(1e-9));
  // Each member sends its half to the other at once.
  CHECK(run_alone(c, Algorithm::binomial, program::CollectiveOp::all_gather, 2, S) ==
        Approx(a + 0.5 * S / B).epsilon(1e-9));
}

TEST_CASE("libnbc's binomial all-reduce on four ranks: two reduce rounds, the root's two sends at once",
          "[sim][mpi]") {
  // Reduce: 1 -> 0 and 3 -> 2, then 2 -> 0 (S/B each). Broadcast: the root sends to 1 and
  // 2 at once (its NIC carries 2S), then 2 sends to 3: 5 S/B and four hops in all.
  const topology::Cluster c(one_per_node(4, 0.0));
  const double a = hop(c);
  const double S = 16e6;
  CHECK(run_alone(c, Algorithm::binomial, program::CollectiveOp::all_reduce, 4, S) ==
        Approx(4 * a + 5 * S / 1e9).epsilon(1e-9));
}

TEST_CASE("MPI's messages between two ranks of different nodes cross their connection in order", "[sim][mpi]") {
  // Two 64 MB messages from device 0 to device 1 (1 GB/s NICs). Shared, both would end at
  // a + 2 S/B. In order, each a rendezvous: its acknowledgement (c = 64 bytes) comes back
  // over 1 -> 0 first, in order there too: the first message's by a + c/B, its data by
  // 2a + c/B + S/B; the second's acknowledgement by 2(a + c/B), its data behind the first's,
  // by 3a + c/B + 2 S/B.
  const topology::Cluster c(one_per_node(3, 0.0));
  const double a = hop(c);
  const double S = 64e6, B = 1e9, ack = mpi_control_bytes / B;
  for (bool ordered : {false, true}) {
    Engine engine;
    Network net(engine, c);
    if (ordered) net.order_between_nodes();
    std::vector<double> ends;
    for (int k = 0; k < 2; ++k) net.transfer(0, 1, S, [&] { ends.push_back(engine.now().to_seconds()); });
    engine.run();
    REQUIRE(ends.size() == 2);
    if (ordered) {
      CHECK(ends[0] == Approx(2 * a + ack + S / B).epsilon(1e-9));
      CHECK(ends[1] == Approx(3 * a + ack + 2 * S / B).epsilon(1e-9));
    } else {
      CHECK(ends[0] == Approx(a + 2 * S / B).epsilon(1e-9));
      CHECK(ends[1] == Approx(a + 2 * S / B).epsilon(1e-9));
    }
  }
  // An eager message (64 KiB less the header) goes at once, in order behind the others.
  {
    Engine engine;
    Network net(engine, c);
    net.order_between_nodes();
    double end = -1.0;
    const double small = tcp_eager_limit - mpi_match_header;
    net.transfer(0, 1, small, [&] { end = engine.now().to_seconds(); });
    engine.run();
    CHECK(end == Approx(a + small / B).epsilon(1e-9));
  }
  // Different connections into one NIC still share it: 0 -> 1 and 2 -> 1, their
  // acknowledgements sharing device 1's NIC out (2c/B), their data its NIC in.
  {
    Engine engine;
    Network net(engine, c);
    net.order_between_nodes();
    std::vector<double> ends;
    for (int src : {0, 2}) net.transfer(src, 1, S, [&] { ends.push_back(engine.now().to_seconds()); });
    engine.run();
    REQUIRE(ends.size() == 2);
    for (double e : ends) CHECK(e == Approx(2 * a + 2 * ack + 2 * S / B).epsilon(1e-9));
  }
  // The acknowledgement waits behind a message on the reverse connection: with 64 MB
  // going 1 -> 0 since a + c/B (after its own acknowledgement), a message 0 -> 1 posted
  // at 1 ms gets its acknowledgement back once that data is through, by 2a + c/B + S/B,
  // and the acknowledgement itself, by 3a + 2c/B + S/B; its data then ends at
  // 4a + 2c/B + 2 S/B, where without the order it would end at 1 ms + 2a + c/B + S/B.
  {
    Engine engine;
    Network net(engine, c);
    net.order_between_nodes();
    double end = -1.0;
    net.transfer(1, 0, S, [] {});
    engine.after(Time::seconds(1e-3), [&] { net.transfer(0, 1, S, [&] { end = engine.now().to_seconds(); }); });
    engine.run();
    CHECK(end == Approx(4 * a + 2 * ack + 2 * S / B).epsilon(1e-9));
  }
}

TEST_CASE("an all-gather posted behind a reduce-scatter waits for it on one direction", "[sim][mpi]") {
  // Two ranks on two nodes, in order (MPI over TCP); a reduce-scatter of S posted, then an
  // all-gather of S (libnbc's: reduce 1 -> 0 of S, scatter 0 -> 1 of S/2; the all-gather's
  // halves both ways at once). The all-gather's half 1 -> 0 waits behind the reduce's S
  // there: it ends by 1.5 S/B; its half 0 -> 1 went at once. The scatter's data follows
  // its acknowledgement over 1 -> 0, behind that half: it ends by 2 S/B. (On the emulated
  // cluster at S = 0.8 MB: 50.2 and 66.9 ms; measured 50.4 and 67.5 ms.)
  const topology::Cluster c(one_per_node(2, 0.0));
  const double S = 64e6, B = 1e9;
  Engine engine;
  Network net(engine, c);
  net.order_between_nodes();
  double rs = -1.0, ag = -1.0;
  run_collective(net, Algorithm::binomial, CollectiveCall{program::CollectiveOp::reduce_scatter, {0, 1}, S},
                 [&] { rs = engine.now().to_seconds(); });
  run_collective(net, Algorithm::binomial, CollectiveCall{program::CollectiveOp::all_gather, {0, 1}, S},
                 [&] { ag = engine.now().to_seconds(); });
  engine.run();
  CHECK(ag == Approx(1.5 * S / B).margin(1e-6));
  CHECK(rs == Approx(2.0 * S / B).margin(1e-6));
}

TEST_CASE("under MPI auto runs libnbc's algorithms, under NCCL never", "[sim][mpi]") {
  const topology::Cluster c(one_per_node(4, 0.0));
  Engine engine;
  Network net(engine, c);
  for (program::CollectiveOp op :
       {program::CollectiveOp::all_reduce, program::CollectiveOp::reduce_scatter, program::CollectiveOp::all_gather}) {
    CHECK(resolve(scenario::Collective::automatic, net, {op, {0, 1, 2, 3}, 1e6}) == Algorithm::binomial);
    CHECK(resolve(scenario::Collective::ring, net, {op, {0, 1, 2, 3}, 1e6}) == Algorithm::ring);
  }
  CHECK(resolve(scenario::Collective::automatic, net, {program::CollectiveOp::all_to_all, {0, 1, 2, 3}, 1e6}) ==
        Algorithm::direct);
  topology::ClusterSpec nccl = one_per_node(4, 0.0);
  nccl.library = topology::CollectiveLibrary::nccl;
  const topology::Cluster cn(nccl);
  Network nn(engine, cn);
  CHECK(resolve(scenario::Collective::automatic, nn, {program::CollectiveOp::all_reduce, {0, 1, 2, 3}, 1e6}) !=
        Algorithm::binomial);
}

namespace {

// Two stages of one layer on two nodes (1 GB/s NICs, no latency), an ideal device of
// 1 TFLOP/s: 1 ms forward and 2 ms backward per micro-batch, each activation 1 MB (1 ms on
// the link), two micro-batches under 1F1B.
scenario::Scenario two_stages(const char* library) {
  const std::string text = fmt::format(R"(cluster:
  nodes: 2
  gpus_per_node: 1
  device: {{peak: {{fp32: 1 TFLOPS}}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}}
  intra_node: {{fabric: nvswitch, bandwidth: 100 GB/s, latency: 0us}}
  inter_node: {{nics_per_node: 1, nic_bandwidth: 8 Gbps, latency: 0us, shape: single-switch, attach_bandwidth: 1000 GB/s}}
  collectives: {}
model:
  layers:
    - {{name: l0, params: 1000, forward_flops: 1e9, activations: 250000}}
    - {{name: l1, params: 1000, forward_flops: 1e9, activations: 250000}}
training: {{global_batch: 2, micro_batch: 1, precision: fp32}}
plan: {{dp: 1, pp: 2, schedule: 1f1b}}
)",
                                       library);
  return scenario::load_text(text, "two-stages.yaml");
}

double step(const scenario::Scenario& s, DeviceProfile p) {
  p.gemm_efficiency = {{1.0, 1.0}};
  p.memory_bandwidth = 1e30;
  p.launch_overhead = 0.0;
  return simulate(s, program::compile(s), p).step_seconds();
}

}  // namespace

TEST_CASE("a send above the eager limit waits for its receive to be posted", "[sim][mpi]") {
  // Eager (NCCL's buffers): stage 0 computes F0 [0, 1], F1 [1, 2]; the activations cross
  // in [1, 2] and [2, 3]. Stage 1: F0 [2, 3], B0 [3, 5], its gradient back in [5, 6]; F1
  // (its input there since 3) [5, 6], B1 [6, 8], the gradient in [8, 9]. Stage 0: B0
  // [6, 8], B1 [9, 11].
  // Rendezvous (MPI over TCP, 1 MB > 64 KiB): stage 1 posts the receive of the second
  // activation after the send of its first gradient, at 5, so it crosses in [5, 6]:
  // F1 [6, 7], B1 [7, 9], the gradient in [9, 10], stage 0's B1 [10, 12].
  const scenario::Scenario eager = two_stages("nccl");
  const scenario::Scenario mpi = two_stages("mpi");
  const double opt = 12.0 * 1000 / 1e12;  // one layer's optimizer step
  CHECK(step(eager, default_profile(eager.cluster.device)) == Approx(11e-3 + opt).epsilon(1e-6));
  // (and the acknowledgements of the rendezvous, 64 bytes each, within a microsecond)
  CHECK(step(mpi, default_profile(mpi.cluster.device)) == Approx(12e-3 + opt).margin(1e-6));
}

TEST_CASE("a CPU rank computes slower while its traffic between nodes moves", "[sim][mpi]") {
  // dp 2 on the two nodes, two layers of 250k parameters (a 1 MB bucket each, 1 ms on the
  // link), one micro-batch: forward [0, 2], the last layer's backward [2, 4], then its
  // bucket's binomial all-reduce (1 -> 0 in [4, 5], 0 -> 1 in [5, 6]) under the first
  // layer's backward [4, 6]; the first bucket's all-reduce [6, 8].
  const scenario::Scenario s = scenario::load_text(R"(cluster:
  nodes: 2
  gpus_per_node: 1
  device: {peak: {fp32: 1 TFLOPS}, memory: 80GiB, memory_bandwidth: 1000 TB/s, workspace: 0B}
  intra_node: {fabric: nvswitch, bandwidth: 100 GB/s, latency: 0us}
  inter_node: {nics_per_node: 1, nic_bandwidth: 8 Gbps, latency: 0us, shape: single-switch, attach_bandwidth: 1000 GB/s}
  collectives: mpi
model:
  layers:
    - {name: l0, params: 250000, forward_flops: 1e9, activations: 1}
    - {name: l1, params: 250000, forward_flops: 1e9, activations: 1}
training: {global_batch: 2, micro_batch: 1, precision: fp32}
plan: {dp: 2, bucket_size: 1MB}
)",
                                                   "dp.yaml");
  DeviceProfile p = default_profile(s.cluster.device);
  const double opt = 12.0 * 500000 / 1e12;
  CHECK(step(s, p) == Approx(8e-3 + opt).margin(1e-6));  // and the acknowledgements' few 64 bytes
  // Receiving costs 0.5 ns of CPU a byte, half a core at 1 GB/s. In [4, 5] rank 0 receives
  // and computes its backward at half speed (0.5 ms of its 2 ms done); in [5, 6] rank 1
  // does, having done 1 ms, so 1.5 ms. Rank 0 ends at 5 + 1.5 = 6.5, rank 1 at 6 + 0.5 =
  // 6.5; the first bucket's all-reduce [6.5, 8.5].
  p.receive_cpu_per_byte = 0.5e-9;
  CHECK(step(s, p) == Approx(8.5e-3 + opt).margin(1e-6));
}

namespace {

// The seed scenarios on the emulated cluster: their step, profile and transfer time alone.
struct Emulated {
  scenario::Scenario scenario;
  Prediction prediction;
  double t = 0.0;  // one micro-batch's 64 KiB activation (or gradient) alone on the link
};

Emulated emulated(const std::string& file) {
  Emulated e{scenario::load(std::string(PARASIM_SOURCE_DIR "/scenarios/") + file), {}, 0.0};
  e.prediction = predict(e.scenario);
  const DeviceProfile p = profile_of(e.scenario);
  REQUIRE(p.inter_node.has_value());
  const scenario::ModelSpec& m = e.scenario.model;
  const double bytes = static_cast<double>(e.scenario.training.micro_batch) * m.seq_len * m.hidden * 4;  // fp32
  REQUIRE(bytes == 65536.0);  // at the TCP eager limit with its header: a rendezvous
  e.t = bytes / p.inter_node->bandwidth + p.inter_node->latency;
  return e;
}

// How long each transfer between the stages into `rank` took on the wire: from when both
// its send and its receive were posted (a rendezvous moves no data before) to the
// receive's end.
std::vector<double> transfers_into(const Prediction& p, int rank) {
  std::map<std::int64_t, std::int64_t> sent;  // match -> the send's start
  for (const report::Span& sp : p.trace.spans) {
    if (sp.kind == program::OpKind::send) sent[p.program.ops[static_cast<std::size_t>(sp.op)].match] = sp.start;
  }
  std::vector<double> out;
  for (const report::Span& sp : p.trace.spans) {
    if (sp.rank != rank || sp.kind != program::OpKind::recv || sp.stream != program::Stream::pp) continue;
    const std::int64_t from = std::max(sp.start, sent.at(p.program.ops[static_cast<std::size_t>(sp.op)].match));
    out.push_back(static_cast<double>(sp.end - from) * 1e-12);
  }
  return out;
}

}  // namespace

TEST_CASE("scenario 24: a two-stage 1F1B pipeline over a slow link waits for one transfer a micro-batch",
          "[scenarios][mpi]") {
  const Emulated e = emulated("emulated-pp.yaml");
  // Every activation and gradient crosses alone on its direction of the link.
  for (int rank : {0, 1}) {
    const std::vector<double> in = transfers_into(e.prediction, rank);
    REQUIRE(in.size() == 8);
    for (double t : in) CHECK(t == Approx(e.t).epsilon(0.01));
  }
  // In the steady state stage 0's forward after micro-batch k's waits for stage 1's
  // forward and backward of k and one exchange: micro-batch k + 1's activation out while
  // k's gradient comes back, the two directions at once (Megatron's
  // send_forward_recv_backward; the executor posts both before waiting).
  std::map<int, double> start;  // micro-batch -> stage 0's first forward op
  double stage1 = 0.0;          // stage 1's compute for micro-batch 3
  for (const report::Span& sp : e.prediction.trace.spans) {
    if (sp.stream != program::Stream::compute || sp.kind != program::OpKind::compute) continue;
    if (sp.rank == 0 && sp.category == program::Category::forward && !start.count(sp.micro_batch)) {
      start[sp.micro_batch] = static_cast<double>(sp.start) * 1e-12;
    }
    if (sp.rank == 1 && sp.micro_batch == 3) stage1 += sp.seconds();
  }
  CHECK(start.at(5) - start.at(4) == Approx(stage1 + e.t).epsilon(0.01));
  CHECK(start.at(6) - start.at(5) == Approx(stage1 + e.t).epsilon(0.01));
}

TEST_CASE("scenario 25: two replicas' transfers share each node's NIC and take twice as long", "[scenarios][mpi]") {
  const Emulated e = emulated("emulated-contention.yaml");
  // Stages on different nodes, both replicas' stage 0 on node 0: every activation leaves
  // through node 0's one NIC beside the other replica's, every gradient through node 1's.
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<double> in = transfers_into(e.prediction, rank);
    REQUIRE(in.size() == 4);
    for (double t : in) CHECK(t == Approx(2.0 * e.t).epsilon(0.01));
  }
}
