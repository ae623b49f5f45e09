#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "plan/load.hpp"
#include "plan/program.hpp"

#include <fmt/format.h>

using namespace parasim::plan;

namespace {

Scenario gpt(std::vector<std::string> sets) {
  // A small GPT on 2 x 8 GPUs; tests vary the plan through overrides.
  const std::string text = R"(cluster: {preset: hgx-h100, nodes: 2}
model: {layers: 8, hidden: 256, heads: 8, vocab: 1024, seq_len: 128}
training: {global_batch: 32, micro_batch: 2}
plan: {dp: 1}
)";
  return load_text(text, "c.yaml", sets);
}

double compute_flops(const Program& p) {
  double f = 0.0;
  for (const Op& o : p.ops) {
    if (o.kind == OpKind::compute && o.category != Category::optimizer) f += o.flops;
  }
  return f;
}

// Runs the program under its execution rules with zero costs; returns how many ops never
// completed (0 = it runs to the end without deadlock).
std::size_t unfinished(const Program& p) {
  const std::size_t n = p.ops.size();
  // Structure first: every dependency is an earlier op of the same rank.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::int64_t d : p.deps_of(static_cast<std::int64_t>(i))) {
      REQUIRE(d >= 0);
      REQUIRE(static_cast<std::size_t>(d) < i);
      REQUIRE(p.ops[static_cast<std::size_t>(d)].rank == p.ops[i].rank);
    }
  }
  std::vector<char> done(n, 0);
  std::vector<std::size_t> cursor(p.order.size() * stream_count, 0);
  // Per rank and stream, the op ids in program order.
  std::vector<std::vector<std::int64_t>> lanes(p.order.size() * stream_count);
  for (std::size_t r = 0; r < p.order.size(); ++r) {
    for (std::int64_t id : p.order[r]) {
      lanes[r * stream_count + static_cast<std::size_t>(p.ops[static_cast<std::size_t>(id)].stream)].push_back(id);
    }
  }
  std::map<std::int64_t, std::int64_t> send_of;  // match -> send op
  std::map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& o = p.ops[i];
    if (o.kind == OpKind::send) send_of[o.match] = static_cast<std::int64_t>(i);
    if (o.kind == OpKind::collective) members[o.match].push_back(static_cast<std::int64_t>(i));
  }
  auto deps_done = [&](std::int64_t id) {
    for (std::int64_t d : p.deps_of(id)) {
      if (!done[static_cast<std::size_t>(d)]) return false;
    }
    return true;
  };
  // The head of a serial lane, or any not-yet-done op of the pp lane (posted, independent).
  auto ready = [&](std::int64_t id) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (!deps_done(id)) return false;
    if (o.kind == OpKind::recv) return static_cast<bool>(done[static_cast<std::size_t>(send_of.at(o.match))]);
    return true;
  };
  std::size_t completed = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
      auto& ids = lanes[lane];
      const bool serial = lane % stream_count != static_cast<std::size_t>(Stream::pp);
      for (std::size_t k = cursor[lane]; k < ids.size(); ++k) {
        const std::int64_t id = ids[k];
        if (done[static_cast<std::size_t>(id)]) continue;
        const Op& o = p.ops[static_cast<std::size_t>(id)];
        bool go = ready(id);
        if (go && o.kind == OpKind::collective) {
          // Every member must be at the head of its own lane and ready.
          for (std::int64_t m : members.at(o.match)) {
            const Op& mo = p.ops[static_cast<std::size_t>(m)];
            const auto& ml = lanes[static_cast<std::size_t>(mo.rank) * stream_count + static_cast<std::size_t>(mo.stream)];
            const std::size_t head = cursor[static_cast<std::size_t>(mo.rank) * stream_count + static_cast<std::size_t>(mo.stream)];
            go = go && head < ml.size() && ml[head] == m && ready(m);
          }
          if (go) {
            for (std::int64_t m : members.at(o.match)) {
              done[static_cast<std::size_t>(m)] = 1;
              ++cursor[static_cast<std::size_t>(p.ops[static_cast<std::size_t>(m)].rank) * stream_count +
                       static_cast<std::size_t>(p.ops[static_cast<std::size_t>(m)].stream)];
              ++completed;
            }
            progress = true;
          }
        } else if (go) {
          done[static_cast<std::size_t>(id)] = 1;
          ++completed;
          progress = true;
        }
        if (serial) break;
      }
      if (!serial) {
        while (cursor[lane] < ids.size() && done[static_cast<std::size_t>(ids[cursor[lane]])]) ++cursor[lane];
      } else if (cursor[lane] < ids.size() && done[static_cast<std::size_t>(ids[cursor[lane]])] &&
                 p.ops[static_cast<std::size_t>(ids[cursor[lane]])].kind != OpKind::collective) {
        ++cursor[lane];
      }
    }
  }
  return n - completed;
}

}  // namespace

TEST_CASE("ranks map to coordinates with tp innermost", "[compile]") {
  ParallelPlan p;
  p.tp = 4;
  p.dp = 2;
  p.pp = 3;
  for (int r = 0; r < p.world(); ++r) CHECK(rank_of(p, coord_of(p, r)) == r);
  CHECK(coord_of(p, 5).tp == 1);
  CHECK(coord_of(p, 5).dp == 1);
  CHECK(coord_of(p, 5).pp == 0);
  CHECK(coord_of(p, 8).pp == 1);
  p.placement = {Dim::dp, Dim::tp, Dim::cp, Dim::pp};
  CHECK(coord_of(p, 1).dp == 1);
  CHECK(coord_of(p, 1).tp == 0);
}

TEST_CASE("the program's FLOPs equal the published per-step formula for every plan", "[compile][flops]") {
  const std::vector<std::vector<std::string>> plans = {
      {},
      {"plan.dp=4"},
      {"plan.tp=4"},
      {"plan.pp=4"},
      {"plan.tp=2", "plan.pp=2", "plan.dp=2"},
      {"plan.tp=2", "plan.sequence_parallel=true", "plan.pp=2"},
      {"plan.pp=2", "plan.virtual_stages=2", "plan.dp=2"},
      {"plan.pp=2", "plan.schedule=gpipe", "training.recompute=full"},
      {"plan.tp=2", "training.recompute=selective", "plan.dp=2", "plan.zero=1"},
      {"plan.tp=4", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true", "plan.pp=2", "training.recompute=full"},
      {"plan.tp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true", "plan.pp=2", "plan.virtual_stages=2",
       "plan.dp=2", "plan.zero=1"},
      // Context parallelism: each rank's share of the positions; the ring's blocks and merges.
      {"plan.cp=2"},
      {"plan.cp=4", "plan.dp=2", "plan.pp=2", "training.recompute=full"},
      {"plan.cp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.pp=2", "plan.virtual_stages=2", "plan.dp=2",
       "plan.zero=1"},
      {"plan.cp=2", "plan.dp=2", "plan.zero=3", "model.tie_embeddings=false"},
  };
  for (const auto& sets : plans) {
    const Scenario s = gpt(sets);
    DYNAMIC_SECTION(fmt::format("dp {} tp {} pp {} cp {} v {} zero {}", s.plan.dp, s.plan.tp, s.plan.pp, s.plan.cp,
                                s.plan.virtual_stages, s.plan.zero)) {
      const Program prog = compile(s);
      CHECK(compute_flops(prog) == Approx(step_flops(s.model, s.training.global_batch, s.training.recompute)));
      CHECK(unfinished(prog) == 0);
    }
  }
}

TEST_CASE("every send has one matching recv of the same size", "[compile][pp]") {
  const Program prog = compile(gpt({"plan.pp=4", "plan.virtual_stages=2", "plan.dp=2"}));
  std::map<std::int64_t, std::vector<const Op*>> pairs;
  for (const Op& o : prog.ops) {
    if (o.kind == OpKind::send || o.kind == OpKind::recv) pairs[o.match].push_back(&o);
  }
  CHECK(static_cast<std::int64_t>(pairs.size()) == prog.transfers);
  // 2 dp replicas x 8 micro-batches (32 / (2 x 2)) x 7 chunk boundaries x 2 directions.
  CHECK(prog.transfers == 2 * 8 * 7 * 2);
  for (const auto& [match, ops] : pairs) {
    REQUIRE(ops.size() == 2);
    const Op& a = *ops[0];
    const Op& b = *ops[1];
    CHECK(a.kind != b.kind);
    CHECK(a.peer == b.rank);
    CHECK(b.peer == a.rank);
    CHECK(a.bytes == b.bytes);
    CHECK(a.bytes == 128.0 * 2 * 256 * 2);  // s x b x h x 2 bytes
  }
}

TEST_CASE("tensor parallel layers issue two all-reduces forward and two backward", "[compile][tp]") {
  // 8 layers, tp 2, 16 micro-batches: 4 x 8 x 16 collective instances in the layers; with
  // sequence parallelism twice as many (all-gather + reduce-scatter around each half-layer).
  // The vocabulary-parallel embedding and head add, per micro-batch, one sum of the
  // embedding's output, one of the head's input gradient and a gather of 3 fp32 loss
  // statistics per token.
  const auto count = [](const Program& p, CollectiveOp what, bool in_layers) {
    std::set<std::int64_t> instances;
    for (const Op& o : p.ops) {
      const bool layer = o.layer >= 0 && o.layer < 8;
      if (o.kind == OpKind::collective && o.category == Category::tp_comm && o.collective == what && layer == in_layers) {
        instances.insert(o.match);
      }
    }
    return instances.size();
  };
  const Program plain = compile(gpt({"plan.tp=2"}));
  CHECK(count(plain, CollectiveOp::all_reduce, true) == 4 * 8 * 16);
  CHECK(count(plain, CollectiveOp::all_reduce, false) == 2 * 16);
  CHECK(count(plain, CollectiveOp::all_gather, false) == 16);
  CHECK(count(plain, CollectiveOp::all_gather, true) == 0);
  const Program sp = compile(gpt({"plan.tp=2", "plan.sequence_parallel=true"}));
  CHECK(count(sp, CollectiveOp::all_gather, true) == 4 * 8 * 16);
  CHECK(count(sp, CollectiveOp::reduce_scatter, true) == 4 * 8 * 16);
  CHECK(count(sp, CollectiveOp::all_reduce, true) == 0);
  CHECK(count(sp, CollectiveOp::reduce_scatter, false) == 2 * 16);  // embedding, head gradient
  // Head input, loss statistics, and the embedding's gradient (the scatter's backward).
  CHECK(count(sp, CollectiveOp::all_gather, false) == 3 * 16);
  // One sum per step of the gradients of what each rank computes on its sequence shard
  // only: two norms and two row-parallel biases per layer (6h), the final norm (2h).
  CHECK(count(sp, CollectiveOp::all_reduce, false) == 1);
  for (const Op& o : sp.ops) {
    if (o.kind == OpKind::collective && o.tp_role == TpRole::replicated_grads && o.rank == 0) {
      CHECK(o.bytes == (8 * 6 * 256 + 2 * 256) * 4);  // fp32 main gradients
      CHECK(op_name(sp, static_cast<std::int64_t>(&o - sp.ops.data())) == "tp all-reduce norm gradients");
    }
  }
  // Each instance has both tp ranks, with the s·b·h activation as its buffer (the loss
  // statistics: 3 x 4 bytes x 256 tokens x 2 ranks).
  std::map<std::int64_t, int> members;
  for (const Op& o : plain.ops) {
    if (o.kind == OpKind::collective) {
      ++members[o.match];
      CHECK(o.bytes == (o.collective == CollectiveOp::all_gather ? 3.0 * 4 * 256 * 2 : 128.0 * 2 * 256 * 2));
    }
  }
  for (const auto& [m, n] : members) CHECK(n == 2);
}

TEST_CASE("tp communication overlap: ring blocks and pipelined sums replace the layers' gathers and sums", "[compile][tp]") {
  // 8 layers, tp 4, 16 micro-batches of 2 x 128 tokens: 64 rows per rank, so the forward's
  // reduce-scatter runs in 4 blocks. Per half-layer pass: a ring of 3 steps (3 sends and
  // 3 receives of one 1/4 block), 4 column blocks; forward 4 row blocks, each with its
  // reduce-scatter of 1/4 of the activation; backward one row GEMM, one reduce-scatter
  // and the weight gradients.
  const Scenario s = gpt({"plan.tp=4", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true"});
  const Program prog = compile(s);
  const Program plain = compile(gpt({"plan.tp=4", "plan.sequence_parallel=true"}));
  const double act = 128.0 * 2 * 256 * 2;
  std::map<LayerPiece, int> pieces[2];  // rank 0, forward / backward
  int sends = 0, recvs = 0, forward_sums = 0, backward_sums = 0, layer_gathers = 0;
  std::map<std::int64_t, std::vector<const Op*>> transfers;
  for (const Op& o : prog.ops) {
    const bool layer = o.layer >= 0 && o.layer < 8;
    if (o.kind == OpKind::send || o.kind == OpKind::recv) {
      REQUIRE(o.tp_role == TpRole::ring);
      CHECK(o.category == Category::tp_comm);
      CHECK(o.bytes == act / 4);
      transfers[o.match].push_back(&o);
      if (o.rank == 0) (o.kind == OpKind::send ? sends : recvs) += 1;
    }
    if (o.rank != 0) continue;
    if (o.kind == OpKind::compute && layer) ++pieces[o.category == Category::backward ? 1 : 0][o.piece];
    if (o.kind == OpKind::collective && layer && o.collective == CollectiveOp::reduce_scatter) {
      CHECK(o.piece == LayerPiece::row);
      if (o.pass == Category::backward) {
        ++backward_sums;
        CHECK(o.bytes == act);
      } else {
        ++forward_sums;
        CHECK(o.bytes == act / 4);
      }
    }
    if (o.kind == OpKind::collective && layer && o.collective == CollectiveOp::all_gather) ++layer_gathers;
  }
  const int passes = 2 * 8 * 16;  // halves x layers x micro-batches, each direction
  CHECK(layer_gathers == 0);
  CHECK(sends == 2 * passes * 3);
  CHECK(recvs == 2 * passes * 3);
  CHECK(forward_sums == passes * 4);
  CHECK(backward_sums == passes);
  CHECK(pieces[0][LayerPiece::whole] == 0);
  CHECK(pieces[0][LayerPiece::prepare] == passes);
  CHECK(pieces[0][LayerPiece::column] == passes * 4);
  CHECK(pieces[0][LayerPiece::middle] == passes);
  CHECK(pieces[0][LayerPiece::row] == passes * 4);
  CHECK(pieces[1][LayerPiece::row] == passes);
  CHECK(pieces[1][LayerPiece::wgrad] == passes);
  // Each transfer goes from a rank to its ring successor (tp index + 1) and back pairs up.
  for (const auto& [match, pair] : transfers) {
    REQUIRE(pair.size() == 2);
    const Op& send = pair[0]->kind == OpKind::send ? *pair[0] : *pair[1];
    const Op& recv = pair[0]->kind == OpKind::send ? *pair[1] : *pair[0];
    CHECK(recv.kind == OpKind::recv);
    CHECK(send.peer == recv.rank);
    CHECK(coord_of(s.plan, send.peer).tp == (coord_of(s.plan, send.rank).tp + 1) % 4);
    CHECK(send.step == recv.step);
  }
  // The same arithmetic as without the overlap, split into pieces.
  CHECK(compute_flops(prog) == Approx(compute_flops(plain)).epsilon(1e-12));
  CHECK(unfinished(prog) == 0);
  // A column block past the first waits for the block it computes, received the step before.
  for (std::size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& o = prog.ops[i];
    if (o.kind != OpKind::compute || o.piece != LayerPiece::column || o.step <= 0) continue;
    const auto deps = prog.deps_of(static_cast<std::int64_t>(i));
    REQUIRE(deps.size() == 1);
    const Op& d = prog.ops[static_cast<std::size_t>(deps[0])];
    CHECK(d.kind == OpKind::recv);
    CHECK(d.step == o.step - 1);
  }
  CHECK(op_name(prog, prog.order[0][3]).find("tp ring #0") == 0);
}

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

TEST_CASE("ZeRO-2 and ZeRO-3 reduce-scatter each unit every micro-batch; ZeRO-3 gathers it before each pass",
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

TEST_CASE("generic models compile to GEMM-equivalent layers of the same FLOPs", "[compile]") {
  const Scenario s = load_text("cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 256, micro_batch: 32}\n"
                               "plan: {dp: 2, pp: 2}\n",
                               "cnn.yaml");
  const Program prog = compile(s);
  double forward = 0.0;
  double equivalent = 0.0;
  for (const GenericLayer& l : s.model.generic_layers) {
    forward += l.forward_flops;
    const Gemm g = generic_layer_gemm(l, 32);
    INFO(l.name);
    // Same parameters (square weight + bias), same FLOPs to within half a row.
    CHECK(static_cast<double>(g.n * g.k + generic_layer_bias(l)) == l.params);
    CHECK(std::abs(g.flops() - l.forward_flops * 32) <= static_cast<double>(g.n * g.k));
    equivalent += g.flops() / 32;
  }
  // The ops count the equivalents' FLOPs: forward and backward (twice) over 256 images.
  CHECK(compute_flops(prog) == Approx(3 * equivalent * 256).epsilon(1e-12));
  CHECK(compute_flops(prog) == Approx(3 * forward * 256).epsilon(1e-4));
  CHECK(unfinished(prog) == 0);
}

TEST_CASE("a generic layer's GEMM equivalent, by hand", "[compile]") {
  // LeNet's conv1: 156 parameters -> a 12 x 12 weight and 12 biases; 235,200 FLOPs per
  // image x 64 images / (2 x 144) = 52,266.7 -> 52,267 rows.
  const GenericLayer conv1{"conv1", 156, 235200, 5880};
  const Gemm g = generic_layer_gemm(conv1, 64);
  CHECK(g.m == 52267);
  CHECK(g.n == 12);
  CHECK(g.k == 12);
  CHECK(generic_layer_bias(conv1) == 12);
  // A perfect square leaves no bias; a tiny layer still gets one row.
  CHECK(generic_layer_bias(GenericLayer{"sq", 10000, 10, 1}) == 0);
  CHECK(generic_layer_gemm(GenericLayer{"sq", 10000, 10, 1}, 1).m == 1);
}

TEST_CASE("op names read as a trace would show them", "[compile]") {
  const Program prog = compile(gpt({"plan.tp=2", "plan.pp=2"}));
  std::set<std::string> names;
  for (std::int64_t id : prog.order[0]) names.insert(op_name(prog, id));
  CHECK(names.count("fwd embedding mb0") == 1);
  CHECK(names.count("fwd attention L0 mb0") == 1);
  CHECK(names.count("tp all-reduce L0 mb0") == 1);
  CHECK(names.count("send act mb0 -> 2") == 1);
  CHECK(names.count("recv grad mb0 <- 2") == 1);
  CHECK(names.count("optimizer") == 1);
}

TEST_CASE("tied embeddings over several stages all-reduce their gradient between the first and last stage", "[compile][pp]") {
  // tp 2 x dp 2 x pp 4: one embedding group per (tp, dp) position, {stage 0, stage 3}, each
  // summing the V·h/tp = 1024·256/2 fp32 main gradients, after the rank's data-parallel
  // sync and before its optimizer step (Megatron's order).
  const Scenario s = gpt({"plan.tp=2", "plan.dp=2", "plan.pp=4"});
  const Program prog = compile(s);
  std::map<std::int64_t, std::vector<int>> instances;
  for (std::size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& o = prog.ops[i];
    if (o.kind != OpKind::collective || o.category != Category::pp_comm) continue;
    instances[o.match].push_back(o.rank);
    CHECK(o.bytes == 1024.0 * 256 / 2 * 4);
    CHECK(op_name(prog, static_cast<std::int64_t>(i)) == "embedding-gradient all-reduce");
    // Its rank's optimizer waits for it; it waits for the rank's last dp bucket.
    bool before_optimizer = false;
    bool after_dp = false;
    for (std::int64_t id : prog.order[static_cast<std::size_t>(o.rank)]) {
      const Op& x = prog.ops[static_cast<std::size_t>(id)];
      for (std::int64_t d : prog.deps_of(id)) {
        if (d == static_cast<std::int64_t>(i) && x.category == Category::optimizer) before_optimizer = true;
      }
    }
    for (std::int64_t d : prog.deps_of(static_cast<std::int64_t>(i))) {
      after_dp = after_dp || prog.ops[static_cast<std::size_t>(d)].category == Category::dp_comm;
    }
    CHECK(before_optimizer);
    CHECK(after_dp);
  }
  REQUIRE(instances.size() == 4);
  for (const auto& [match, ranks] : instances) {
    REQUIRE(ranks.size() == 2);
    const Coord a = coord_of(s.plan, ranks[0]);
    const Coord b = coord_of(s.plan, ranks[1]);
    CHECK(std::min(a.pp, b.pp) == 0);
    CHECK(std::max(a.pp, b.pp) == 3);
    CHECK((a.tp == b.tp && a.dp == b.dp));
  }
  CHECK(unfinished(prog) == 0);
  // None with one stage, or with an untied LM head.
  auto count = [](const Program& p) {
    return std::count_if(p.ops.begin(), p.ops.end(), [](const Op& o) { return o.category == Category::pp_comm && o.kind == OpKind::collective; });
  };
  CHECK(count(compile(gpt({"plan.tp=2", "plan.dp=2"}))) == 0);
  CHECK(count(compile(gpt({"plan.tp=2", "plan.dp=2", "plan.pp=4", "model.tie_embeddings=false"}))) == 0);
}

TEST_CASE("pipeline transfers between two ranks are issued in the same order on both sides", "[compile][pp]") {
  // NCCL matches point-to-point operations between two ranks in the order each issues them
  // (it has no tags): the CUDA backend relies on every rank's sends to a peer appearing in
  // its program in the order the peer's receives from it appear in the peer's.
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"plan.pp=2", "plan.schedule=gpipe"}, {"plan.pp=4", "plan.schedule=1f1b"},
        {"plan.pp=4", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2"},
        {"plan.pp=2", "plan.tp=2", "plan.dp=2", "plan.schedule=1f1b"}}) {
    const Program prog = compile(gpt(sets));
    std::map<std::pair<int, int>, std::vector<std::int64_t>> sent, received;  // (from, to) -> match ids
    for (int r = 0; r < prog.world; ++r) {
      for (std::int64_t id : prog.order[static_cast<std::size_t>(r)]) {
        const Op& o = prog.ops[static_cast<std::size_t>(id)];
        if (o.kind == OpKind::send) sent[{r, o.peer}].push_back(o.match);
        if (o.kind == OpKind::recv) received[{o.peer, r}].push_back(o.match);
      }
    }
    INFO(fmt::format("{}", fmt::join(sets, " ")));
    CHECK(sent.size() > 0);
    CHECK(sent == received);
  }
}
