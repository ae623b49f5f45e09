// The kernels of a Megatron layer (workload/kernels.hpp), checked against the accounting's
// GEMM shapes and by hand-counted lists.
#include <catch2/catch.hpp>

#include <string>

#include "workload/kernels.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;

namespace {

Scenario gpt(const std::string& training) {
  return load_text("cluster: dgx-a100\nmodel: {layers: 4, hidden: 1024, heads: 16, vocab: 51200, seq_len: 1024}\ntraining: {" +
                       training + "}\nplan: {dp: 1}\n",
                   "kernels.yaml");
}

double flops(const std::vector<Kernel>& ks, KernelKind kind) {
  double f = 0.0;
  for (const Kernel& k : ks) f += k.kind == kind ? k.flops() : 0.0;
  return f;
}

double bytes(const std::vector<Kernel>& ks) {
  double b = 0.0;
  for (const Kernel& k : ks) b += k.kind == KernelKind::memory ? k.bytes : 0.0;
  return b;
}

}  // namespace

TEST_CASE("a layer's GEMM kernels carry the accounting's FLOPs, twice over in backward", "[plan][kernels]") {
  const Scenario s = gpt("global_batch: 8, micro_batch: 2, precision: fp16, attention: naive");
  const KernelPlan kp = kernel_plan(s);
  double layer = 0.0;
  for (const Gemm& g : layer_forward_gemms(s.model, 2, 1)) layer += g.flops();
  CHECK(flops(layer_kernels(kp, LayerPart::whole, false), KernelKind::gemm) == Approx(layer));
  CHECK(flops(layer_kernels(kp, LayerPart::whole, true), KernelKind::gemm) == Approx(2 * layer));
  // The two halves make the whole.
  CHECK(layer_kernels(kp, LayerPart::attention, false).size() + layer_kernels(kp, LayerPart::mlp, false).size() ==
        layer_kernels(kp, LayerPart::whole, false).size());
}

TEST_CASE("Megatron's GPT layer launches 15 kernels forward and 29 backward (unfused attention)", "[plan][kernels]") {
  // Forward: layer norm, QKV, q/k layout, scores, softmax, dropout, context, permute,
  // output, bias-dropout-add | layer norm, up, bias-GeLU, down, bias-dropout-add.
  // Backward, MLP: dropout, bias grad, down dgrad and wgrad, GeLU, bias grad, up dgrad and
  // wgrad, layer norm (2), residual add = 11; attention: dropout, bias grad, output dgrad
  // and wgrad, permute, probs and values grads, attention dropout, softmax, q and k grads,
  // qkv layout, qkv dgrad and wgrad, bias grad, layer norm (2), residual add = 18.
  const KernelPlan kp = kernel_plan(gpt("global_batch: 8, precision: fp16, attention: naive"));
  CHECK(layer_kernels(kp, LayerPart::whole, false).size() == 15);
  CHECK(layer_kernels(kp, LayerPart::whole, true).size() == 29);
  // FlashAttention folds the core (6 kernels forward, 8 backward) into one kernel forward and
  // three backward.
  const KernelPlan fa = kernel_plan(gpt("global_batch: 8, precision: fp16"));
  CHECK(layer_kernels(fa, LayerPart::whole, false).size() == 10);
  CHECK(layer_kernels(fa, LayerPart::whole, true).size() == 24);
}

TEST_CASE("Megatron's fused softmax runs where its kernel takes the shape, else PyTorch's in fp32", "[plan][kernels]") {
  // is_kernel_available, causal: 16-bit, 16 < s <= 16384, s % 4 == 0, b·np % 4 == 0 and a
  // multiple of the batches per block: 128 threads / 32 lanes x 1 row per warp = 4 for
  // s > 128; at s = 128, 4 warps x 2 rows = 8.
  CHECK(fused_softmax_available(2, 1024, 4));
  CHECK_FALSE(fused_softmax_available(2, 1024, 2));   // tp 8 of 16 heads at micro-batch 1
  CHECK_FALSE(fused_softmax_available(2, 1024, 6));
  CHECK_FALSE(fused_softmax_available(2, 128, 4));
  CHECK(fused_softmax_available(2, 128, 8));
  CHECK_FALSE(fused_softmax_available(2, 16, 4));
  CHECK_FALSE(fused_softmax_available(2, 1022, 4));
  CHECK_FALSE(fused_softmax_available(2, 32768, 4));
  CHECK(fused_softmax_available(4, 1024, 2));  // fp32: one kernel, as the executor runs it
  // 16 heads over tp 8 at micro-batch 1: 2 attention batches. Forward the one kernel becomes
  // five (to fp32, the fp16 query-key layer scaling, mask, softmax, back), backward five
  // too; the s x s tensors then move in fp32: A (2 + 4) + 8A + 8A + 8A + A (4 + 2) = 36 A
  // bytes forward instead of 4 A. In bf16 the scaling is off: four each way, 28 A.
  const Scenario s = gpt("global_batch: 8, micro_batch: 1, precision: fp16, attention: naive");
  Scenario t8 = s;
  t8.plan.tp = 8;
  const KernelPlan fused = kernel_plan(s);
  const KernelPlan torch = kernel_plan(t8);
  CHECK(fused.fused_softmax);
  CHECK_FALSE(torch.fused_softmax);
  CHECK(layer_kernels(torch, LayerPart::whole, false).size() == 15 + 4);
  CHECK(layer_kernels(torch, LayerPart::whole, true).size() == 29 + 4);
  const double A = 2.0 * 1024 * 1024;
  auto softmax_bytes = [](const std::vector<Kernel>& ks) {
    double b = 0.0;
    for (const Kernel& k : ks) {
      const std::string n(k.name);
      if (n.find("fp32") != std::string::npos || n.find("mask") != std::string::npos || n == "softmax" ||
          n == "scores-scale" ||
          n.find("16-bit") != std::string::npos) {
        b += k.bytes;
      }
    }
    return b;
  };
  CHECK(softmax_bytes(layer_kernels(torch, LayerPart::attention_core, false)) == Approx(36 * A));
  Scenario b8 = t8;
  b8.training.precision = Dtype::bf16;
  const KernelPlan bf = kernel_plan(b8);
  CHECK_FALSE(bf.fused_softmax);
  CHECK(layer_kernels(bf, LayerPart::whole, false).size() == 15 + 3);
  CHECK(softmax_bytes(layer_kernels(bf, LayerPart::attention_core, false)) == Approx(28 * A));
}

TEST_CASE("FlashAttention computes half the causal scores, the unfused core streams the s x s tensors", "[plan][kernels]") {
  const KernelPlan fa = kernel_plan(gpt("global_batch: 8, micro_batch: 2, precision: bf16"));
  const KernelPlan naive = kernel_plan(gpt("global_batch: 8, micro_batch: 2, precision: bf16, attention: naive"));
  // Q.K^T and P.V for b = 2 and 16 heads of d = 64 over s = 1024: 4 b a s^2 d FLOPs, half causal.
  const double core = 4.0 * 2 * 16 * 1024.0 * 1024 * 64;
  CHECK(flops(layer_kernels(fa, LayerPart::attention_core, false), KernelKind::flash_forward) == Approx(core / 2));
  CHECK(flops(layer_kernels(naive, LayerPart::attention_core, false), KernelKind::gemm) == Approx(core));
  // The unfused core's element-wise kernels: softmax (read and write A), dropout (read and
  // write A, a byte of mask), for A = b a s^2 in 2 bytes, plus the two layout copies.
  const double A = 2.0 * 16 * 1024 * 1024;
  const double T = 2.0 * 1024;
  CHECK(bytes(layer_kernels(naive, LayerPart::attention_core, false)) ==
        Approx(4 * A + 5 * A + 2 * T * 2048 * 2 + 2 * T * 1024 * 2));
}

TEST_CASE("Megatron's optimizer step moves 54 bytes per parameter under fp16, 42 under bf16", "[plan][kernels]") {
  // fp16: main gradients to fp32 (2 + 4), unscale and check (4 + 4), norm 4, AdamW 28, new
  // 16-bit weights (4 + 2), zeroed gradients 2. bf16 with fp32 main gradients: no copy, no
  // unscale, zeroing 4.
  const double P = 1e6;
  CHECK(bytes(optimizer_kernels(gpt("global_batch: 8, precision: fp16"), P)) == Approx(54 * P));
  CHECK(bytes(optimizer_kernels(gpt("global_batch: 8, precision: bf16"), P)) == Approx(42 * P));
  CHECK(bytes(optimizer_kernels(gpt("global_batch: 8, precision: fp32"), P)) == Approx(36 * P));
}

TEST_CASE("weight gradients accumulate into the main gradients in their dtype", "[plan][kernels]") {
  for (const auto& [precision, element] : {std::pair{"bf16", 4}, std::pair{"fp16", 2}}) {
    const KernelPlan kp = kernel_plan(gpt(std::string("global_batch: 8, precision: ") + precision));
    int wgrads = 0;
    for (const Kernel& k : layer_kernels(kp, LayerPart::whole, true)) {
      if (k.accumulate == 0) continue;
      ++wgrads;
      CHECK(k.accumulate == element);
      CHECK(k.k == 1024);  // over the micro-batch's tokens
    }
    CHECK(wgrads == 4);  // QKV, output, up, down
  }
}

TEST_CASE("Megatron-DeepSpeed adds each micro-batch's weight gradients after the GEMM, 26 bytes a value under bf16",
          "[plan][kernels][framework]") {
  // The same layer's backward (its attention core unfused in both) under Megatron-Core (fused into the wgrad GEMM) and under
  // Megatron-DeepSpeed: each of the four wgrad GEMMs writes its 16-bit gradient, then the
  // BF16 optimizer's per-micro-batch work on its m x n values: zero (2), autograd's add
  // (2 + 2 read, 2 written), the cast to fp32 (2 read, 4 written), the add into the fp32
  // gradient (4 + 4 read, 4 written): 26 bytes a value, four kernels each.
  const std::vector<Kernel> core = layer_kernels(kernel_plan(gpt("global_batch: 8, precision: bf16, attention: naive")), LayerPart::whole, true);
  const std::vector<Kernel> ds = layer_kernels(
      kernel_plan(gpt("framework: megatron-deepspeed, global_batch: 8, precision: bf16, attention: naive")), LayerPart::whole, true);
  double values = 0.0;
  int wgrads = 0;
  for (const Kernel& k : ds) {
    if (k.kind != KernelKind::gemm || k.name.find("wgrad") == std::string_view::npos) continue;
    ++wgrads;
    CHECK(k.accumulate == 0);
    values += static_cast<double>(k.m) * static_cast<double>(k.n);
  }
  CHECK(wgrads == 4);
  // h = 1024: QKV 3h x h, output h x h, MLP 4h x h and h x 4h.
  CHECK(values == Approx(12.0 * 1024 * 1024));
  CHECK(ds.size() == core.size() + 4 * 4);
  CHECK(bytes(ds) - bytes(core) == Approx(26.0 * values));
  // fp16's optimizer keeps 16-bit main gradients: autograd's add alone, 6 bytes a value.
  const std::vector<Kernel> core16 = layer_kernels(kernel_plan(gpt("global_batch: 8, precision: fp16, attention: naive")), LayerPart::whole, true);
  const std::vector<Kernel> ds16 = layer_kernels(
      kernel_plan(gpt("framework: megatron-deepspeed, global_batch: 8, precision: fp16, attention: naive")), LayerPart::whole, true);
  CHECK(ds16.size() == core16.size() + 4);
  CHECK(bytes(ds16) - bytes(core16) == Approx(6.0 * values));
  // FSDP's gradient goes to its reduce-scatter as the GEMM wrote it: no kernel added.
  const std::vector<Kernel> fsdp = layer_kernels(
      kernel_plan(gpt("framework: pytorch-fsdp, global_batch: 8, precision: bf16, attention: naive")), LayerPart::whole, true);
  CHECK(fsdp.size() == core.size());
}

TEST_CASE("fp8: the four linear layers' GEMMs run in FP8 with their casts, the rest in bf16", "[plan][kernels][fp8]") {
  // On an H100 node (which has an fp8 rate): forward 4 FP8 GEMMs (QKV, projection, MLP up and
  // down), backward 8 (data and weight gradients); the attention core and LM head stay
  // 16-bit. Casts: forward one of its own (the attention output, T x h: 4 bytes per element,
  // both layouts), the others fused into the layer norms and GeLU; backward three (the
  // gradients entering the projection, MLP-down and QKV). Current scaling adds an amax pass
  // (2 bytes per element) before each of the 4 + 4 casts.
  auto fp8 = [](const std::string& recipe) {
    return load_text("cluster: dgx-h100\nmodel: {layers: 4, hidden: 1024, heads: 16, vocab: 51200, seq_len: 1024}\n"
                     "training: {global_batch: 8, micro_batch: 2, precision: fp8, fp8_recipe: " +
                         recipe + "}\nplan: {dp: 1}\n",
                     "fp8.yaml");
  };
  const KernelPlan kp = kernel_plan(fp8("delayed"));
  CHECK(kp.element == 2);  // stored in bf16
  const double T = 2.0 * 1024, h = 1024, f = 4096;
  auto count = [](const std::vector<Kernel>& ks, bool want_fp8) {
    int n = 0;
    for (const Kernel& k : ks) n += k.kind == KernelKind::gemm && k.fp8 == want_fp8 ? 1 : 0;
    return n;
  };
  auto named = [](const std::vector<Kernel>& ks, std::string_view what) {
    double b = 0.0;
    for (const Kernel& k : ks) b += k.name.find(what) != std::string_view::npos ? k.bytes : 0.0;
    return b;
  };
  const auto fwd = layer_kernels(kp, LayerPart::whole, false);
  const auto bwd = layer_kernels(kp, LayerPart::whole, true);
  CHECK(count(fwd, true) == 4);
  CHECK(count(bwd, true) == 8);
  for (const Kernel& k : head_kernels(kp, false)) CHECK_FALSE(k.fp8);
  CHECK(named(fwd, "cast") == Approx(4.0 * T * h));
  CHECK(named(bwd, "cast") == Approx(4.0 * (T * h + T * h + T * 3 * h)));
  CHECK(named(fwd, "amax") == 0.0);
  // An FP8 GEMM reads 1-byte operands and writes bf16: QKV, T x 3h x h.
  for (const Kernel& k : fwd) {
    if (k.name == "qkv") CHECK(k.io_bytes() == Approx((T * h + h * 3 * h) * 1.0 + T * 3 * h * 2.0));
  }
  const KernelPlan current = kernel_plan(fp8("current"));
  CHECK(named(layer_kernels(current, LayerPart::whole, false), "amax") ==
        Approx(2.0 * (T * h + T * h + T * h + T * f)));  // QKV, projection, MLP-up, MLP-down inputs
  CHECK(named(layer_kernels(current, LayerPart::whole, true), "amax") == Approx(2.0 * (T * h + T * h + T * f + T * 3 * h)));
  // The weights, cast once per step: 4 bytes per linear parameter (12h² + ... with f = 4h: 12h²).
  CHECK(bytes(weight_cast_kernels(kp, LayerPart::whole)) == Approx(4.0 * 12 * h * h));
  CHECK(weight_cast_kernels(kernel_plan(gpt("global_batch: 8, precision: bf16")), LayerPart::whole).empty());
}

TEST_CASE("TorchTitan's op-level selective recompute reruns the element-wise kernels and every second mm",
          "[plan][kernels][framework]") {
  // A Llama layer (h 1024, 16 heads of 64, 4 KV heads: kv 256 columns, SwiGLU f 2816) under
  // TorchTitan: the mm ops run wq 1, wk 2, wv 3, wo 4, w1 5, w3 6, w2 7 and the policy saves
  // the odd ones, so the recompute's GEMMs are wk (T x 256 x 1024), wo (T x 1024 x 1024) and
  // w3 (T x 2816 x 1024); FlashAttention's output is saved; every memory kernel runs again.
  const auto llama = [](const std::string& framework) {
    return load_text("cluster: dgx-h100\nmodel: {layers: 2, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 2816, "
                     "mlp: swiglu, vocab: 32000, seq_len: 2048}\ntraining: {framework: " + framework +
                         ", global_batch: 16, micro_batch: 2, recompute: selective, compile: true}\nplan: {dp: 8}\n",
                     "titan.yaml");
  };
  const KernelPlan titan = kernel_plan(llama("torchtitan"));
  REQUIRE(op_level_recompute(titan));
  const std::vector<Kernel> again = layer_kernels(titan, LayerPart::attention_core, false);
  const std::vector<Kernel> forward = layer_kernels(titan, LayerPart::whole, false);
  const double T = 2.0 * 2048;
  CHECK(flops(again, KernelKind::gemm) == Approx(2.0 * T * 1024 * (256 + 1024 + 2816)));
  CHECK(flops(again, KernelKind::flash_forward) == 0.0);
  CHECK(bytes(again) == Approx(bytes(forward)));
  // Megatron-Core's selective recompute is the attention core alone: one FlashAttention kernel.
  const std::vector<Kernel> core = layer_kernels(kernel_plan(llama("megatron-core")), LayerPart::attention_core, false);
  REQUIRE(core.size() == 1);
  CHECK(core[0].kind == KernelKind::flash_forward);
}

TEST_CASE("TorchTitan in eager mode runs RMSNorm and rotary and SwiGLU op by op and torch.compile fuses them",
          "[plan][kernels][framework]") {
  const auto llama = [](const std::string& training) {
    return load_text("cluster: dgx-h100\nmodel: {layers: 2, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 2816, "
                     "mlp: swiglu, vocab: 32000, seq_len: 2048}\ntraining: {global_batch: 16, micro_batch: 2, " +
                         training + "}\nplan: {dp: 8}\n",
                     "titan.yaml");
  };
  const KernelPlan eager = kernel_plan(llama("framework: torchtitan"));
  const KernelPlan compiled = kernel_plan(llama("framework: torchtitan, compile: true"));
  const KernelPlan core = kernel_plan(llama("framework: megatron-core"));
  REQUIRE(eager.eager_elementwise());
  REQUIRE_FALSE(compiled.eager_elementwise());
  const double T = 2.0 * 2048, h = 1024, q = 1024, kv = 256, f = 2816;
  // Forward, per layer: two RMSNorms of 2 + 4 + 8 + 4 + 8 + 4 + 2 + 2 + 2 = 36 bytes a value
  // (and 16 bytes a row) where the fused norm moves 4; rotary on q and k at 20 bytes a value
  // against 4; SiLU then the product, 10 bytes a value of T x f against SwiGLU's 6.
  const double extra = 2.0 * (T * h * 32.0 + 16.0 * T) + (T * (q + kv)) * 16.0 + T * f * 4.0;
  CHECK(bytes(layer_kernels(eager, LayerPart::whole, false)) - bytes(layer_kernels(compiled, LayerPart::whole, false)) ==
        Approx(extra));
  // Compiled, TorchTitan's layer is Megatron-Core's kernel for kernel.
  CHECK(layer_kernels(compiled, LayerPart::whole, false).size() == layer_kernels(core, LayerPart::whole, false).size());
  CHECK(layer_kernels(eager, LayerPart::whole, true).size() > layer_kernels(compiled, LayerPart::whole, true).size());
}

TEST_CASE("FlashAttention-1 runs the same kernels as the second generation at two thirds of its rates",
          "[plan][kernels]") {
  const KernelPlan v1 = kernel_plan(gpt("global_batch: 8, attention: flash-v1"));
  const KernelPlan v2 = kernel_plan(gpt("global_batch: 8, attention: flash"));
  const std::vector<Kernel> a = layer_kernels(v1, LayerPart::whole, true), b = layer_kernels(v2, LayerPart::whole, true);
  REQUIRE(a.size() == b.size());
  int flash = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].flops() == b[i].flops());
    if (a[i].kind == KernelKind::flash_backward) {
      ++flash;
      CHECK(a[i].v1);
      CHECK_FALSE(b[i].v1);
    }
  }
  CHECK(flash == 1);
}
