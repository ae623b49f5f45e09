// Mixture of experts: the layer's parameters and FLOPs in closed form, expert parallelism's
// all-to-alls and groups in the Program, the experts' gradient buckets, memory, and the
// load imbalance knob.
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
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

// The small GPT of program_helpers (8 layers, h 256, s 128, b 2) with 8 experts of width
// 512, top-2, on the 16 GPUs.
Scenario moe(std::vector<std::string> sets) {
  sets.insert(sets.begin(), {"model.experts=8", "model.expert_ffn_hidden=512"});
  return gpt(sets);
}

}  // namespace

TEST_CASE("a mixture-of-experts layer: E experts and a router, top-k of them per token", "[moe][model]") {
  const ModelSpec m = moe({}).model;
  REQUIRE(m.moe());
  CHECK(m.top_k == 2);
  const double h = 256, f = 512, E = 8;
  const double expert = 2 * h * f + f + h;  // GeLU with biases
  const double dense = moe({}).model.params_per_layer() - E * expert - h * E;
  // What the layer has besides its MLP is the dense model's, less its MLP.
  const ModelSpec plain = gpt({}).model;
  CHECK(dense == Approx(plain.params_per_layer() - (2 * h * 1024 + 1024 + h)));
  CHECK(m.expert_params_per_layer() == Approx(E * expert));
  CHECK(m.active_parameter_count() == Approx(m.parameter_count() - 8 * (E - 2) * expert));
  // Model FLOPs per step: the MLP of each token is top_k experts' and the router's.
  const double tokens = 32.0 * 128;
  const double dense_flops = step_flops(plain, 32, Recompute::none) - 3 * 8 * tokens * 2 * (2 * h * 1024);
  const double moe_mlp = 2 * (2 * 2 * h * f) + 2 * h * E;  // per token, forward
  CHECK(step_flops(m, 32, Recompute::none) == Approx(dense_flops + 3 * 8 * tokens * moe_mlp));
}

TEST_CASE("expert parallelism: token all-to-alls over ep consecutive dp ranks, expert gradients over the rest",
          "[moe][compile]") {
  // dp 16, ep 8: two ep groups of 8 consecutive dp ranks; each expert on 2 ranks.
  const Scenario s = moe({"plan.dp=16", "plan.ep=8", "plan.zero=1", "training.global_batch=64"});
  const Program p = compile(s);
  CHECK(compute_flops(p) == Approx(step_flops(s.model, 64, Recompute::none)));
  CHECK(unfinished(p) == 0);
  // Per rank, layer and micro-batch (2): dispatch and combine forward, and backward.
  const double a2a = 2.0 * 128 * 2 * 256 * 2;  // b·s tokens x top_k copies x h x 2 bytes
  std::map<std::tuple<int, int, int>, int> per;
  std::set<int> groups;
  for (const Op& o : p.ops) {
    if (o.category != Category::ep_comm) continue;
    CHECK(o.collective == CollectiveOp::all_to_all);
    CHECK(o.bytes == a2a);
    ++per[{o.rank, o.layer, o.micro_batch}];
    groups.insert(o.group);
    const Group& g = p.groups[static_cast<std::size_t>(o.group)];
    REQUIRE(g.ranks.size() == 8);
    CHECK(g.part == GroupPart::expert);
    const int first = coord_of(s.plan, g.ranks[0]).dp;
    CHECK(first % 8 == 0);
    for (std::size_t i = 0; i < 8; ++i) CHECK(coord_of(s.plan, g.ranks[i]).dp == first + static_cast<int>(i));
  }
  CHECK(groups.size() == 2);
  CHECK(per.size() == 16 * 8 * 2);
  for (const auto& [key, n] : per) CHECK(n == 4);
  // The dense gradients' buckets over dp 16, the experts' (1 of 8 per rank) over their 2
  // holders: reduce-scatter (ZeRO-1) and all-gather of each.
  double dense = 0.0, experts = 0.0;
  for (std::int64_t id : p.order[0]) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (o.category != Category::dp_comm || o.collective != CollectiveOp::reduce_scatter) continue;
    const Group& g = p.groups[static_cast<std::size_t>(o.group)];
    (g.part == GroupPart::expert_data ? experts : dense) += o.bytes;
    CHECK(g.ranks.size() == (g.part == GroupPart::expert_data ? 2U : 16U));
  }
  const double g = 4.0;  // fp32 main gradients
  CHECK(experts == Approx(8 * s.model.expert_params_per_layer() / 8 * g));
  CHECK(dense + experts == Approx(s.model.parameter_count() * g - 8 * s.model.expert_params_per_layer() * 7 / 8 * g));
}

TEST_CASE("experts with tensor parallelism: the routed tokens gathered over tp, the all-to-all carries 1/tp",
          "[moe][compile]") {
  const Scenario s = moe({"plan.tp=2", "plan.sequence_parallel=true", "plan.dp=8", "plan.ep=4"});
  const Program p = compile(s);
  CHECK(compute_flops(p) == Approx(step_flops(s.model, 32, Recompute::none)));
  CHECK(unfinished(p) == 0);
  const double copies = 2.0 * 128 * 2 * 256 * 2;  // the tp group's routed copies, 2 bytes each
  int a2a = 0, gathers = 0;
  for (const Op& o : p.ops) {
    if (o.rank != 0 || o.layer != 3 || o.micro_batch != 0) continue;
    if (o.category == Category::ep_comm) {
      ++a2a;
      CHECK(o.bytes == copies / 2);
    }
    if (o.category == Category::tp_comm && o.what == ComputeWhat::layer_mlp) {
      ++gathers;
      CHECK(o.bytes == copies);
      CHECK((o.collective == CollectiveOp::all_gather || o.collective == CollectiveOp::reduce_scatter));
    }
  }
  CHECK(a2a == 4);
  CHECK(gathers == 4);  // forward and backward: the tokens' all-gather and the outputs' reduce-scatter
}

TEST_CASE("the experts' load: the busiest rank's tokens scale its GEMMs, up to the capacity", "[moe][accounting]") {
  const ModelSpec m = moe({"model.moe_imbalance=1.5"}).model;
  CHECK(m.expert_load() == 1.5);
  // 2 x 128 tokens x 2 copies over 8 experts, ep 4: 4 x 64 = 256 x 1.5 per expert.
  CHECK(expert_tokens(m, 2, 1, 4, m.expert_load()) == 96 * 4);
  CHECK(moe({"model.moe_imbalance=1.5", "model.capacity_factor=1.25"}).model.expert_load() == 1.25);
  const std::vector<Gemm> g = layer_forward_gemms(m, 2, 1, 1, 4, m.expert_load());
  REQUIRE(g.size() == 7);
  CHECK(g[4].name == "router");
  CHECK(g[5].batch == 2);  // 8 experts over ep 4
  CHECK(g[5].m == 384);
  // The step's model FLOPs stay the balanced ones.
  CHECK(step_flops(m, 32, Recompute::none) == Approx(step_flops(moe({}).model, 32, Recompute::none)));
}

TEST_CASE("memory: each rank holds experts / ep, the experts' optimizer state sharded over their holders",
          "[moe][memory]") {
  const Scenario one = moe({"plan.dp=16", "plan.zero=1", "training.global_batch=64"});
  const Scenario ep = moe({"plan.dp=16", "plan.ep=8", "plan.zero=1", "training.global_batch=64"});
  const MemoryBreakdown a = memory_per_rank(one).stages[0];
  const MemoryBreakdown b = memory_per_rank(ep).stages[0];
  const double experts = 8 * one.model.expert_params_per_layer();
  CHECK(a.parameters - b.parameters == Approx(experts * 7 / 8));
  // AdamW's 8 bytes and the fp32 master's 4 per parameter: the dense over 16 ranks, the
  // experts over 2 (ep) or 16 (no ep).
  const double dense = a.parameters - experts;
  CHECK(a.optimizer == Approx(8 * (dense + experts) / 16));
  CHECK(b.optimizer == Approx(8 * (dense / 16 + experts / 8 / 2)));
  CHECK(b.master == Approx(4 * (dense / 16 + experts / 8 / 2)));
}

TEST_CASE("the MoE kernels carry the layer's expert and router FLOPs, split around the all-to-alls", "[moe][kernels]") {
  for (const auto& sets : {std::vector<std::string>{"plan.dp=16", "plan.ep=8", "training.global_batch=64"},
                           std::vector<std::string>{"plan.tp=2", "plan.sequence_parallel=true", "plan.dp=8",
                                                    "plan.ep=4", "model.moe_imbalance=1.25"}}) {
    const Scenario s = moe(sets);
    const KernelPlan kp = kernel_plan(s);
    const std::vector<Gemm> g = layer_forward_gemms(s.model, 2, s.plan.tp, 1, s.plan.ep, s.model.expert_load());
    const double router = g[4].flops();
    const double experts = g[5].flops() + g[6].flops();
    for (const bool backward : {false, true}) {
      const MoeKernels k = moe_kernels(kp, backward);
      auto gemm_flops = [](const std::vector<Kernel>& ks) {
        double f = 0.0;
        for (const Kernel& kn : ks) f += kn.kind == KernelKind::gemm ? kn.flops() : 0.0;
        return f;
      };
      const double x = backward ? 2.0 : 1.0;
      CHECK(gemm_flops(k.experts) == Approx(x * experts));
      CHECK(gemm_flops(backward ? k.finish : k.prepare) == Approx(x * router));
      CHECK(gemm_flops(backward ? k.prepare : k.finish) == 0.0);
      // The whole MLP half is the three in order.
      CHECK(layer_kernels(kp, LayerPart::mlp, backward).size() ==
            k.prepare.size() + k.experts.size() + k.finish.size());
    }
  }
}

TEST_CASE("every compute op's GEMM set lists the GEMMs it runs: its FLOPs", "[moe][compile]") {
  // The GEMM-based compute model (a calibrated profile without kernels) times an op by its
  // set, running a whole layer's backward set twice and a piece's once: a backward piece's
  // set lists each GEMM's data and weight gradient.
  for (const Scenario& s :
       {moe({"plan.dp=16", "plan.ep=8"}), moe({"plan.tp=2", "plan.sequence_parallel=true", "plan.dp=8", "plan.ep=4"}),
        moe({"plan.dp=16", "plan.ep=8", "model.shared_expert_ffn_hidden=768"}),
        gpt({"plan.tp=4", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true"}), gpt({"plan.cp=2", "plan.dp=8"}),
        gpt({})}) {
    const Program p = compile(s);
    int checked = 0;
    for (const Op& o : p.ops) {
      if (o.kind != OpKind::compute || o.gemms < 0 || o.rank != 0) continue;
      const bool whole_backward = o.category == Category::backward && o.piece == LayerPiece::whole;
      double flops = 0.0;
      for (const Gemm& g : p.gemm_sets[static_cast<std::size_t>(o.gemms)]) flops += g.flops();
      INFO(op_name(p, &o - p.ops.data()));
      CHECK((whole_backward ? 2.0 : 1.0) * flops == Approx(o.flops));
      ++checked;
    }
    CHECK(checked > 0);
  }
}

TEST_CASE("a rank's share of a mixture-of-experts layer under tp and ep, by hand", "[moe][model]") {
  // tp 2 x ep 2, h 256, 8 experts of width 512 (GeLU, biases): the attention's weights and
  // QKV bias split over tp; the norms, the attention's output bias and the router whole on
  // every rank; 4 of the experts held, each split over tp but for its second bias.
  const ModelSpec m = moe({}).model;
  const double h = 256, f = 512, E = 8;
  const double split = (4 * h * h + 3 * h) / 2;
  const double whole = 4 * h + h + h * E;
  const double experts = E / 2 * ((2 * h * f + f) / 2 + h);
  CHECK(expert_params_on_rank(m, 2, 2) == Approx(experts));
  CHECK(layer_params_on_rank(m, 0, 2, 2) == Approx(split + whole + experts));
  // The 4 ranks' expert shares, the biases held twice (by both tp ranks) counted once: every expert.
  CHECK(4 * (experts - E / 2 * h) + E * h == Approx(m.expert_params_per_layer()));
}

TEST_CASE("shared experts: a dense MLP of their width beside the routed experts, every token through it",
          "[moe][model][compile]") {
  const Scenario plain = moe({"plan.dp=16", "plan.ep=8"});
  const Scenario shared = moe({"plan.dp=16", "plan.ep=8", "model.shared_expert_ffn_hidden=768"});
  const ModelSpec& m = shared.model;
  const double h = 256, fs = 768, tokens = 32.0 * 128;
  const double mlp = 2 * h * fs + fs + h;  // GeLU with biases
  CHECK(m.shared_expert_params() == Approx(mlp));
  CHECK(m.parameter_count() - plain.model.parameter_count() == Approx(8 * mlp));
  CHECK(m.active_parameter_count() - plain.model.active_parameter_count() == Approx(8 * mlp));
  // Forward, backward: 3 x 2 x tokens x the two GEMMs' h·fs, per layer.
  CHECK(step_flops(m, 32, Recompute::none) - step_flops(plain.model, 32, Recompute::none) ==
        Approx(3 * 8 * tokens * 2 * (2 * h * fs)));
  const Program p = compile(shared);
  CHECK(compute_flops(p) == Approx(step_flops(m, 32, Recompute::none)));
  CHECK(unfinished(p) == 0);
  // Their activations are stored like a dense MLP's of that width.
  const int e = 2;
  CHECK(layer_activation_bytes(m, 2, 1, false, Recompute::none, e, true) -
            layer_activation_bytes(plain.model, 2, 1, false, Recompute::none, e, true) ==
        Approx(2.0 * 128 * 2 * fs * e));
}

TEST_CASE("shared experts over tp: a tp-split MLP between its own gather and sum of the tokens", "[moe][compile]") {
  const std::vector<std::string> plan{"plan.tp=2", "plan.sequence_parallel=true", "plan.dp=8", "plan.ep=2"};
  std::vector<std::string> with_shared = plan;
  with_shared.push_back("model.shared_expert_ffn_hidden=768");
  const Scenario plain = moe(plan);
  const Scenario shared = moe(with_shared);
  const double h = 256, fs = 768;
  // Column- then row-parallel: half the weights on each tp rank, the second bias whole.
  CHECK(layer_params_on_rank(shared.model, 0, 2, 2) - layer_params_on_rank(plain.model, 0, 2, 2) ==
        Approx((2 * h * fs + fs) / 2 + h));
  const Program p = compile(shared);
  CHECK(unfinished(p) == 0);
  CHECK(compute_flops(p) == Approx(step_flops(shared.model, 32, Recompute::none)));
  // Per MLP half of a layer pass, one all-gather of the micro-batch's s·b·h tokens and one
  // reduce-scatter of the output more than without: 8 layers x 2 micro-batches x 2 passes.
  auto tp_mlp = [](const Program& prog, double* bytes) {
    int n = 0;
    for (const Op& o : prog.ops) {
      if (o.rank == 0 && o.category == Category::tp_comm && o.what == ComputeWhat::layer_mlp) {
        ++n;
        *bytes += o.bytes;
      }
    }
    return n;
  };
  double plain_bytes = 0.0, shared_bytes = 0.0;
  const int plain_n = tp_mlp(compile(plain), &plain_bytes);
  const int shared_n = tp_mlp(p, &shared_bytes);
  CHECK(shared_n - plain_n == 2 * 8 * 2 * 2);
  CHECK(shared_bytes - plain_bytes == Approx(2 * 8 * 2 * 2 * (2.0 * 128 * h * 2)));
  CHECK_THROWS_WITH(gpt({"model.shared_expert_ffn_hidden=768"}), Catch::Contains("model.experts is 0"));
}
