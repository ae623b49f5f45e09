// Folding identical data-parallel replicas (sim/network.hpp, sim::predict): one replica's
// ops are simulated and every flow stands for its copies in the other replicas. Where the
// topology maps each replica's routes onto the next one's link by link, the folded step
// must equal the full simulation of every rank; elsewhere it is a mean-field
// approximation, which must stay close to the full simulation.
#include <catch2/catch.hpp>

#include <filesystem>

#include "scenario/load.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"

using namespace parasim;
namespace fs = std::filesystem;

namespace {

const fs::path root = PARASIM_SOURCE_DIR;

struct Both {
  scenario::Scenario s;
  sim::Prediction full;
  sim::Prediction folded;
};

Both both(const scenario::Scenario& s, bool counters = false) {
  return {s, sim::predict(s, {counters, sim::FoldMode::never}), sim::predict(s, {counters, sim::FoldMode::always})};
}

Both predicted(const std::string& file) {
  return both(scenario::load((root / "scenarios" / file).string()));
}

}  // namespace

TEST_CASE("folding is exact where every replica's routes map onto the next one's", "[sim][fold]") {
  // (Not the CPU quickstart: MPI's binomial all-reduce is no shift of itself.)
  for (const std::string file : {"dp-one-node.yaml", "hybrid-32-gpus.yaml", "refresh-h100.yaml"}) {
    INFO(file);
    const Both b = predicted(file);
    REQUIRE(b.folded.program.one_replica());
    CHECK_FALSE(b.full.program.one_replica());
    CHECK(b.folded.stats.exact);
    CHECK(b.folded.stats.replicas == b.s.plan.dp);
    // One replica's ops, and its flows only.
    CHECK(b.folded.stats.ops * static_cast<std::uint64_t>(b.s.plan.dp) == b.full.stats.ops);
    CHECK(b.folded.stats.flows < b.full.stats.flows);
    CHECK(b.folded.trace.step_seconds() == Approx(b.full.trace.step_seconds()).epsilon(1e-9));

    const topology::Cluster cluster(b.s.cluster);
    const report::StepFigures ff = report::step_figures(b.s, b.full.trace, cluster);
    const report::StepFigures fo = report::step_figures(b.s, b.folded.trace, cluster);
    CHECK(fo.bubble_fraction == Approx(ff.bubble_fraction).margin(1e-9));
    REQUIRE(fo.ranks.size() == ff.ranks.size());
    for (std::size_t r = 0; r < ff.ranks.size(); ++r) {
      for (std::size_t d = 0; d < 3; ++d) {
        CHECK(fo.ranks[r].comm[d] == Approx(ff.ranks[r].comm[d]).margin(1e-12));
        CHECK(fo.ranks[r].exposed[d] == Approx(ff.ranks[r].exposed[d]).margin(1e-12));
      }
    }
    // Every link carries what it carries in the full simulation.
    REQUIRE(fo.busiest_links.size() == ff.busiest_links.size());
    for (std::size_t i = 0; i < ff.busiest_links.size(); ++i) {
      CHECK(fo.busiest_links[i].bytes == Approx(ff.busiest_links[i].bytes).epsilon(1e-9));
      CHECK(fo.busiest_links[i].utilisation == Approx(ff.busiest_links[i].utilisation).epsilon(1e-9));
    }
  }
}

TEST_CASE("a folded trace mirrors replica 0: per-rank figures and memory counters", "[sim][fold]") {
  const Both b = both(scenario::load((root / "scenarios" / "hybrid-32-gpus.yaml").string()), true);
  const report::Trace& t = b.folded.trace;
  REQUIRE(t.folded());
  for (int r = 0; r < t.world; ++r) {
    scenario::Coord c = scenario::coord_of(b.s.plan, r);
    c.dp = 0;
    CHECK(t.mirror(r) == scenario::rank_of(b.s.plan, c));
  }
  for (const report::Span& sp : t.spans) CHECK(scenario::coord_of(b.s.plan, sp.rank).dp == 0);
  // Memory counters for replica 0's ranks, with the full simulation's peaks.
  int memory = 0;
  for (const report::Counter& c : t.counters) {
    if (c.rank < 0) continue;
    ++memory;
    for (const report::Counter& f : b.full.trace.counters) {
      if (f.rank == c.rank) CHECK(c.peak() == Approx(f.peak()));
    }
  }
  CHECK(memory == b.s.plan.world() / b.s.plan.dp);
}

TEST_CASE("folding with a tree across the replicas is approximate and stays within 5 % of the full simulation",
          "[sim][fold]") {
  // 16 DGX-class nodes on an oversubscribed fat tree of small leaves (two NICs each), with
  // a step dominated by data-parallel synchronisation. The data-parallel all-reduces run
  // as trees, whose flows differ from replica to replica: folded, they run in
  // full and their load on a class of links is spread evenly over the class, which misses
  // the tree's busiest ports (this stress case comes out about 4 % short). With rings the
  // same plan folds exactly, ECMP spines and all.
  const scenario::Scenario s = scenario::load_text(R"(name: ecmp
cluster:
  preset: dgx-h100
  nodes: 16
  inter_node: {shape: fat-tree, leaf_downlinks: 2, oversubscription: 2, routing: ecmp}
model: {layers: 8, hidden: 2048, heads: 16, vocab: 32000, seq_len: 1024}
training: {global_batch: 32, micro_batch: 1, precision: bf16}
plan: {tp: 8, pp: 2, dp: 8, bucket_size: 8MB, collective: tree}
)",
                                                   "ecmp.yaml");
  const Both b = both(s);
  REQUIRE(b.folded.program.one_replica());
  CHECK_FALSE(b.folded.stats.exact);
  CHECK(b.folded.stats.algorithms.count("tree") == 1);
  CHECK(b.folded.trace.step_seconds() == Approx(b.full.trace.step_seconds()).epsilon(0.05));

  scenario::Scenario rings = s;
  rings.plan.collective = scenario::Collective::ring;
  const Both r = both(rings);
  CHECK(r.folded.stats.exact);
  CHECK(r.folded.trace.step_seconds() == Approx(r.full.trace.step_seconds()).epsilon(1e-9));
  // Automatic folding leaves such a small plan to the full simulation.
  const sim::Prediction automatic = sim::predict(s);
  CHECK_FALSE(automatic.program.one_replica());
  CHECK_FALSE(automatic.not_folded.empty());
}

TEST_CASE("a pipeline across a fat tree's spines folds exactly under destination routing, not under ECMP",
          "[sim][fold]") {
  // 16 HGX H100 nodes, four to a leaf of 32 NICs, 32 spines; each replica's 8 stages on
  // every other node, so stage transfers cross leaves. By destination (InfiniBand's
  // D-mod-k) a transfer's spine is its destination's port on its leaf: the two replicas'
  // transfers climb to disjoint spines and each replica's meet as replica 0's do. Hashed
  // per pair (ECMP), some collide on an uplink, differently in each replica.
  const std::string yaml = R"(name: spines
cluster: {preset: hgx-h100, nodes: 16, inter_node: {routing: ROUTING}}
model: {layers: 8, hidden: 1024, heads: 16, vocab: 50304, seq_len: 1024}
training: {global_batch: 16, micro_batch: 1, precision: bf16}
plan: {tp: 8, pp: 8, dp: 2}
)";
  auto with = [&](const std::string& routing) {
    std::string text = yaml;
    text.replace(text.find("ROUTING"), 7, routing);
    return both(scenario::load_text(text, "spines.yaml"));
  };
  const Both d = with("destination");
  CHECK(d.folded.stats.exact);
  CHECK(d.folded.trace.step_seconds() == Approx(d.full.trace.step_seconds()).epsilon(1e-9));
  const topology::Cluster cluster(d.s.cluster);
  const double pp_full = report::step_figures(d.s, d.full.trace, cluster).ranks[0].comm[1];
  CHECK(report::step_figures(d.s, d.folded.trace, cluster).ranks[0].comm[1] == Approx(pp_full).epsilon(1e-9));

  const Both e = with("ecmp");
  CHECK_FALSE(e.folded.stats.exact);
  // A collision slows a transfer: ECMP's pipeline time is no less than by destination.
  CHECK(report::step_figures(e.s, e.full.trace, cluster).ranks[0].comm[1] >= pp_full);
}

TEST_CASE("folding is deterministic: the same scenario gives the same folded trace", "[sim][fold]") {
  const scenario::Scenario s = scenario::load((root / "scenarios" / "refresh-h100.yaml").string());
  const sim::Prediction a = sim::predict(s, {false, sim::FoldMode::always});
  const sim::Prediction b = sim::predict(s, {false, sim::FoldMode::always});
  REQUIRE(a.trace.spans.size() == b.trace.spans.size());
  for (std::size_t i = 0; i < a.trace.spans.size(); ++i) {
    CHECK(a.trace.spans[i].start == b.trace.spans[i].start);
    CHECK(a.trace.spans[i].end == b.trace.spans[i].end);
  }
}
