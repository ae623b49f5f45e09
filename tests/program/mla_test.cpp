// DeepSeek's layer shapes: multi-head latent attention (its parameters, GEMMs and tp
// split in closed form, the Program's FLOPs and its tp sums) and a mixture of experts whose
// first layers keep a dense MLP (parameters, FLOPs, memory and gradients per layer).
#include <catch2/catch.hpp>

#include "workload/accounting.hpp"
#include "workload/buckets.hpp"
#include "workload/memory.hpp"
#include "program/program.hpp"
#include "program_helpers.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;
using namespace parasim::program;
using parasim::program::test::compute_flops;
using parasim::program::test::gpt;
using parasim::program::test::unfinished;

namespace {

// The small GPT of program_helpers (8 layers, h 256, 8 heads, s 128, b 2) in the LLaMA
// layout with latent attention: the query compressed to 96, keys and values to 64, heads
// of 32 + 16 rotary for queries and keys, 32 for values.
Scenario mla(std::vector<std::string> sets) {
  sets.insert(sets.begin(),
              {"model.mlp=swiglu", "model.ffn_hidden=512", "model.q_lora_rank=96", "model.kv_lora_rank=64",
               "model.qk_nope_head_dim=32", "model.qk_rope_head_dim=16", "model.v_head_dim=32"});
  return gpt(sets);
}

constexpr double h = 256, a = 8, q_lora = 96, kv_lora = 64, nope = 32, rope = 16, dv = 32;
constexpr double tokens = 32.0 * 128;  // a step's

// The projections' weights: query down and up, keys/values down (with the shared rotary
// key) and up, output.
constexpr double weights =
    h * q_lora + q_lora * a * (nope + rope) + h * (kv_lora + rope) + kv_lora * a * (nope + dv) + a * dv * h;
constexpr double down = h * q_lora + q_lora + h * (kv_lora + rope) + kv_lora;  // with their norms

// The small GPT with 8 experts of 512, top-2, the first `dense` layers dense (ffn 1024).
Scenario moe(int dense, std::vector<std::string> sets) {
  sets.insert(sets.begin(),
              {"model.experts=8", "model.expert_ffn_hidden=512", "model.dense_layers=" + std::to_string(dense)});
  return gpt(sets);
}

}  // namespace

TEST_CASE("multi-head latent attention: parameters in closed form", "[mla][model]") {
  const ModelSpec m = mla({}).model;
  REQUIRE(m.mla());
  CHECK(m.qk_head_dim() == 48);
  CHECK(m.value_head_dim() == 32);
  // 24,576 + 96 + 36,864 + 20,480 + 64 + 32,768 + 65,536, no biases.
  CHECK(m.attention_params() == 180384.0);
  CHECK(m.attention_params() == weights + q_lora + kv_lora);
  CHECK(m.mla_down_params() == down);
  // The rest of the layer is the LLaMA layout's: a SwiGLU MLP and the norms.
  CHECK(m.params_per_layer() == Approx(m.attention_params() + 3 * h * 512 + 4 * h));
  CHECK(m.linear_params_per_layer() == Approx(weights + 3 * h * 512));
  // Whole on every tp rank: the norms and the down projections with theirs.
  CHECK(m.tp_whole_params() == Approx(4 * h + down));
}

TEST_CASE("multi-head latent attention: GEMMs, the tp split and the step's FLOPs", "[mla][model]") {
  const ModelSpec m = mla({}).model;
  const double s = 128;
  for (int tp : {1, 2}) {
    const std::vector<Gemm> g = layer_forward_gemms(m, 2, tp);
    REQUIRE(attention_gemm_count(m) == 7);
    CHECK(g[0].name == "q-down");
    CHECK(static_cast<double>(g[0].n) == q_lora);  // whole on every tp rank
    CHECK(static_cast<double>(g[1].n) == a / tp * (nope + rope));
    CHECK(static_cast<double>(g[2].n) == kv_lora + rope);
    CHECK(static_cast<double>(g[3].n) == a / tp * (nope + dv));
    CHECK(g[4].name == "attention-scores");
    CHECK(static_cast<double>(g[4].k) == nope + rope);
    CHECK(static_cast<double>(g[5].n) == dv);
    CHECK(static_cast<double>(g[6].k) == a / tp * dv);
    // The projections' FLOPs: 2·T·weights at tp 1; the down projections' whole on each rank.
    double projections = 0.0;
    for (int i : {0, 1, 2, 3, 6}) projections += g[static_cast<std::size_t>(i)].flops();
    const double t = 2 * s;
    const double down_weights = h * q_lora + h * (kv_lora + rope);
    CHECK(projections == Approx(2 * t * (down_weights + (weights - down_weights) / tp)));
    CHECK(g[4].flops() + g[5].flops() == Approx(2 * 2 * s * s * (nope + rope + dv) * a / tp));
  }
  // A step: forward and backward (3x) of every GEMM, the LM head included.
  const double core = 2 * 32 * s * s * (nope + rope + dv) * a;
  const double head = 2 * tokens * h * 1024;
  CHECK(step_flops(m, 32, Recompute::none) == Approx(3 * (8 * (2 * tokens * (weights + 3 * h * 512) + core) + head)));
}

TEST_CASE("multi-head latent attention in the Program: FLOPs and the down projections' tp sum", "[mla][compile]") {
  for (bool sp : {false, true}) {
    const Scenario s =
        mla({"plan.tp=2", "plan.pp=2", std::string("plan.sequence_parallel=") + (sp ? "true" : "false")});
    const Program p = compile(s);
    CHECK(unfinished(p) == 0);
    // Every rank runs the down projections on every row: tp - 1 copies more of their FLOPs.
    const double extra = 3 * 8 * 2 * tokens * (h * q_lora + h * (kv_lora + rope));
    CHECK(compute_flops(p) == Approx(step_flops(s.model, 32, Recompute::none) + extra));
    // Their gradients are partial on each tp rank (each computes with its part of the up
    // projections' input gradient): summed over tp once per step, with or without sequence
    // parallelism, which adds the norms' (4h per layer, the final norm's 2h on the last stage).
    for (int stage = 0; stage < 2; ++stage) {
      const int rank = rank_of(s.plan, Coord{0, 0, stage, 0});
      double bytes = -1.0;
      for (const Op& o : p.ops) {
        if (o.rank == rank && o.tp_role == TpRole::replicated_grads) bytes = o.bytes;
      }
      const double per_layer = sp ? 4 * h + down : down;  // fp32 main gradients, 4 layers a stage
      CHECK(bytes == Approx(4.0 * (4 * per_layer + (sp && stage == 1 ? 2 * h : 0.0))));
    }
  }
}

TEST_CASE("dense first layers: parameters, FLOPs and memory layer by layer", "[moe][model]") {
  const ModelSpec all = moe(0, {}).model;
  const ModelSpec two = moe(2, {}).model;
  const ModelSpec dense = gpt({}).model;
  REQUIRE(two.moe_layer(2));
  REQUIRE_FALSE(two.moe_layer(1));
  CHECK(two.moe_layers() == 6);
  CHECK(two.layer_spec(0).params_per_layer() == dense.params_per_layer());
  CHECK(two.layer_spec(5).params_per_layer() == all.params_per_layer());
  CHECK(two.parameter_count() ==
        Approx(all.parameter_count() - 2 * (all.params_per_layer() - dense.params_per_layer())));
  const double expert = 2 * h * 512 + 512 + h;
  CHECK(two.active_parameter_count() == Approx(two.parameter_count() - 6 * 6 * expert));
  CHECK(step_flops(two, 32, Recompute::full) ==
        Approx(step_flops(all, 32, Recompute::full) -
               2 * (step_flops(all, 32, Recompute::full) - step_flops(dense, 32, Recompute::full)) / 8));
  // Memory over two stages (tp 1): stage 0 holds the embedding, the 2 dense layers and 2
  // with experts; stage 1 the 4 others, the final norm and its copy of the tied head.
  const Scenario s = moe(2, {"plan.pp=2"});
  const MemoryReport r = memory_per_rank(s);
  const double word = 1024 * h, positions = 128 * h;
  CHECK(r.stages[0].parameters == Approx(word + positions + 2 * dense.params_per_layer() + 2 * all.params_per_layer()));
  CHECK(r.stages[1].parameters == Approx(4 * all.params_per_layer() + 2 * h + word));
}

TEST_CASE("dense first layers in the Program: each layer's GEMMs, and no expert gradients for them", "[moe][compile]") {
  const Scenario s = moe(3, {"plan.dp=4", "plan.ep=2", "plan.pp=2", "plan.zero=1"});
  const Program p = compile(s);
  CHECK(unfinished(p) == 0);
  CHECK(compute_flops(p) == Approx(4 * step_flops(s.model, 8, Recompute::none)));
  // Rank 0's forward FLOPs per layer: the dense layers' MLP is the dense one, the others'
  // the router and this rank's experts.
  std::vector<double> forward(8, 0.0);
  for (const Op& o : p.ops) {
    if (o.rank == 0 && o.kind == OpKind::compute && o.category == Category::forward && o.layer >= 0 && o.layer < 8) {
      forward[static_cast<std::size_t>(o.layer)] += o.flops;
    }
  }
  const int micro_batches = 4;  // global 32 over dp 4 in micro-batches of 2
  for (int l = 0; l < 4; ++l) {
    const ModelSpec spec = s.model.layer_spec(l);
    const double want = sum_flops(layer_forward_gemms(spec, 2, 1, 1, 2, spec.expert_load()));
    CHECK(forward[static_cast<std::size_t>(l)] == Approx(micro_batches * want));
  }
  CHECK(forward[0] != Approx(forward[3]));
  for (const GradientSource& g : gradient_sources(s, 0, false, true)) {
    if (g.layer >= 0) CHECK((g.experts > 0.0) == (g.layer >= 3));
  }
}
