#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "scenario/presets.hpp"

#include <fmt/format.h>

using namespace parasim::scenario;

namespace {

Scenario with(const std::string& cluster, const std::string& model, int batch = 64) {
  return load_text(fmt::format("cluster: {}\nmodel: {}\ntraining: {{global_batch: {}}}\nplan: {{dp: 1}}\n", cluster, model,
                               batch),
                   "preset.yaml");
}

}  // namespace

TEST_CASE("every preset named in the scenario format exists", "[presets]") {
  for (const char* d : {"a100-80gb", "a100-40gb", "h100-sxm", "h200", "b200", "gb200", "l40s", "cpu-core"}) {
    CHECK(find_preset(PresetKind::device, d));
  }
  for (const char* c : {"dgx-a100", "dgx-h100", "hgx-h100", "hgx-h100-roce", "hgx-h200", "dgx-b200", "gb200-nvl72",
                        "pcie-node", "cpu-host"}) {
    CHECK(find_preset(PresetKind::cluster, c));
  }
  for (const char* m : {"gpt3-175b", "gpt3-13b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3.1-8b",
                        "llama3.1-70b", "llama3.1-405b", "gpt-30b", "lenet", "resnet18", "tiny-gpt", "mixtral-8x7b",
                        "mixtral-8x22b", "qwen1.5-moe-a2.7b", "deepseek-v3"}) {
    CHECK(find_preset(PresetKind::model, m));
  }
}

TEST_CASE("every cluster preset loads with every model preset it can hold", "[presets]") {
  for (const std::string& c : preset_names(PresetKind::cluster)) {
    DYNAMIC_SECTION(c) { CHECK_NOTHROW(with(c, "tiny-gpt")); }
  }
}

TEST_CASE("device presets carry their datasheet figures", "[presets]") {
  const auto h100 = with("dgx-h100", "tiny-gpt").cluster.device;
  CHECK(h100.peak(Dtype::bf16) == Approx(989.4e12));
  CHECK(h100.memory_bytes == 80.0 * (1ULL << 30));
  CHECK(h100.memory_bandwidth == 3.35e12);
  const auto a100 = with("dgx-a100", "tiny-gpt").cluster.device;
  CHECK(a100.peak(Dtype::bf16) == Approx(312e12));
  CHECK(a100.peak(Dtype::tf32) == Approx(156e12));
  const auto h200 = with("hgx-h200", "tiny-gpt").cluster.device;
  CHECK(h200.memory_bytes == 141e9);
  CHECK(h200.peak(Dtype::bf16) == Approx(989.4e12));
}

TEST_CASE("a cluster preset may refine another", "[presets]") {
  // hgx-h200 = dgx-h100 with H200 GPUs and a plain fat-tree.
  const auto c = with("hgx-h200", "tiny-gpt").cluster;
  CHECK(c.name == "hgx-h200");
  CHECK(c.gpus_per_node == 8);
  CHECK(c.intra.bandwidth == 450e9);
  CHECK(c.inter.shape == parasim::topology::NetworkShape::fat_tree);
  CHECK(with("dgx-h100", "tiny-gpt").cluster.inter.shape == parasim::topology::NetworkShape::rail_optimized);
  // hgx-h100-roce: the same 8 x 400 Gb/s NICs on Ethernet, a longer path, less of the rate as data.
  const auto roce = with("hgx-h100-roce", "tiny-gpt").cluster;
  const auto ib = with("hgx-h100", "tiny-gpt").cluster;
  CHECK(roce.inter.nic_bandwidth == ib.inter.nic_bandwidth);
  CHECK(roce.inter.nics_per_node == 8);
  CHECK(roce.inter.latency > ib.inter.latency);
  CHECK(roce.inter.efficiency < ib.inter.efficiency);
}

TEST_CASE("model presets match their published parameter counts", "[presets][model]") {
  // GPT-3 175B: 12*l*h^2 + 13*l*h + (V + s)*h + 2h with l=96, h=12288, V=51200, s=2048.
  const double l = 96, h = 12288, v = 51200, s = 2048;
  const double gpt3 = 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h;
  CHECK(with("dgx-h100", "gpt3-175b", 8).model.parameter_count() == Approx(gpt3));
  CHECK(gpt3 == Approx(174.6e9).epsilon(0.002));
  // Published: Llama 2 7B 6,738M; 70B 68,977M (Touvron et al. 2023, and the released
  // checkpoints); our layout has no biases for LLaMA except the attention ones, < 0.1 %.
  CHECK(with("dgx-h100", "llama2-7b", 8).model.parameter_count() == Approx(6.738e9).epsilon(0.001));
  CHECK(with("dgx-h100", "llama2-70b", 8).model.parameter_count() == Approx(68.977e9).epsilon(0.001));
  // Llama 3 / 3.1 (Meta, "The Llama 3 Herd of Models", 2024), the released checkpoints'
  // tensor sizes summed: 8,030,261,248; 70,553,706,496; 405,853,388,800.
  CHECK(with("dgx-h100", "llama3-8b", 8).model.parameter_count() == Approx(8030261248.0).epsilon(0.001));
  CHECK(with("dgx-h100", "llama3.1-8b", 8).model.parameter_count() == Approx(8030261248.0).epsilon(0.001));
  CHECK(with("dgx-h100", "llama3-70b", 8).model.parameter_count() == Approx(70553706496.0).epsilon(0.001));
  CHECK(with("dgx-h100", "llama3.1-70b", 8).model.parameter_count() == Approx(70553706496.0).epsilon(0.001));
  CHECK(with("dgx-h100", "llama3.1-405b", 8).model.parameter_count() == Approx(405853388800.0).epsilon(0.001));
  CHECK(with("dgx-h100", "gpt-30b", 8).model.parameter_count() == Approx(29.97e9).epsilon(0.01));
  // Mixtral (Mistral AI, 2024): 8x7B's released tensors sum to 46,702,792,704, 12.9B of
  // them active per token (2 of 8 experts); 8x22B 140,630,071,296 (141B), 39B active.
  const ModelSpec m7 = with("dgx-h100", "mixtral-8x7b", 8).model;
  CHECK(m7.parameter_count() == Approx(46702792704.0).epsilon(0.001));
  CHECK(m7.active_parameter_count() == Approx(12.9e9).epsilon(0.005));
  const ModelSpec m22 = with("dgx-h100", "mixtral-8x22b", 8).model;
  CHECK(m22.parameter_count() == Approx(140630071296.0).epsilon(0.001));
  CHECK(m22.active_parameter_count() == Approx(39e9).epsilon(0.01));
  // Qwen1.5-MoE-A2.7B (Qwen, 2024): 14.3B parameters, 2.7B active (4 of 60 experts and
  // the shared experts, which every token uses).
  const ModelSpec qwen = with("dgx-h100", "qwen1.5-moe-a2.7b", 8).model;
  CHECK(qwen.parameter_count() == Approx(14.3e9).epsilon(0.005));
  CHECK(qwen.active_parameter_count() == Approx(2.7e9).epsilon(0.01));
  CHECK(qwen.shared_expert_params() == Approx(24 * 0.0 + 3.0 * 2048 * 5632));
  // DeepSeek-V3 (DeepSeek-AI 2024): 671B parameters, 37B active per token, without the
  // multi-token prediction module. Its parts: 61 layers of latent attention (187,107,328
  // each: the query's 1,536 rank, the keys' and values' 512, heads of 128 + 64 and 128);
  // 3 dense SwiGLU MLPs of 18,432; 58 of 256 experts and a shared one of 2,048 with a
  // router; norms; a 129,280 x 7,168 embedding and LM head.
  const ModelSpec ds = with("dgx-h100", "deepseek-v3", 8).model;
  const double dh = 7168, expert = 3 * dh * 2048;
  CHECK(ds.attention_params() == 187107328.0);
  const double ds_layer = 187107328.0 + 4 * dh;
  const double ds_total = 61 * ds_layer + 3 * 3 * dh * 18432 + 58 * (257 * expert + 256 * dh) + 2 * 129280 * dh + 2 * dh;
  CHECK(ds.parameter_count() == Approx(ds_total));
  CHECK(ds.parameter_count() == Approx(671e9).epsilon(0.001));
  CHECK(ds.active_parameter_count() == Approx(ds_total - 58 * 248 * expert));
  CHECK(ds.active_parameter_count() == Approx(37e9).epsilon(0.02));
  CHECK(with("dgx-h100", "gpt3-13b", 8).model.parameter_count() == Approx(12.85e9).epsilon(0.01));
  CHECK(with("dgx-h100", "lenet", 8).model.parameter_count() == 61706.0);
  CHECK(with("dgx-h100", "resnet18", 8).model.parameter_count() == 11689512.0);
}

TEST_CASE("preset texts are valid YAML with a name or a preset to refine", "[presets]") {
  for (const PresetFile& p : all_presets()) {
    DYNAMIC_SECTION(p.path) {
      const Value v = parse_yaml(p.text, std::string(p.path));
      CHECK(v.is_map());
      CHECK((v.find("name") != nullptr || v.find("preset") != nullptr));
    }
  }
}
