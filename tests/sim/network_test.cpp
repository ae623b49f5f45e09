#include <catch2/catch.hpp>

#include "../topology/fixtures.hpp"
#include "sim/collectives.hpp"

using namespace parasim;
using namespace parasim::sim;
using topology::test::dgx;

namespace {

// Runs one transfer or collective alone and returns when it finished, in seconds.
template <typename Start>
double timed(const topology::Cluster& c, Start start) {
  Engine engine;
  Network net(engine, c);
  double end = -1.0;
  start(net, [&] { end = engine.now().to_seconds(); });
  engine.run();
  return end;
}

// `nodes` nodes of `gpus` GPUs sharing one 50 GB/s NIC each, all on one switch.
topology::ClusterSpec one_nic_per_node(int nodes, int gpus) {
  topology::ClusterSpec s = dgx(nodes, topology::NetworkShape::single_switch);
  s.gpus_per_node = gpus;
  s.inter.nics_per_node = 1;
  return s;
}

}  // namespace

TEST_CASE("an uncontended transfer takes latency plus size over bottleneck", "[sim][network]") {
  // gpu0 -> gpu5 through the NVSwitch: 2 us, 450 GB/s. 450 MB -> 1 ms + 2 us.
  const topology::Cluster c(dgx(1));
  const double t = timed(c, [](Network& n, auto done) { n.transfer(0, 5, 450e6, done); });
  CHECK(t == Approx(1e-3 + 2e-6).epsilon(1e-9));
}

TEST_CASE("two transfers into one GPU share its link", "[sim][network]") {
  // gpu1 -> gpu0 and gpu2 -> gpu0 share nvswitch -> gpu0: 225 GB/s each, both end at
  // 2 us + 450 MB / 225 GB/s = 2.002 ms.
  const topology::Cluster c(dgx(1));
  Engine engine;
  Network net(engine, c);
  std::vector<double> ends;
  for (int src : {1, 2}) net.transfer(src, 0, 450e6, [&] { ends.push_back(engine.now().to_seconds()); });
  engine.run();
  REQUIRE(ends.size() == 2);
  for (double e : ends) CHECK(e == Approx(2e-3 + 2e-6).epsilon(1e-9));
}

TEST_CASE("a finished flow hands its share to the survivors", "[sim][network]") {
  // 450 MB and 900 MB into gpu0 at 225 GB/s each; at 2.002 ms the first is done and the
  // second, with 450 MB left, speeds up to 450 GB/s: done at 2.002 + 1 ms.
  const topology::Cluster c(dgx(1));
  Engine engine;
  Network net(engine, c);
  double small = 0.0;
  double large = 0.0;
  net.transfer(1, 0, 450e6, [&] { small = engine.now().to_seconds(); });
  net.transfer(2, 0, 900e6, [&] { large = engine.now().to_seconds(); });
  engine.run();
  CHECK(small == Approx(2e-3 + 2e-6).epsilon(1e-9));
  CHECK(large == Approx(3e-3 + 2e-6).epsilon(1e-9));
}

TEST_CASE("ring all-reduce matches 2(n-1)/n S/B + 2(n-1)a uncontended", "[sim][collectives]") {
  const topology::Cluster c(dgx(1));
  const double B = 450e9;
  const double a = 2e-6;
  for (int n : {2, 4, 8}) {
    for (double S : {1e6, 64e6, 1e9}) {
      std::vector<int> ranks;
      for (int r = 0; r < n; ++r) ranks.push_back(r);
      const double t = timed(
          c, [&](Network& net, auto done) { ring_collective(net, program::CollectiveOp::all_reduce, ranks, S, done); });
      CHECK(t == Approx(2.0 * (n - 1) / n * S / B + 2.0 * (n - 1) * a).epsilon(1e-6));
      const double rs = timed(c, [&](Network& net, auto done) {
        ring_collective(net, program::CollectiveOp::reduce_scatter, ranks, S, done);
      });
      CHECK(rs == Approx(1.0 * (n - 1) / n * S / B + (n - 1) * a).epsilon(1e-6));
    }
  }
}

TEST_CASE("two all-reduces over one inter-node link each slow down as max-min predicts", "[sim][collectives]") {
  // 2 nodes x 2 GPUs, one 50 GB/s NIC per node on one switch (4 us NIC to NIC). Ring
  // {0, 2} and ring {1, 3} both cross the NICs. Alone: 2 steps of 4 us + (S/2)/50 GB/s.
  // Together each NIC link carries two flows at 25 GB/s: 2 steps of 4 us + (S/2)/25 GB/s.
  const topology::Cluster c(one_nic_per_node(2, 2));
  const double S = 100e6;
  const double alone = timed(c, [&](Network& net, auto done) {
    ring_collective(net, program::CollectiveOp::all_reduce, {0, 2}, S, done);
  });
  CHECK(alone == Approx(2 * (4e-6 + (S / 2) / 50e9)).epsilon(1e-6));
  Engine engine;
  Network net(engine, c);
  double a_end = 0.0;
  double b_end = 0.0;
  ring_collective(net, program::CollectiveOp::all_reduce, {0, 2}, S, [&] { a_end = engine.now().to_seconds(); });
  ring_collective(net, program::CollectiveOp::all_reduce, {1, 3}, S, [&] { b_end = engine.now().to_seconds(); });
  engine.run();
  CHECK(a_end == Approx(2 * (4e-6 + (S / 2) / 25e9)).epsilon(1e-6));
  CHECK(b_end == Approx(a_end));
}

TEST_CASE("the same transfers give bit-identical times on every run", "[sim][network]") {
  const topology::Cluster c(dgx(4, topology::NetworkShape::fat_tree, 16, 2.0));
  auto run = [&] {
    Engine engine;
    Network net(engine, c);
    std::vector<std::int64_t> ends;
    for (int i = 0; i < 32; ++i) {
      net.transfer(i, (i * 7 + 5) % 32, 1e6 * (1 + i % 5), [&] { ends.push_back(engine.now().picoseconds()); });
    }
    engine.run();
    return ends;
  };
  CHECK(run() == run());
}

namespace {

std::vector<int> first(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

double run_alone(const topology::Cluster& c, Algorithm a, program::CollectiveOp op, std::vector<int> ranks, double S) {
  return timed(c, [&](Network& net, auto done) { run_collective(net, a, {op, std::move(ranks), S}, done); });
}

}  // namespace

TEST_CASE("double binary tree all-reduce: pipeline fill of 2d hops plus the busiest port's load", "[sim][collectives]") {
  // One NVSwitch node: 450 GB/s per port, 2 us between any two GPUs. With 8 members
  // (depth 3) some port carries four S/2 flows: 6a + 2S/B. With 4 (depth 2) every
  // port carries three: 4a + 3S/2B. Worked out from the two trees by hand in
  // collectives.hpp.
  const topology::Cluster c(dgx(1));
  const double B = 450e9;
  const double a = 2e-6;
  for (double S : {1e6, 256e6}) {
    CHECK(run_alone(c, Algorithm::tree, program::CollectiveOp::all_reduce, first(8), S) ==
          Approx(6 * a + 2 * S / B).epsilon(1e-6));
    CHECK(run_alone(c, Algorithm::tree, program::CollectiveOp::all_reduce, first(4), S) ==
          Approx(4 * a + 1.5 * S / B).epsilon(1e-6));
  }
}

TEST_CASE("the tree's latency grows with log n, the ring's with n", "[sim][collectives]") {
  // 16 nodes, one GPU each on the fat-tree: for a tiny buffer the ring pays 2(n-1) hops,
  // the tree 2 log2 n.
  const topology::Cluster c(one_nic_per_node(16, 1));
  const double S = 1024;
  const double ring = run_alone(c, Algorithm::ring, program::CollectiveOp::all_reduce, first(16), S);
  const double tree = run_alone(c, Algorithm::tree, program::CollectiveOp::all_reduce, first(16), S);
  CHECK(tree < ring / 3);
  // NCCL's tuner (auto under NCCL) takes the tree for the tiny buffer, the ring for 1 GB.
  topology::ClusterSpec nccl = one_nic_per_node(16, 1);
  nccl.library = topology::CollectiveLibrary::nccl;
  const topology::Cluster cn(nccl);
  Engine engine;
  Network net(engine, cn);
  const CollectiveCall small{program::CollectiveOp::all_reduce, first(16), S};
  const CollectiveCall large{program::CollectiveOp::all_reduce, first(16), 1e9};
  CHECK(resolve(scenario::Collective::automatic, net, small) == Algorithm::tree);
  CHECK(resolve(scenario::Collective::automatic, net, large) == Algorithm::ring);
}

TEST_CASE("NVLS all-reduce: each port carries S once each way, a + S/B", "[sim][collectives]") {
  const topology::Cluster c(dgx(1));
  const double S = 450e6;
  CHECK(run_alone(c, Algorithm::nvls, program::CollectiveOp::all_reduce, first(8), S) ==
        Approx(2e-6 + 1e-3).epsilon(1e-6));
  // Twice the ring's algorithm bandwidth at 8 GPUs: NCCL's auto takes it for large buffers.
  topology::ClusterSpec nccl = dgx(1);
  nccl.library = topology::CollectiveLibrary::nccl;
  const topology::Cluster cn(nccl);
  Engine engine;
  Network net(engine, cn);
  CHECK(resolve(scenario::Collective::automatic, net, {program::CollectiveOp::all_reduce, first(8), S}) ==
        Algorithm::nvls);
  // Reduce-scatter has no switch form: ring.
  CHECK(resolve(scenario::Collective::nvls, net, {program::CollectiveOp::reduce_scatter, first(8), S}) ==
        Algorithm::ring);
}

TEST_CASE("direct reduce-scatter and all-gather: one step of (n-1)/n S/B + a", "[sim][collectives]") {
  const topology::Cluster c(dgx(1));
  const double B = 450e9;
  const double S = 800e6;
  for (int n : {2, 4, 8}) {
    const double one = (n - 1.0) / n * S / B + 2e-6;
    CHECK(run_alone(c, Algorithm::direct, program::CollectiveOp::reduce_scatter, first(n), S) ==
          Approx(one).epsilon(1e-6));
    CHECK(run_alone(c, Algorithm::direct, program::CollectiveOp::all_gather, first(n), S) == Approx(one).epsilon(1e-6));
    CHECK(run_alone(c, Algorithm::direct, program::CollectiveOp::all_reduce, first(n), S) ==
          Approx(2 * one).epsilon(1e-6));
  }
}

TEST_CASE("an all-to-all sends each member 1/n of every buffer at once, whatever the setting", "[sim][collectives]") {
  // Inside a node every GPU's port carries (n-1)/n S each way: (n-1)/n S/B + a.
  const topology::Cluster c(dgx(1));
  const double B = 450e9;
  const double S = 64e6;
  for (int n : {2, 4, 8}) {
    Engine engine;
    Network net(engine, c);
    const CollectiveCall call{program::CollectiveOp::all_to_all, first(n), S};
    for (scenario::Collective setting :
         {scenario::Collective::automatic, scenario::Collective::ring, scenario::Collective::nvls}) {
      CHECK(choose(setting, net, call).algorithm == Algorithm::direct);
    }
    const double t = (n - 1.0) / n * S / B + 2e-6;
    CHECK(estimate_seconds(Algorithm::direct, net, call) == Approx(t).epsilon(1e-9));
    CHECK(timed(c, [&](Network& nw, auto done) {
            run_collective(nw, choose(scenario::Collective::automatic, nw, call), call, done);
          }) == Approx(t).epsilon(1e-6));
  }
}

TEST_CASE("the auto estimate of an uncontended ring is its closed form", "[sim][collectives]") {
  const topology::Cluster c(dgx(1));
  Engine engine;
  Network net(engine, c);
  const double S = 64e6;
  CHECK(estimate_seconds(Algorithm::ring, net, {program::CollectiveOp::all_reduce, first(8), S}) ==
        Approx(2 * 7.0 / 8 * S / 450e9 + 14 * 2e-6).epsilon(1e-9));
  CHECK(estimate_seconds(Algorithm::tree, net, {program::CollectiveOp::all_reduce, first(8), S}) ==
        Approx(run_alone(c, Algorithm::tree, program::CollectiveOp::all_reduce, first(8), S)).epsilon(1e-6));
}

TEST_CASE("hierarchical needs several nodes with several members each, else falls back to ring", "[sim][collectives]") {
  const topology::Cluster c(dgx(2));
  Engine engine;
  Network net(engine, c);
  CHECK(resolve(scenario::Collective::hierarchical, net, {program::CollectiveOp::all_reduce, first(16), 1e6}) ==
        Algorithm::hierarchical);
  CHECK(resolve(scenario::Collective::hierarchical, net, {program::CollectiveOp::all_reduce, first(8), 1e6}) ==
        Algorithm::ring);
  CHECK(resolve(scenario::Collective::hierarchical, net, {program::CollectiveOp::all_reduce, {0, 8}, 1e6}) ==
        Algorithm::ring);
  // nvls over two nodes runs hierarchically.
  CHECK(resolve(scenario::Collective::nvls, net, {program::CollectiveOp::all_reduce, first(16), 1e6}) ==
        Algorithm::hierarchical);
}
