// The compiler's data-parallel synchronisation and sharding, and context parallelism's
// ring: which collectives and transfers each plan issues, between whom, of what size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "program/program.hpp"
#include "program_helpers.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;
using namespace parasim::program;
using parasim::program::test::gpt;
using parasim::program::test::unfinished;

TEST_CASE("context parallelism: keys and values go round the cp ring, their gradients' sums one step behind",
          "[compile][cp]") {
  // cp 4 over 128 positions: each rank 32 of each sequence (chunks i and 7 - i of 16).
  // A block is b x 32 positions x 2 (K and V) x 256 values x 2 bytes = 65,536 bytes.
  const Scenario s = gpt({"plan.cp=4"});
  const Program prog = compile(s);
  const double kv = 2.0 * 32 * 2 * 256 * 2;
  CHECK(cp_kv_block_bytes(s) == kv);
  // Per rank, layer, micro-batch and pass: forward 3 sends and 3 receives of keys and
  // values and 4 blocks; backward the same, 3 merges, 4 sends of gradients' sums and 4
  // receives (3 from the ranks before, 1 home).
  struct Count {
    int kv_send = 0, kv_recv = 0, grad_send = 0, grad_recv = 0, blocks = 0, merges = 0;
  };
  std::map<std::tuple<int, int, int, int>, Count> per;  // rank, layer, mb, backward
  for (const Op& o : prog.ops) {
    const bool backward = (o.kind == OpKind::compute ? o.category : o.pass) == Category::backward;
    Count& c = per[{o.rank, o.layer, o.micro_batch, backward ? 1 : 0}];
    if (o.category == Category::cp_comm) {
      CHECK(o.bytes == kv);
      CHECK(o.stream == Stream::pp);
      const Coord me = coord_of(s.plan, o.rank);
      Coord peer = me;
      peer.cp = (me.cp + (o.kind == OpKind::send ? 1 : 3)) % 4;  // to rank i + 1, from rank i - 1
      CHECK(o.peer == rank_of(s.plan, peer));
      (o.kind == OpKind::send ? (o.gradient ? c.grad_send : c.kv_send) : (o.gradient ? c.grad_recv : c.kv_recv))++;
    }
    if (o.kind == OpKind::compute && o.piece == LayerPiece::block) ++c.blocks;
    if (o.kind == OpKind::compute && o.piece == LayerPiece::merge) ++c.merges;
  }
  int passes = 0;
  for (const auto& [key, c] : per) {
    const auto [rank, layer, mb, backward] = key;
    if (layer < 0 || layer >= 8 || (c.blocks == 0 && c.kv_send == 0)) continue;
    ++passes;
    CHECK(c.blocks == 4);
    CHECK(c.kv_send == 3);
    CHECK(c.kv_recv == 3);
    CHECK(c.grad_send == (backward ? 4 : 0));
    CHECK(c.grad_recv == (backward ? 4 : 0));
    CHECK(c.merges == (backward ? 3 : 0));
  }
  CHECK(passes == 4 * 8 * 16 * 2);  // ranks x layers x micro-batches x passes
  // The ring's blocks together are the rank's share of the attention core: b x heads GEMMs
  // of 32 queries against 128 keys, twice (scores and values), 2 FLOPs each, of d = 32.
  double blocks = 0.0;
  for (const Op& o : prog.ops) {
    if (o.rank == 0 && o.layer == 0 && o.micro_batch == 0 && o.category == Category::forward &&
        o.piece == LayerPiece::block) {
      blocks += o.flops;
    }
  }
  CHECK(blocks == 2.0 * 2 * (2.0 * 8) * 32 * 128 * 32);
  // The cp group, and the gradients' group over dp x cp.
  Program scratch;
  scratch.world = 4;
  const std::vector<std::vector<int>> kinds = add_groups(s.plan, s.model, scratch);
  int cp_groups_seen = 0, dp_size = 0;
  for (const Group& g : prog.groups) {
    if (g.dim == Dim::cp) {
      ++cp_groups_seen;
      CHECK(g.ranks == std::vector<int>{0, 1, 2, 3});
    }
    if (g.dim == Dim::dp) dp_size = static_cast<int>(g.ranks.size());
  }
  CHECK(cp_groups_seen == 1);
  CHECK(dp_size == 4);  // dp 1 x cp 4: the cp ranks' gradients are summed
  for (int r = 0; r < 4; ++r) CHECK(scratch.groups[static_cast<std::size_t>(kinds[cp_groups][static_cast<std::size_t>(r)])].dim == Dim::cp);
  CHECK(unfinished(prog) == 0);
  CHECK(op_name(prog, [&] {
          for (std::size_t i = 0; i < prog.ops.size(); ++i) {
            const Op& o = prog.ops[i];
            if (o.rank == 1 && o.category == Category::cp_comm && o.kind == OpKind::send && o.layer == 3 &&
                o.micro_batch == 0 && o.pass == Category::backward && o.gradient && o.step == 2) {
              return static_cast<std::int64_t>(i);
            }
          }
          return std::int64_t{-1};
        }()) == "cp ring #2 send kv-grad L3 mb0 -> 2");
}

TEST_CASE("data-parallel buckets follow reverse layer order and wait for their gradients", "[compile][dp]") {
  // 8 layers of 12·256² + 13·256 = 789,760 parameters, reduced as fp32 main gradients (4
  // bytes, Megatron's under bf16): a 4 MiB bucket closes once it reaches the size, after 2 layers; four such buckets, then the embedding alone. The
  // first also carries the final norm (2·256, "layer 8", the tied head has no weights of
  // its own).
  const Scenario s = gpt({"plan.dp=4", "plan.bucket_size=4MiB"});
  const Program prog = compile(s);
  std::vector<const Op*> buckets;
  for (std::int64_t id : prog.order[0]) {
    const Op& o = prog.ops[static_cast<std::size_t>(id)];
    if (o.category == Category::dp_comm) buckets.push_back(&o);
  }
  REQUIRE(buckets.size() == 5);
  CHECK(buckets[0]->layer == 6);
  CHECK(buckets[0]->layer_end == 9);
  CHECK(buckets[3]->layer == 0);
  CHECK(buckets[4]->layer == -1);  // the embedding, whose gradient is ready last
  CHECK(buckets[0]->bytes == Approx((2 * 789760.0 + 2 * 256) * 4));
  CHECK(buckets[4]->bytes == Approx((1024 + 128) * 256 * 4.0));  // token and position embeddings
  CHECK(buckets[0]->collective == CollectiveOp::all_reduce);
  // Overlap: the first bucket waits for layer 6's backward of the last micro-batch, long
  // before the end of the backward pass.
  const std::int64_t first_dep = prog.deps[buckets[0]->deps_begin + buckets[0]->deps_count - 1];
  const Op& dep = prog.ops[static_cast<std::size_t>(first_dep)];
  CHECK(dep.category == Category::backward);
  CHECK(dep.micro_batch == s.micro_batches() - 1);
  // Without overlap every bucket waits for the end of the backward pass.
  const Program flat = compile(gpt({"plan.dp=4", "plan.bucket_size=4MiB", "plan.overlap_dp=false"}));
  std::set<std::int64_t> waits;
  for (std::int64_t id : flat.order[0]) {
    const Op& o = flat.ops[static_cast<std::size_t>(id)];
    if (o.category == Category::dp_comm) waits.insert(flat.deps[o.deps_begin]);
  }
  CHECK(waits.size() == 1);
  // ZeRO-1: reduce-scatter the gradients, all-gather the parameters after the optimizer.
  const Program zero = compile(gpt({"plan.dp=4", "plan.bucket_size=4MiB", "plan.zero=1"}));
  int rs = 0;
  int ag = 0;
  for (const Op& o : zero.ops) {
    if (o.category != Category::dp_comm || o.rank != 0) continue;
    rs += o.collective == CollectiveOp::reduce_scatter ? 1 : 0;
    ag += o.collective == CollectiveOp::all_gather ? 1 : 0;
  }
  CHECK(rs == 5);
  CHECK(ag == 5);
  CHECK(unfinished(zero) == 0);
  // overlap_param_gather: the same five gathers open the step, in forward order (the
  // embedding's bucket first), before any compute and waiting on nothing; the first
  // forward touching a bucket's layers waits for its gather, and nothing follows the
  // optimizer.
  const Program early = compile(gpt({"plan.dp=4", "plan.bucket_size=4MiB", "plan.zero=1", "plan.overlap_param_gather=true"}));
  std::vector<std::int64_t> gathers;
  bool computed = false;
  for (std::int64_t id : early.order[0]) {
    const Op& o = early.ops[static_cast<std::size_t>(id)];
    if (o.kind == OpKind::compute) computed = true;
    if (o.category != Category::dp_comm || o.collective != CollectiveOp::all_gather) continue;
    CHECK_FALSE(computed);
    CHECK(o.deps_count == 0);
    gathers.push_back(id);
  }
  REQUIRE(gathers.size() == 5);
  CHECK(early.ops[static_cast<std::size_t>(gathers.front())].layer == -1);
  CHECK(early.ops[static_cast<std::size_t>(gathers.back())].layer == 6);
  const Op& last = early.ops[static_cast<std::size_t>(early.order[0].back())];
  CHECK(last.what == ComputeWhat::optimizer);
  std::map<std::int64_t, int> waiting;  // gather -> forward ops that wait on it
  for (std::int64_t id : early.order[0]) {
    const Op& o = early.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::compute || o.category != Category::forward) continue;
    for (std::int64_t d : early.deps_of(id)) {
      if (std::find(gathers.begin(), gathers.end(), d) != gathers.end()) {
        ++waiting[d];
        CHECK(o.micro_batch == 0);  // the first forward of its layers
        const Op& g = early.ops[static_cast<std::size_t>(d)];
        CHECK(o.layer >= g.layer);
        CHECK(o.layer < g.layer_end);
      }
    }
  }
  CHECK(waiting.size() == 5);
  CHECK(unfinished(early) == 0);
}

TEST_CASE("the host issues each bucket's collective from the backward, right after its last gradient",
          "[compile][dp]") {
  // Megatron's gradient hooks (and, interleaved, its grad_sync_func) launch a bucket's
  // collective as soon as its gradients are final, in the middle of the backward. In each
  // rank's issue order a bucket comes right after the last op it waits for, each stream's
  // ops keep their order (the executor runs them from it), and every op comes after its
  // own rank's dependencies.
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"plan.dp=4", "plan.bucket_size=4MiB"},
           {"plan.dp=2", "plan.pp=2", "plan.virtual_stages=2", "plan.zero=1", "plan.bucket_size=1MiB"},
           {"plan.dp=2", "plan.tp=2", "plan.pp=2", "plan.sequence_parallel=true", "plan.zero=1"}}) {
    const Program prog = compile(gpt(sets));
    for (std::size_t r = 0; r < prog.order.size(); ++r) {
      const std::vector<std::int64_t>& order = prog.order[r];
      std::map<std::int64_t, std::size_t> at;
      std::vector<std::int64_t> last(stream_count, -1);
      int buckets = 0;
      for (std::size_t i = 0; i < order.size(); ++i) {
        const Op& o = prog.ops[static_cast<std::size_t>(order[i])];
        CHECK(order[i] > last[static_cast<std::size_t>(o.stream)]);
        last[static_cast<std::size_t>(o.stream)] = order[i];
        std::size_t latest = 0;
        for (std::int64_t d : prog.deps_of(order[i])) {
          if (prog.ops[static_cast<std::size_t>(d)].rank != static_cast<int>(r)) continue;
          REQUIRE(at.count(d) == 1);
          latest = std::max(latest, at[d]);
        }
        at[order[i]] = i;
        if (o.category != Category::dp_comm || o.collective == CollectiveOp::all_gather || i == 0) continue;
        ++buckets;
        // Right after what it waits for, or after the dp stream's previous bucket.
        const Op& before = prog.ops[static_cast<std::size_t>(order[i - 1])];
        CHECK((latest == i - 1 || before.category == Category::dp_comm));
      }
      CHECK(buckets > 0);
    }
    // The optimizer is issued last but for ZeRO-1's gathers, once its gradients are in.
    const Op& opt = prog.ops[static_cast<std::size_t>(*std::find_if(
        prog.order[0].begin(), prog.order[0].end(),
        [&](std::int64_t id) { return prog.ops[static_cast<std::size_t>(id)].category == Category::optimizer; }))];
    CHECK(opt.host_waits);
    CHECK(unfinished(prog) == 0);
  }
}

TEST_CASE("ZeRO-2 and ZeRO-3 reduce-scatter each unit every micro-batch, ZeRO-3 gathers it before each pass",
          "[compile][dp]") {
  // dp 4, global batch 32, micro-batch 2: 4 micro-batches. Units of the one stage: the
  // embedding (token and position rows, (1024 + 128)·256), 8 layers of 789,760, the final
  // norm (2·256; the tied head computes with the embedding's word matrix).
  const double layer = 789760.0;
  const double embedding = (1024 + 128) * 256.0;
  const double norm = 2 * 256.0;
  auto dp_ops = [](const Program& p, CollectiveOp what) {
    std::vector<const Op*> out;
    for (std::int64_t id : p.order[0]) {
      const Op& o = p.ops[static_cast<std::size_t>(id)];
      if (o.category == Category::dp_comm && o.collective == what) out.push_back(&o);
    }
    return out;
  };
  auto sum_bytes = [](const std::vector<const Op*>& ops) {
    double b = 0.0;
    for (const Op* o : ops) b += o->bytes;
    return b;
  };
  const double params = embedding + 8 * layer + norm;

  // ZeRO-2: 10 units x 4 micro-batches reduce-scatters of fp32 main gradients (bf16
  // training), each after its unit's backward of that micro-batch; after the optimizer one
  // all-gather of the bf16 parameters per unit.
  const Program two = compile(gpt({"plan.dp=4", "plan.zero=2"}));
  const auto rs = dp_ops(two, CollectiveOp::reduce_scatter);
  const auto ag = dp_ops(two, CollectiveOp::all_gather);
  REQUIRE(rs.size() == 40);
  CHECK(sum_bytes(rs) == Approx(4 * params * 4.0));
  REQUIRE(ag.size() == 10);
  CHECK(sum_bytes(ag) == Approx(params * 2.0));
  for (const Op* o : rs) {
    CHECK(o->micro_batch >= 0);
    CHECK(o->layer_end == o->layer + 1);
    // It waits for the backward of its unit and micro-batch.
    bool waits = false;
    for (std::int64_t d : two.deps_of(o - two.ops.data())) {
      const Op& b = two.ops[static_cast<std::size_t>(d)];
      waits = waits || (b.category == Category::backward && b.micro_batch == o->micro_batch &&
                        (b.layer == o->layer || (o->layer == 8 && b.what == ComputeWhat::lm_head)));
    }
    CHECK(waits);
  }
  CHECK(unfinished(two) == 0);

  // ZeRO-3: per micro-batch the forward gathers the embedding, 8 layers, and for the tied
  // head the embedding again and the norm (11); the backward the head's two, 8 layers (10);
  // nothing after the optimizer. Full recompute adds the 8 layers once more.
  const Program three = compile(gpt({"plan.dp=4", "plan.zero=3"}));
  const auto gathers = dp_ops(three, CollectiveOp::all_gather);
  CHECK(dp_ops(three, CollectiveOp::reduce_scatter).size() == 40);
  REQUIRE(gathers.size() == 4 * 21);
  CHECK(sum_bytes(gathers) == Approx(4 * (3 * embedding + 16 * layer + 2 * norm) * 2.0));
  const Op& last = three.ops[static_cast<std::size_t>(three.order[0].back())];
  CHECK(last.what == ComputeWhat::optimizer);
  CHECK(dp_ops(compile(gpt({"plan.dp=4", "plan.zero=3", "training.recompute=full"})), CollectiveOp::all_gather).size() ==
        4 * 29);
  // Every layer pass waits for a gather of its own layer, and the gather of the next layer
  // (the prefetch) waits only for the compute before this one: one layer whole besides.
  for (std::int64_t id : three.order[0]) {
    const Op& o = three.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::compute || o.what != ComputeWhat::layer) continue;
    int own = 0;
    for (std::int64_t d : three.deps_of(id)) {
      const Op& g = three.ops[static_cast<std::size_t>(d)];
      if (g.category == Category::dp_comm && g.collective == CollectiveOp::all_gather && g.layer == o.layer) ++own;
    }
    CHECK(own == 1);
  }
  for (const Op* g : gathers) {
    for (std::int64_t d : three.deps_of(g - three.ops.data())) {
      CHECK(three.ops[static_cast<std::size_t>(d)].kind == OpKind::compute);
    }
  }
  CHECK(unfinished(three) == 0);
  // dp 1: nothing to shard, the same Program as without ZeRO.
  CHECK(compile(gpt({"plan.zero=3"})).ops.size() == compile(gpt({})).ops.size());
}

TEST_CASE("ZeRO-3 with sequence parallelism: the layer norm run as its input's gather is posted waits for the unit",
          "[compile][dp]") {
  // Sequence parallelism's all-gather of a forward (or recompute) input starts with the
  // layer norm of this rank's rows, which reads the unit's parameters: it must follow an
  // all-gather of the unit in the step, else it reads the share another rank owns (the
  // executor's NaN between steps).
  for (const bool full : {false, true}) {
    const std::string recompute = full ? "training.recompute=full" : "training.recompute=none";
    const Program p = compile(gpt({"plan.dp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.zero=3", recompute}));
    int checked = 0;
    for (std::int64_t id : p.order[0]) {
      const Op& o = p.ops[static_cast<std::size_t>(id)];
      if (o.tp_role != TpRole::gather_input || o.pass == Category::backward) continue;
      // Is an all-gather of its unit among the op's dependencies, transitively?
      std::set<std::int64_t> seen;
      std::vector<std::int64_t> stack{id};
      bool reached = false;
      while (!stack.empty() && !reached) {
        const std::int64_t at = stack.back();
        stack.pop_back();
        for (std::int64_t d : p.deps_of(at)) {
          const Op& g = p.ops[static_cast<std::size_t>(d)];
          reached = reached || (g.category == Category::dp_comm && g.collective == CollectiveOp::all_gather &&
                                g.layer == o.layer);
          if (seen.insert(d).second) stack.push_back(d);
        }
      }
      INFO(recompute << ": " << op_name(p, id));
      CHECK(reached);
      ++checked;
    }
    // 8 micro-batches per replica, each: 8 layers x 2 halves and the head (16 more under
    // recompute).
    CHECK(checked == (full ? 8 * (17 + 16) : 8 * 17));
    CHECK(unfinished(p) == 0);
  }
}

TEST_CASE("hybrid sharding: ZeRO over shard groups of consecutive dp ranks, shards summed over the replicas",
          "[compile][dp]") {
  // dp 8 in shard groups of 4 (2 replicas), 2 micro-batches, the 10 units of the test above.
  const Scenario s = gpt({"plan.dp=8", "plan.zero=3", "plan.shard_group=4"});
  const Program p = compile(s);
  int shards = 0, replicas = 0;
  for (const Group& g : p.groups) {
    if (g.part == GroupPart::shard) {  // dp indices 4k .. 4k + 3
      ++shards;
      REQUIRE(g.ranks.size() == 4);
      for (std::size_t i = 0; i < 4; ++i) {
        CHECK(coord_of(s.plan, g.ranks[i]).dp == coord_of(s.plan, g.ranks[0]).dp + static_cast<int>(i));
      }
      CHECK(coord_of(s.plan, g.ranks[0]).dp % 4 == 0);
    } else if (g.part == GroupPart::replica) {  // dp indices i and i + 4
      ++replicas;
      REQUIRE(g.ranks.size() == 2);
      CHECK(coord_of(s.plan, g.ranks[1]).dp == coord_of(s.plan, g.ranks[0]).dp + 4);
    }
  }
  CHECK(shards == 2 * 2);  // each with its copy for the gathers, which run on their own stream
  CHECK(replicas == 4);
  int rs = 0, sums = 0, gathers = 0;
  double sum_bytes = 0.0;
  for (std::int64_t id : p.order[0]) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (o.category != Category::dp_comm) continue;
    const Group& g = p.groups[static_cast<std::size_t>(o.group)];
    if (o.collective == CollectiveOp::reduce_scatter) {
      ++rs;
      CHECK(g.part == GroupPart::shard);
    } else if (o.collective == CollectiveOp::all_reduce) {
      ++sums;
      sum_bytes += o.bytes;
      CHECK(g.part == GroupPart::replica);
      CHECK(g.ranks.size() == 2);
      CHECK(o.micro_batch == s.micro_batches() - 1);  // once, after the last micro-batch
    } else {
      ++gathers;
      CHECK(g.part == GroupPart::shard);
      CHECK(o.stream == Stream::dp_gather);
    }
  }
  CHECK(rs == 10 * 2);
  CHECK(sums == 10);
  std::set<int> rs_seen, gathers_seen;
  for (std::int64_t id : p.order[0]) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (o.collective == CollectiveOp::reduce_scatter) rs_seen.insert(o.group);
    if (o.category == Category::dp_comm && o.collective == CollectiveOp::all_gather) gathers_seen.insert(o.group);
  }
  REQUIRE(rs_seen.size() == 1);
  REQUIRE(gathers_seen.size() == 1);
  CHECK(*rs_seen.begin() != *gathers_seen.begin());
  CHECK(p.groups[static_cast<std::size_t>(*rs_seen.begin())].ranks ==
        p.groups[static_cast<std::size_t>(*gathers_seen.begin())].ranks);
  CHECK(gathers == 21 * 2);
  CHECK(sum_bytes == Approx(((1024 + 128) * 256.0 + 8 * 789760.0 + 2 * 256.0) * 4 / 4));  // a quarter of the fp32 grads
  CHECK(unfinished(p) == 0);
}


TEST_CASE("offloading copies each unit's gradients out after every backward and its parameters in before every pass",
          "[compile][offload]") {
  // The GPT of the ZeRO test on one GPU of an HGX H100 (hosts described), 16 micro-batches.
  const double layer = 789760.0;
  const double embedding = (1024 + 128) * 256.0;
  const double norm = 2 * 256.0;
  const double params = embedding + 8 * layer + norm;
  auto copies = [](const Program& p, bool to_host) {
    std::vector<const Op*> out;
    for (std::int64_t id : p.order[0]) {
      const Op& o = p.ops[static_cast<std::size_t>(id)];
      if (o.kind == OpKind::copy && o.to_host == to_host) out.push_back(&o);
    }
    return out;
  };
  auto bytes = [](const std::vector<const Op*>& ops) {
    double b = 0.0;
    for (const Op* o : ops) b += o->bytes;
    return b;
  };
  const std::vector<std::string> one{"cluster.nodes=1", "cluster.gpus_per_node=1", "plan.offload_optimizer=true"};

  // The optimizer alone: 10 units' bf16 gradients out per micro-batch, each after its
  // unit's backward of it; the host's step; the updated bf16 weights in, unit by unit.
  const Program opt = compile(gpt(one));
  const auto out = copies(opt, true);
  REQUIRE(out.size() == 16 * 10);
  CHECK(bytes(out) == Approx(16 * params * 2.0));
  for (const Op* o : out) {
    CHECK(o->stream == Stream::to_host);
    CHECK(o->category == Category::offload);
    bool waits = false;
    for (std::int64_t d : opt.deps_of(o - opt.ops.data())) {
      const Op& b = opt.ops[static_cast<std::size_t>(d)];
      waits = waits || (b.category == Category::backward && b.micro_batch == o->micro_batch);
    }
    CHECK(waits);
  }
  const auto in = copies(opt, false);
  REQUIRE(in.size() == 10);
  CHECK(bytes(in) == Approx(params * 2.0));
  std::int64_t host = -1;
  for (std::int64_t id : opt.order[0]) {
    if (opt.ops[static_cast<std::size_t>(id)].stream == Stream::host) host = id;
  }
  REQUIRE(host >= 0);
  const Op& step = opt.ops[static_cast<std::size_t>(host)];
  CHECK(step.what == ComputeWhat::optimizer);
  CHECK(step.bytes == Approx(30.0 * params));  // host_optimizer_bytes: AdamW, bf16 weights
  for (const Op* o : in) {
    const auto d = opt.deps_of(o - opt.ops.data());
    CHECK(std::find(d.begin(), d.end(), host) != d.end());
  }
  // A unit's next backward waits until its gradients of the micro-batch before are out.
  CHECK(unfinished(opt) == 0);
  for (std::int64_t id : opt.order[0]) {
    const Op& o = opt.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::compute || o.category != Category::backward || o.what != ComputeWhat::layer ||
        o.micro_batch == 0) {
      continue;
    }
    bool waits = false;
    for (std::int64_t d : opt.deps_of(id)) {
      const Op& c = opt.ops[static_cast<std::size_t>(d)];
      waits = waits || (c.kind == OpKind::copy && c.to_host && c.layer == o.layer && c.micro_batch == o.micro_batch - 1);
    }
    CHECK(waits);
  }

  // The parameters too: each pass fetches its units (forward 11 with the tied head's
  // embedding again, backward 10), one ahead; nothing comes back after the host's step.
  std::vector<std::string> both = one;
  both.push_back("plan.offload_params=true");
  const Program all = compile(gpt(both));
  const auto fetch = copies(all, false);
  REQUIRE(fetch.size() == 16 * 21);
  CHECK(bytes(fetch) == Approx(16 * (3 * embedding + 16 * layer + 2 * norm) * 2.0));
  CHECK(copies(all, true).size() == 16 * 10);
  CHECK(all.ops[static_cast<std::size_t>(all.order[0].back())].stream == Stream::host);
  for (std::int64_t id : all.order[0]) {
    const Op& o = all.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::compute || o.what != ComputeWhat::layer) continue;
    int own = 0;
    for (std::int64_t d : all.deps_of(id)) {
      const Op& c = all.ops[static_cast<std::size_t>(d)];
      own += c.kind == OpKind::copy && !c.to_host && c.layer == o.layer ? 1 : 0;
    }
    CHECK(own == 1);
  }
  CHECK(unfinished(all) == 0);

  // dp 4 under ZeRO-3: each rank copies its quarter of a unit in, then the unit is
  // all-gathered; its gradients are reduce-scattered, then its quarter goes out.
  const Program sharded =
      compile(gpt({"plan.dp=4", "plan.zero=3", "plan.offload_optimizer=true", "plan.offload_params=true"}));
  CHECK(bytes(copies(sharded, false)) == Approx(4 * (3 * embedding + 16 * layer + 2 * norm) * 2.0 / 4));
  CHECK(bytes(copies(sharded, true)) == Approx(4 * params * 2.0 / 4));
  for (const Op* o : copies(sharded, true)) {
    const auto d = sharded.deps_of(o - sharded.ops.data());
    REQUIRE(d.size() == 1);
    CHECK(sharded.ops[static_cast<std::size_t>(d[0])].collective == CollectiveOp::reduce_scatter);
  }
  CHECK(unfinished(sharded) == 0);
  CHECK_THAT(op_name(all, fetch.front() - all.ops.data()), Catch::Matchers::Equals("fetch params embedding"));
  CHECK_THAT(op_name(opt, out.front() - opt.ops.data()), Catch::Matchers::StartsWith("offload grads"));
}

TEST_CASE("offloaded activations leave after each layer's forward and come back one layer ahead of its backward",
          "[compile][offload]") {
  // The small GPT on one GPU of an HGX H100, 16 micro-batches of 8 layers, no recompute.
  const Scenario s = gpt({"cluster.nodes=1", "cluster.gpus_per_node=1", "plan.offload_activations=true"});
  const Program p = compile(s);
  const double bytes = layer_activation_bytes(s.model, 2, 1, false, Recompute::none, 2, true, 0);
  std::map<std::pair<int, int>, std::int64_t> out;
  std::map<std::pair<int, int>, std::int64_t> in;
  for (std::int64_t id : p.order[0]) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::copy) continue;
    CHECK(o.copied == Copied::activations);
    CHECK(o.bytes == Approx(bytes));
    (o.to_host ? out : in)[{o.layer, o.micro_batch}] = id;
  }
  REQUIRE(out.size() == 16 * 8);
  REQUIRE(in.size() == 16 * 8);
  for (std::int64_t id : p.order[0]) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (o.kind != OpKind::compute || o.what != ComputeWhat::layer) continue;
    const auto deps = p.deps_of(id);
    auto has = [&](std::int64_t d) { return std::find(deps.begin(), deps.end(), d) != deps.end(); };
    if (o.category == Category::backward) {
      // Its activations are back before it starts.
      CHECK(has(in.at({o.layer, o.micro_batch})));
    } else {
      // Its copy out waits for it.
      const auto od = p.deps_of(out.at({o.layer, o.micro_batch}));
      CHECK(std::find(od.begin(), od.end(), id) != od.end());
    }
  }
  // A copy back waits for its copy out, and for the backward before (one layer ahead).
  for (const auto& [key, id] : in) {
    const auto d = p.deps_of(id);
    CHECK(std::find(d.begin(), d.end(), out.at(key)) != d.end());
    if (key.first < 7) {
      bool after = false;
      for (std::int64_t x : d) {
        const Op& c = p.ops[static_cast<std::size_t>(x)];
        after = after || (c.category == Category::backward && c.layer == key.first + 2 && c.micro_batch == key.second);
      }
      CHECK((after || key.first == 6));
    }
  }
  CHECK(unfinished(p) == 0);
  CHECK_THAT(op_name(p, out.begin()->second), Catch::Matchers::Equals("offload activations L0 mb0"));
}
