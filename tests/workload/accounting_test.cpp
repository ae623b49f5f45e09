#include <catch2/catch.hpp>

#include "workload/accounting.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;

namespace {

ModelSpec model(const std::string& preset) {
  return load_text("cluster: dgx-h100\nmodel: " + preset + "\ntraining: {global_batch: 8}\n", "m.yaml").model;
}

ModelSpec gpt(int layers, int hidden, int heads, int vocab, int seq) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.seq_len = seq;
  return m;
}

}  // namespace

TEST_CASE("step FLOPs from the GEMMs equal Narayanan's formula", "[accounting][flops]") {
  // 72·B·s·l·h²·(1 + s/6h + V/12lh), GPT-3 175B at B = 1536.
  const ModelSpec m = model("gpt3-175b");
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  CHECK(step_flops(m, 1536, Recompute::none) == Approx(expected).epsilon(1e-12));
  // Full recompute: 96·B·s·l·h²·(1 + s/6h + V/16lh).
  const double recomputed = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  CHECK(step_flops(m, 1536, Recompute::full) == Approx(recomputed).epsilon(1e-12));
  // Selective recompute re-runs the attention core once more: Q·K^T and softmax·V,
  // 4·B·s²·h per layer.
  CHECK(step_flops(m, 1536, Recompute::selective) - step_flops(m, 1536, Recompute::none) ==
        Approx(4 * B * s * s * h * l).epsilon(1e-9));
}

TEST_CASE("tensor parallel GEMMs split the layer's FLOPs evenly", "[accounting][flops]") {
  const ModelSpec m = gpt(4, 1024, 16, 32000, 512);
  for (int tp : {1, 2, 4, 8}) {
    double sharded = 0.0;
    for (const Gemm& g : layer_forward_gemms(m, 2, tp)) sharded += g.flops();
    // 24·b·s·h² + 4·b·s²·h per layer, divided over tp ranks.
    const double b = 2, s = 512, h = 1024;
    CHECK(sharded * tp == Approx(24 * b * s * h * h + 4 * b * s * s * h));
  }
}

TEST_CASE("GQA and SwiGLU change the GEMM shapes as LLaMA's layer does", "[accounting][flops]") {
  // Llama 2 70B: K and V have 8 heads of 128 -> QKV output 8192 + 2·1024; SwiGLU gate+up
  // is one [h, 2f] GEMM, down [f, h].
  const ModelSpec m = model("llama2-70b");
  const auto g = layer_forward_gemms(m, 1, 8);
  CHECK(g[0].name == "qkv");
  CHECK(g[0].n == (8192 + 2 * 1024) / 8);
  CHECK(g[4].name == "mlp-gate-up");
  CHECK(g[4].n == 2 * 28672 / 8);
  CHECK(g[5].k == 28672 / 8);
  // Forward FLOPs per token and layer = 2 x the layer's GEMM weights (attention core aside).
  const double weights = 8192.0 * (8192 + 2048) + 8192.0 * 8192 + 3.0 * 8192 * 28672;
  const double gemm = g[0].flops() + g[3].flops() + g[4].flops() + g[5].flops();
  CHECK(gemm * 8 == Approx(2 * weights * 4096));
}

TEST_CASE("stored tensors add up to Korthikanti's activation memory", "[accounting][memory]") {
  // GPT-3 175B layer, micro-batch 1, 16-bit: s·b·h·(34 + 5·a·s/h) bytes.
  const ModelSpec m = model("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96;
  const double sbh = s * b * h;
  CHECK(layer_activation_bytes(m, 1, 1, false, Recompute::none, 2) == Approx(sbh * (34 + 5 * a * s / h)));
  for (double t : {2.0, 4.0, 8.0}) {
    // Tensor parallel without sequence parallel: s·b·h·(10 + 24/t + 5·a·s/(h·t)).
    CHECK(layer_activation_bytes(m, 1, static_cast<int>(t), false, Recompute::none, 2) ==
          Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
    // Sequence parallel: everything over t.
    CHECK(layer_activation_bytes(m, 1, static_cast<int>(t), true, Recompute::none, 2) ==
          Approx(sbh * (34 + 5 * a * s / h) / t));
    // Selective recompute with sequence parallel: 34·s·b·h/t.
    CHECK(layer_activation_bytes(m, 1, static_cast<int>(t), true, Recompute::selective, 2) == Approx(34 * sbh / t));
  }
  // Full recompute keeps the layer input only.
  CHECK(layer_activation_bytes(m, 1, 8, false, Recompute::full, 2) == Approx(2 * sbh));
  // Micro-batch size scales it linearly.
  CHECK(layer_activation_bytes(m, 4, 1, false, Recompute::none, 2) ==
        Approx(4 * layer_activation_bytes(m, 1, 1, false, Recompute::none, 2)));
}
