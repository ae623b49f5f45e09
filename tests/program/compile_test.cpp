#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "scenario/load.hpp"
#include "program/program.hpp"
#include "program_helpers.hpp"

#include <fmt/format.h>

using namespace parasim::scenario;
using namespace parasim::workload;
using namespace parasim::program;
using parasim::program::test::compute_flops;
using parasim::program::test::gpt;
using parasim::program::test::unfinished;

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
    // Same parameters (square weight + bias + the BatchNorms' scales and shifts), same FLOPs
    // to within half a row.
    CHECK(static_cast<double>(g.n * g.k + generic_layer_bias(l)) + l.batch_norm.params() == l.params);
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

TEST_CASE("a step past the simulator's op limit is refused at the key behind most of its ops", "[compile][limits]") {
  // The quickstart: 2 ranks, 2 micro-batches a pipeline. Its own Program fits any limit
  // at or above its size, and one op fewer is refused, at model.layers (layers outnumber
  // micro-batches) with the line that sets it.
  const Scenario s = load(std::string(PARASIM_SOURCE_DIR) + "/scenarios/quickstart.yaml");
  const Program p = compile(s);
  const auto n = static_cast<long long>(p.ops.size());
  CompileOptions exact;
  exact.max_ops = n;
  CHECK(compile(s, exact).ops.size() == p.ops.size());
  CompileOptions fewer;
  fewer.max_ops = n - 1;
  try {
    (void)compile(s, fewer);
    FAIL("no error");
  } catch (const ProgramTooLarge& e) {
    CHECK(e.key() == "model.layers");
    CHECK(e.where().line > 0);
    CHECK_THAT(e.message(), Catch::Contains(fmt::format("passes {} ops", n - 1)) && Catch::Contains("lower model.layers"));
  }
  // More micro-batches than layers: the global batch is named.
  const Scenario many = load(std::string(PARASIM_SOURCE_DIR) + "/scenarios/quickstart.yaml",
                             std::vector<std::string>{"training.global_batch=512", "training.micro_batch=1"});
  REQUIRE(many.micro_batches() > many.model.layers);
  CHECK_THROWS_MATCHES(compile(many, fewer), ProgramTooLarge,
                       Catch::Predicate<ProgramTooLarge>([](const ProgramTooLarge& e) {
                         return e.key() == "training.global_batch" &&
                                e.message().find("raise training.micro_batch") != std::string::npos;
                       }));
}
