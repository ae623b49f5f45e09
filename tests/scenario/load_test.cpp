#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <fstream>

#include "helpers.hpp"
#include "scenario/describe.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;
using Catch::Matchers::Contains;
using parasim::scenario::test::good;
using parasim::scenario::test::TempDir;
namespace fs = std::filesystem;

namespace {


}  // namespace

TEST_CASE("a full scenario loads with its values and units", "[load]") {
  const Scenario s = load_text(good, "good.yaml");
  CHECK(s.name == "base");
  CHECK(s.cluster.total_gpus() == 16);
  CHECK(s.cluster.device.name == "H100-SXM5-80GB");
  CHECK(s.cluster.intra.bandwidth == 450e9);
  CHECK(s.cluster.intra.latency == Approx(2e-6));
  CHECK(s.cluster.inter.nic_bandwidth == 50e9);
  CHECK(s.cluster.inter.shape == parasim::topology::NetworkShape::fat_tree);
  CHECK(s.model.kind == ModelKind::transformer);
  CHECK(s.model.ffn_hidden == 4 * 2048);
  CHECK(s.model.kv_heads == 16);
  CHECK(s.training.precision == Dtype::bf16);
  CHECK(s.plan.world() == 16);
  CHECK(s.micro_batches() == 8);  // 64 / (4 x 2)
}

TEST_CASE("defaults fill what a scenario leaves out", "[load]") {
  const Scenario s = load_text("cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 8}\n", "min.yaml");
  CHECK(s.name == "min");
  CHECK(s.plan.dp == 8);  // fills the 8 GPUs
  CHECK(s.plan.tp == 1);
  CHECK(s.plan.schedule == Schedule::one_f_one_b);
  CHECK(s.plan.bucket_bytes == 25.0 * 1024 * 1024);
  CHECK(s.plan.overlap_dp);
  CHECK(s.plan.zero == 0);
  CHECK(s.plan.collective == Collective::automatic);
  CHECK(s.plan.placement == std::array<Dim, 4>{Dim::tp, Dim::cp, Dim::dp, Dim::pp});
  CHECK(s.training.micro_batch == 1);
  CHECK(s.training.optimizer == Optimizer::adamw);
  CHECK(s.training.recompute == Recompute::none);
  CHECK(s.run.backend == Backend::cuda);  // a GPU device
  CHECK(s.run.steps == 10);
}

TEST_CASE("training.framework sets what the plan leaves to the framework", "[load][framework]") {
  const std::string base = "cluster: {preset: dgx-a100, nodes: 2}\nmodel: gpt3-13b\n";
  const Scenario core = load_text(base + "training: {global_batch: 16}\nplan: {pp: 2}\n", "core.yaml");
  CHECK(core.training.framework == Framework::megatron_core);
  CHECK(core.training.attention == Attention::flash);
  CHECK(core.plan.overlap_dp);
  // Megatron-DeepSpeed: its unfused attention core, and with a pipeline DeepSpeed's engine
  // reducing after the flush; either stays as written where the scenario says.
  const Scenario ds =
      load_text(base + "training: {framework: megatron-deepspeed, global_batch: 16}\nplan: {pp: 2}\n", "ds.yaml");
  CHECK(ds.training.framework == Framework::megatron_deepspeed);
  CHECK(ds.training.attention == Attention::naive);
  CHECK_FALSE(ds.plan.overlap_dp);
  const Scenario ds_set = load_text(
      base + "training: {framework: megatron-deepspeed, global_batch: 16, attention: flash}\nplan: {pp: 2, overlap_dp: true}\n",
      "ds.yaml");
  CHECK(ds_set.training.attention == Attention::flash);
  CHECK(ds_set.plan.overlap_dp);
  CHECK(load_text(base + "training: {framework: megatron-deepspeed, global_batch: 16}\n", "ds.yaml").plan.overlap_dp);
  // Megatron-LM reduces after the backward unless --overlap-grad-reduce is given.
  CHECK_FALSE(load_text(base + "training: {framework: megatron-lm, global_batch: 16}\n", "lm.yaml").plan.overlap_dp);
  CHECK(load_text(base + "training: {framework: megatron-lm, global_batch: 16}\nplan: {overlap_dp: true}\n", "lm.yaml")
            .plan.overlap_dp);
  // TorchTitan: PyTorch SDPA's flash backend, FlashAttention-2 itself; as written otherwise.
  CHECK(load_text(base + "training: {framework: torchtitan, global_batch: 16}\n", "tt.yaml").training.attention ==
        Attention::flash_v2);
  CHECK(load_text(base + "training: {framework: torchtitan, global_batch: 16, attention: flash}\n", "tt.yaml")
            .training.attention == Attention::flash);
  // NeMo trains with Megatron-Core's kernels and its recipes' overlaps: the distributed
  // optimizer with its all-gather under the forward, sequence parallelism and tp overlap
  // where tp > 1 (inside a node, no experts); what the plan says stays.
  const Scenario nemo = load_text(base + "training: {framework: nemo, global_batch: 16}\nplan: {tp: 8}\n", "n.yaml");
  CHECK(nemo.training.framework == Framework::nemo);
  CHECK(to_string(nemo.training.framework) == "nemo");
  CHECK(nemo.plan.zero == 1);
  CHECK(nemo.plan.overlap_param_gather);
  CHECK(nemo.plan.sequence_parallel);
  CHECK(nemo.plan.tp_comm_overlap);
  CHECK_FALSE(core.plan.overlap_param_gather);
  CHECK(core.plan.zero == 0);
  const Scenario nemo_set = load_text(
      base + "training: {framework: nemo, global_batch: 16}\nplan: {tp: 8, zero: 0, tp_comm_overlap: false}\n", "n.yaml");
  CHECK(nemo_set.plan.zero == 0);
  CHECK_FALSE(nemo_set.plan.overlap_param_gather);
  CHECK(nemo_set.plan.sequence_parallel);
  CHECK_FALSE(nemo_set.plan.tp_comm_overlap);
  // tp across nodes (dp innermost: a tp group's 4 ranks 4 apart, over both 8-GPU nodes),
  // or tp 1: no overlap to default to.
  const Scenario wide = load_text(
      base + "training: {framework: nemo, global_batch: 16}\nplan: {tp: 4, dp: 4, placement: 'dp,tp,pp'}\n", "n.yaml");
  CHECK(wide.plan.sequence_parallel);
  CHECK_FALSE(wide.plan.tp_comm_overlap);
  const Scenario no_tp = load_text(base + "training: {framework: nemo, global_batch: 16}\n", "n.yaml");
  CHECK_FALSE(no_tp.plan.sequence_parallel);
  CHECK_FALSE(no_tp.plan.tp_comm_overlap);
  const Scenario moe = load_text(
      "cluster: {preset: dgx-h100, nodes: 2}\nmodel: mixtral-8x7b\ntraining: {framework: nemo, global_batch: 16}\n"
      "plan: {tp: 2, ep: 8}\n",
      "moe.yaml");
  CHECK(moe.plan.sequence_parallel);
  CHECK_FALSE(moe.plan.tp_comm_overlap);
  CHECK(to_string(Framework::pytorch_fsdp) == "pytorch-fsdp");
  CHECK_THROWS_WITH(load_text(base + "training: {framework: jax, global_batch: 16}\n", "bad.yaml"),
                    Catch::Contains("bad.yaml:3") && Catch::Contains("training.framework") &&
                        Catch::Contains("megatron-deepspeed"));
}

TEST_CASE("a preset refined by keys beside it", "[load][presets]") {
  const Scenario s = load_text(
      "cluster: {preset: dgx-h100, nodes: 4, inter_node: {oversubscription: '2:1', shape: fat-tree}}\n"
      "model: {preset: llama2-7b, seq_len: 2048}\ntraining: {global_batch: 32}\nplan: {tp: 8}\n",
      "refine.yaml");
  CHECK(s.cluster.nodes == 4);
  CHECK(s.cluster.gpus_per_node == 8);             // from the preset
  CHECK(s.cluster.inter.nic_bandwidth == 50e9);    // from the preset
  CHECK(s.cluster.inter.oversubscription == 2.0);  // refined, "2:1" form
  CHECK(s.cluster.inter.routing == parasim::topology::Routing::destination);  // InfiniBand's, from the preset
  CHECK(s.model.name == "llama2-7b");
  CHECK(s.model.seq_len == 2048);
  CHECK(s.model.ffn_hidden == 11008);
  CHECK(s.plan.dp == 4);
}

TEST_CASE("a preset refined to another shape drops the options that no longer apply", "[load][presets]") {
  // dgx-a100 sets a fat-tree's oversubscription and leaf size; refined to a single switch
  // those are ignored, while a user who writes them for a single switch still hears of it.
  const Scenario s = load_text("cluster: {preset: dgx-a100, nodes: 2, inter_node: {shape: single-switch}}\n"
                               "model: tiny-gpt\ntraining: {global_batch: 16}\n",
                               "refined.yaml");
  CHECK(s.cluster.inter.shape == parasim::topology::NetworkShape::single_switch);
  // hgx-h100-roce refines dgx-h100's InfiniBand to Ethernet: its flows are hashed.
  CHECK(load_text("cluster: {preset: hgx-h100-roce, nodes: 2}\nmodel: tiny-gpt\ntraining: {global_batch: 16}\n", "roce.yaml")
            .cluster.inter.routing == parasim::topology::Routing::ecmp);
  CHECK_THROWS_WITH(load_text("cluster: {preset: dgx-a100, nodes: 2, inter_node: {shape: single-switch, "
                              "oversubscription: 2}}\nmodel: tiny-gpt\ntraining: {global_batch: 16}\n",
                              "refined.yaml"),
                    Catch::Matchers::Contains("applies only to the fat-tree"));
  const Scenario p = load_text("cluster: {preset: pcie-node, intra_node: {fabric: nvswitch}}\nmodel: tiny-gpt\n"
                               "training: {global_batch: 16}\n",
                               "refined.yaml");
  CHECK(p.cluster.intra.fabric == parasim::topology::IntraFabric::nvswitch);
}

TEST_CASE("command-line overrides (--set) reach any key, even inside a preset name", "[load][override]") {
  const std::vector<std::string> sets{"plan.tp=4", "plan.dp=2", "cluster.nodes=4", "training.precision=fp16",
                                      "model.hidden=4096"};
  const Scenario s = load_text(good, "good.yaml", sets);
  CHECK(s.plan.tp == 4);
  CHECK(s.cluster.nodes == 4);
  CHECK(s.training.precision == Dtype::fp16);
  CHECK(s.model.hidden == 4096);
  // A scalar preset becomes {preset: NAME} so a key can refine it.
  const std::vector<std::string> dev{"cluster.device.memory=40GiB"};
  const Scenario t = load_text(good, "good.yaml", dev);
  CHECK(t.cluster.device.memory_bytes == 40.0 * (1 << 30));
  CHECK(t.cluster.device.memory_bandwidth == 3350e9);
}

TEST_CASE("extends merges a base file under the scenario", "[load][extends]") {
  TempDir dir;
  dir.write("base.yaml", good);
  fs::create_directories(dir.path / "sweeps");
  const std::string child = dir.write("sweeps/tp4.yaml", "extends: ../base.yaml\nname: tp4\nplan:\n  tp: 4\n  dp: 2\n");
  const Scenario s = load(child);
  CHECK(s.name == "tp4");
  CHECK(s.plan.tp == 4);
  CHECK(s.plan.pp == 2);        // kept from the base
  CHECK(s.model.layers == 24);  // kept from the base
  // A later override still wins over both.
  const std::vector<std::string> sets{"plan.tp=8", "plan.dp=1"};
  CHECK(load(child, sets).plan.tp == 8);
}

TEST_CASE("extends chains and lists apply in order", "[load][extends]") {
  TempDir dir;
  dir.write("a.yaml", good);
  dir.write("b.yaml", "extends: a.yaml\ntraining: {precision: fp16}\n");
  dir.write("c.yaml", "plan: {pp: 1, dp: 8}\n");
  const std::string d = dir.write("d.yaml", "extends: [b.yaml, c.yaml]\n");
  const Scenario s = load(d);
  CHECK(s.training.precision == Dtype::fp16);
  CHECK(s.plan.pp == 1);
  CHECK(s.plan.tp == 2);
}

TEST_CASE("errors in an extended file name that file and line", "[load][extends]") {
  TempDir dir;
  std::string bad = good;
  bad.replace(bad.find("heads: 16"), 9, "heads: 15");
  const std::string base = dir.write("base.yaml", bad);
  const std::string child = dir.write("child.yaml", "extends: base.yaml\nname: child\n");
  try {
    load(child);
    FAIL("expected an error");
  } catch (const ScenarioError& e) {
    CHECK(e.where().file == base);
    CHECK(e.where().line == 17);  // hidden: the key the check names
    CHECK(e.key() == "model.hidden");
  }
}

TEST_CASE("locations of keys are recorded for later checks", "[load]") {
  const Scenario s = load_text(good, "good.yaml");
  CHECK(s.locations->at("plan.tp").line == 27);
  CHECK(s.locations->at("plan.tp").column == 7);
  CHECK(s.locations->at("cluster.intra_node.bandwidth").line == 8);
}

TEST_CASE("a generic layer list is recognised and summed", "[load][model]") {
  const Scenario s = load_text("cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 256, micro_batch: 32}\n",
                               "cnn.yaml");
  CHECK(s.model.kind == ModelKind::generic);
  CHECK(s.model.layer_count() == 6);
  CHECK(s.model.parameter_count() == 11689512.0);
  CHECK(s.model.tokens_per_sample() == 1);
}

TEST_CASE("the resolved scenario renders as text and JSON", "[describe]") {
  const Scenario s = load_text(good, "good.yaml");
  const auto j = to_json(s);
  CHECK(j["plan"]["world"] == 16);
  CHECK(j["cluster"]["inter_node"]["nic_bandwidth"] == 50e9);
  CHECK(j["plan"]["placement"] == "tp,dp,pp");
  CHECK(j["training"]["micro_batches"] == 8);
  const std::string text = describe(s);
  CHECK_THAT(text, Contains("dp 4 x tp 2 x pp 2 = 16 devices"));
  CHECK_THAT(text, Contains("2 node(s) x 8 H100-SXM5-80GB = 16 devices"));
}

TEST_CASE("the same file loads to the same scenario every time", "[load]") {
  const auto a = to_json(load_text(good, "good.yaml")).dump();
  const auto b = to_json(load_text(good, "good.yaml")).dump();
  CHECK(a == b);
}

TEST_CASE("a scenario saved with its overrides (extends merged) loads back to the same scenario", "[load][save]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "parasim-save-test" / "nested";
  fs::create_directories(dir);
  const std::vector<std::string> sets{"plan.zero=1", "training.micro_batch=2"};
  for (const auto& entry : fs::directory_iterator(PARASIM_SOURCE_DIR "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string path = entry.path().string();
    INFO(path);
    for (const auto& overrides : {std::vector<std::string>{}, sets}) {
      parasim::scenario::Scenario original;
      try {
        original = parasim::scenario::load(path, overrides);
      } catch (const parasim::scenario::ScenarioError&) {
        continue;  // these overrides do not fit this scenario
      }
      const std::string text = parasim::scenario::scenario_yaml(path, overrides, dir.string());
      CHECK(text.find("extends") == std::string::npos);
      const fs::path out = dir / entry.path().filename();
      std::ofstream(out) << text;
      const parasim::scenario::Scenario back = parasim::scenario::load(out.string());
      // The whole resolved scenario, as `parasim check` prints it, is the same; so is the
      // device profile it reads (rewritten relative to the new folder).
      CHECK(parasim::scenario::describe(back) == parasim::scenario::describe(original));
      CHECK(back.plan.zero == original.plan.zero);
      CHECK(back.training.micro_batch == original.training.micro_batch);
      CHECK(back.hardware.profile.empty() == original.hardware.profile.empty());
      if (!original.hardware.profile.empty()) CHECK(fs::equivalent(back.hardware.profile, original.hardware.profile));
    }
  }
  fs::remove_all(dir.parent_path());
}

TEST_CASE("the YAML emitter writes a tree that parses back to the same tree", "[load][save]") {
  const std::string text = "a: 1\nb:\n  c: 400 Gb/s\n  d: [x, 'y: z', '#q']\ne: tp,dp,pp\nf: true\ng: ~\n";
  const parasim::scenario::Value v = parasim::scenario::parse_yaml(text, "t.yaml");
  const parasim::scenario::Value back = parasim::scenario::parse_yaml(parasim::scenario::to_yaml(v), "u.yaml");
  CHECK(parasim::scenario::to_yaml(back) == parasim::scenario::to_yaml(v));
  REQUIRE(back.find("b") != nullptr);
  const auto* d = back.find("b")->value.find("d");
  REQUIRE(d != nullptr);
  REQUIRE(d->value.items.size() == 3);
  CHECK(d->value.items[1].scalar == "y: z");
  CHECK(d->value.items[2].scalar == "#q");
  CHECK(back.find("e")->value.scalar == "tp,dp,pp");
  CHECK(back.find("g")->value.kind == parasim::scenario::Value::Kind::null);
}

TEST_CASE("an injection without a step is one for every step", "[load][training]") {
  const parasim::scenario::Scenario s = parasim::scenario::load_text(
      "cluster: cpu-host\nmodel: tiny-gpt\ntraining: {global_batch: 8}\nplan: {dp: 2}\n"
      "run: {inject: [{rank: 1, kind: delay, factor: 2}, {step: 3, rank: 0, kind: zero}]}\n",
      "t.yaml");
  REQUIRE(s.run.inject.size() == 2);
  CHECK(s.run.inject[0].step == 0);
  CHECK(s.run.inject[0].kind == InjectKind::delay);
  CHECK(s.run.inject[0].factor == 2.0);
  CHECK(s.run.inject[1].step == 3);
  CHECK(s.run.inject[1].factor == 1.0);
}

TEST_CASE("the learning rate's schedule: scaling, warm-up, then linear or cosine decay to min_lr", "[load][training]") {
  const std::string base = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 64, learning_rate: 0.001}\n";
  auto lr = [&](const std::vector<std::string>& sets, int k) {
    return learning_rate_at(parasim::scenario::load_text(base, "t.yaml", sets).training, k);
  };
  CHECK(lr({}, 0) == 0.001);
  CHECK(lr({}, 100000) == 0.001);
  // Tuned at 16 samples: 4x the batch is 4x the rate linearly, 2x under the square root.
  CHECK(lr({"training.lr_scaling=linear", "training.lr_reference_batch=16"}, 0) == Approx(0.004));
  CHECK(lr({"training.lr_scaling=sqrt", "training.lr_reference_batch=16"}, 0) == Approx(0.002));
  // Warm-up over 4 steps: 1/4, 2/4, 3/4, 4/4 of the rate.
  const std::vector<std::string> warm{"training.warmup_steps=4"};
  CHECK(lr(warm, 0) == Approx(0.00025));
  CHECK(lr(warm, 2) == Approx(0.00075));
  CHECK(lr(warm, 3) == Approx(0.001));
  CHECK(lr(warm, 10) == Approx(0.001));
  // Then down to min_lr at step 12: linearly a quarter of the way at step 5 ((5 + 1 - 4) / 8),
  // by a half cosine (1 + cos(pi / 4)) / 2 of the way there.
  std::vector<std::string> linear = warm, cosine = warm;
  for (auto* v : {&linear, &cosine}) v->insert(v->end(), {"training.decay_steps=12", "training.min_lr=0.0001"});
  linear.push_back("training.lr_decay=linear");
  cosine.push_back("training.lr_decay=cosine");
  CHECK(lr(linear, 5) == Approx(0.0001 + 0.0009 * 0.75));
  CHECK(lr(cosine, 5) == Approx(0.0001 + 0.0009 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(lr(linear, 11) == Approx(0.0001));
  CHECK(lr(cosine, 11) == Approx(0.0001));
  CHECK(lr(cosine, 50) == Approx(0.0001));
}

TEST_CASE("a device's power cap is read in watts and shown with the clock it leaves", "[load][power]") {
  const Scenario s = load_text("cluster: {preset: dgx-h100, nodes: 1, device: {preset: h100-sxm, power_limit: 500W}}\n"
                               "model: {layers: 2, hidden: 1024, heads: 16, vocab: 51200, seq_len: 1024}\n"
                               "training: {global_batch: 8}\n",
                               "power.yaml");
  CHECK(s.cluster.device.tdp == 700.0);  // the preset's datasheet figure
  CHECK(s.cluster.device.power_limit == 500.0);
  CHECK(describe(s).find("capped at 500 W of the board's 700 W: compute at 89.4 % of its clock") != std::string::npos);
  const Scenario full = load_text("cluster: dgx-h100\nmodel: {layers: 2, hidden: 1024, heads: 16, vocab: 51200, "
                                  "seq_len: 1024}\ntraining: {global_batch: 8}\n",
                                  "full.yaml");
  CHECK(full.cluster.device.power_limit == 700.0);
  CHECK(describe(full).find("capped") == std::string::npos);
}
