#include <catch2/catch.hpp>

#include <tuple>

#include "workload/accounting.hpp"
#include "scenario/load.hpp"
#include "workload/memory.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;

namespace {

Scenario scenario(const std::string& text, std::vector<std::string> sets = {}) { return load_text(text, "m.yaml", sets); }

const std::string one_gpu = "cluster: {preset: dgx-h100, gpus_per_node: 1}\nmodel: gpt3-13b\n"
                            "training: {global_batch: 8, precision: bf16}\n";

}  // namespace

TEST_CASE("mixed-precision AdamW holds 16 bytes per parameter, 18 with fp32 main gradients", "[memory]") {
  // One rank, tp = pp = 1, tied embedding: the rank holds every parameter. 16-bit weights 2,
  // gradients 2 (fp16, Megatron's default there) or 4 (bf16: fp32 main gradients), fp32
  // master 4, two fp32 moments 8.
  for (const auto& [precision, grads, total] : {std::tuple{"fp16", "", 16.0}, std::tuple{"bf16", "", 18.0},
                                                std::tuple{"bf16", "bf16", 16.0}}) {
    std::vector<std::string> sets{std::string("training.precision=") + precision};
    if (*grads != '\0') sets.push_back(std::string("training.grad_dtype=") + grads);
    const Scenario s = scenario(one_gpu, sets);
    const MemoryReport r = memory_per_rank(s);
    REQUIRE(r.stages.size() == 1);
    const MemoryBreakdown& b = r.stages[0];
    const double P = s.model.parameter_count();
    INFO(precision << " " << grads);
    CHECK(b.parameters == Approx(P));
    CHECK(b.weights + b.gradients + b.master + b.optimizer == Approx(total * P));
    CHECK(b.gradients == Approx((total - 14.0) * P));
    CHECK(b.master == Approx(4 * P));
  }
}

TEST_CASE("without fp32 master weights a 16-bit run holds 4 bytes per parameter less", "[memory]") {
  const Scenario with = scenario(one_gpu);
  const Scenario without = scenario(one_gpu, {"training.master_weights=false"});
  const double P = with.model.parameter_count();
  CHECK(memory_per_rank(without).stages[0].master == 0.0);
  CHECK(memory_per_rank(with).stages[0].total() - memory_per_rank(without).stages[0].total() == Approx(4 * P));
}

TEST_CASE("fp32 needs no master copy, SGD keeps one moment", "[memory]") {
  const Scenario s = scenario(one_gpu, {"training.precision=fp32", "training.optimizer=sgd"});
  const MemoryReport r = memory_per_rank(s);
  const MemoryBreakdown& b = r.stages[0];
  const double P = s.model.parameter_count();
  CHECK(b.master == 0.0);
  CHECK(b.weights + b.gradients + b.optimizer == Approx((4 + 4 + 4) * P));
  // 8-bit AdamW: a byte per moment, two fp32 maxima per block of 2048 values.
  const Scenario eight = scenario(one_gpu, {"training.optimizer=adamw8bit"});
  CHECK(memory_per_rank(eight).stages[0].optimizer == Approx(P * (2.0 + 8.0 / 2048)));
  CHECK(memory_per_rank(eight).stages[0].master == Approx(4 * P));
}

TEST_CASE("ZeRO-1 shards master weights and optimizer state over dp", "[memory]") {
  const std::string text = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 16}\nplan: {dp: 8}\n";
  const MemoryBreakdown plain = memory_per_rank(scenario(text)).stages[0];
  const MemoryBreakdown zero = memory_per_rank(scenario(text, {"plan.zero=1"})).stages[0];
  CHECK(zero.master == Approx(plain.master / 8));
  CHECK(zero.optimizer == Approx(plain.optimizer / 8));
  CHECK(zero.weights == plain.weights);
  CHECK(zero.gradients == plain.gradients);
}

TEST_CASE("ZeRO-2 also shards gradients, ZeRO-3 also weights, each with two units whole", "[memory]") {
  // GPT-3 13B over dp 8: the largest unit is a layer, 12·5120² + 13·5120 = 314,639,360
  // parameters (the embedding's 51,200 + 2,048 rows of 5,120 are fewer). bf16: fp32 main
  // gradients (4 bytes), 2-byte weights.
  const std::string text = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 16}\nplan: {dp: 8}\n";
  const MemoryBreakdown plain = memory_per_rank(scenario(text)).stages[0];
  const double P = plain.parameters;
  const double unit = 314639360.0;
  const MemoryBreakdown two = memory_per_rank(scenario(text, {"plan.zero=2"})).stages[0];
  CHECK(two.master == Approx(plain.master / 8));
  CHECK(two.optimizer == Approx(plain.optimizer / 8));
  CHECK(two.gradients == Approx(P * 4 / 8 + 2 * unit * 4));
  CHECK(two.weights == plain.weights);
  const MemoryBreakdown three = memory_per_rank(scenario(text, {"plan.zero=3"})).stages[0];
  CHECK(three.gradients == Approx(two.gradients));
  CHECK(three.weights == Approx(P * 2 / 8 + 2 * unit * 2));
  CHECK(three.total() < two.total());
  CHECK(two.total() < memory_per_rank(scenario(text, {"plan.zero=1"})).stages[0].total());
  // Hybrid sharding over groups of 4: the same, divided by 4 instead of 8.
  const MemoryBreakdown hybrid = memory_per_rank(scenario(text, {"plan.zero=3", "plan.shard_group=4"})).stages[0];
  CHECK(hybrid.weights == Approx(P * 2 / 4 + 2 * unit * 2));
  CHECK(hybrid.gradients == Approx(P * 4 / 4 + 2 * unit * 4));
  CHECK(hybrid.optimizer == Approx(plain.optimizer / 4));
  // dp 1 shards nothing.
  const std::string alone = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 16}\nplan: {dp: 1}\n";
  CHECK(memory_per_rank(scenario(alone, {"plan.zero=3"})).stages[0].total() ==
        Approx(memory_per_rank(scenario(alone)).stages[0].total()));
}

TEST_CASE("offloading moves the optimizer's state, then the weights, to host memory", "[memory][offload]") {
  // GPT-3 13B on a DGX H100 (2 TB of host memory, 256 GB per rank's share), dp 8 under
  // ZeRO-2 and -3: each rank's host keeps its shard's fp32 master weights, Adam moments and
  // fp32 gradients (16 bytes per parameter), plus the bf16 weights when those go too; the
  // device keeps two units' bf16 gradients (and weights), whole.
  const std::string text = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 16}\nplan: {dp: 8}\n";
  const MemoryBreakdown plain = memory_per_rank(scenario(text)).stages[0];
  const double P = plain.parameters;
  const double unit = 314639360.0;
  const MemoryReport two = memory_per_rank(scenario(text, {"plan.zero=2", "plan.offload_optimizer=true"}));
  const MemoryBreakdown& b = two.stages[0];
  CHECK(two.host_capacity == Approx(2.0 * (1ULL << 40) / 8));
  CHECK(b.host == Approx(P / 8 * 16));
  CHECK(b.master + b.optimizer == 0.0);
  CHECK(b.gradients == Approx(2 * unit * 2));
  CHECK(b.weights == plain.weights);
  const MemoryReport three = memory_per_rank(
      scenario(text, {"plan.zero=3", "plan.offload_optimizer=true", "plan.offload_params=true"}));
  CHECK(three.stages[0].host == Approx(P / 8 * 18));
  CHECK(three.stages[0].weights == Approx(2 * unit * 2));
  CHECK(three.fits());
  // A host too small for the state: out of host memory, which fits() says too.
  const MemoryReport small = memory_per_rank(
      scenario(text, {"plan.zero=2", "plan.offload_optimizer=true", "cluster.host.memory=64GB"}));
  CHECK(small.stages[0].total() < small.capacity);
  CHECK_FALSE(small.host_fits());
  CHECK_FALSE(small.fits());
  CHECK_THAT(describe_memory(small), Catch::Matchers::Contains("OUT OF HOST MEMORY"));
  // Activations: the stage's peak (under 1F1B on one stage, one micro-batch's 40 layers)
  // goes to host memory but two layers'.
  const std::string one = "cluster: {preset: dgx-h100, gpus_per_node: 1}\nmodel: gpt3-13b\n"
                          "training: {global_batch: 8, micro_batch: 1}\n";
  const Scenario base = scenario(one);
  const MemoryBreakdown kept = memory_per_rank(base).stages[0];
  const MemoryBreakdown moved = memory_per_rank(scenario(one, {"plan.offload_activations=true"})).stages[0];
  const double layer = layer_activation_bytes(base.model, 1, 1, false, Recompute::none, 2, true, 0);
  CHECK(moved.host == Approx(38 * layer));
  CHECK(kept.activations - moved.activations == Approx(38 * layer));
  CHECK(moved.weights + moved.gradients + moved.master + moved.optimizer ==
        Approx(kept.weights + kept.gradients + kept.master + kept.optimizer));
  // Without offloading nothing is in host memory and nothing is checked against it.
  CHECK(memory_per_rank(scenario(text)).host_capacity == 0.0);
}

TEST_CASE("activations are a layer's Korthikanti bytes x layers x micro-batches in flight", "[memory]") {
  // gpt3-13b on 8 GPUs, pp 4, m = 32 / (2 x 1) = 16 micro-batches. Stage 0 holds p = 4
  // micro-batches under 1F1B and all 16 under GPipe; each is 10 layers' activations.
  const std::string text =
      "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 32, attention: naive}\nplan: {dp: 2, pp: 4}\n";
  const Scenario s = scenario(text);
  const double per_layer = layer_activation_bytes(s.model, 1, 1, false, Recompute::none, 2);
  // Plus one layer's backward transients: the gradient in and out (2 s·h) and the MLP's two
  // intermediate gradients (2 s·4h), in 2 bytes.
  const double transient = (2.0 * 2048 * 5120 + 2.0 * 2048 * 4 * 5120) * 2;
  const MemoryReport one_f = memory_per_rank(s);
  CHECK(one_f.stages[0].in_flight == 4);
  CHECK(one_f.stages[0].activations == Approx(4 * 10 * per_layer + transient));
  CHECK(one_f.stages[3].in_flight == 1);
  const MemoryReport gpipe = memory_per_rank(scenario(text, {"plan.schedule=gpipe"}));
  CHECK(gpipe.stages[0].in_flight == 16);
  CHECK(gpipe.stages[0].activations == Approx(16 * 10 * per_layer + transient));
  // Full recompute keeps each layer's input, and during a layer's backward its recomputed
  // activations as well.
  const MemoryReport full = memory_per_rank(scenario(text, {"training.recompute=full"}));
  CHECK(full.stages[0].activations ==
        Approx(4 * 10 * (2048.0 * 5120 * 2) + per_layer + transient));
  // Only the last stage holds the logits; only the first the position embedding.
  CHECK(one_f.stages[0].logits == 0.0);
  CHECK(one_f.stages[3].logits == Approx(2048.0 * 51200 * 4));
}

TEST_CASE("FlashAttention keeps no s x s tensors, only the softmax statistics", "[memory]") {
  // The default on a GPU. Per layer: Korthikanti's bytes without the 5as/h term, plus the
  // log-sum-exp of every head and token in fp32.
  const std::string text = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 32}\nplan: {dp: 2, pp: 4}\n";
  const Scenario s = scenario(text);
  REQUIRE(s.training.attention == Attention::flash);
  const double sbh = 2048.0 * 5120;
  const double per_layer = sbh * 34 + 4.0 * 40 * 2048;
  CHECK(layer_activation_bytes(s.model, 1, 1, false, Recompute::none, 2, true) == Approx(per_layer));
  const double transient = (2.0 * 2048 * 5120 + 2.0 * 2048 * 4 * 5120) * 2;
  CHECK(memory_per_rank(s).stages[0].activations == Approx(4 * 10 * per_layer + transient));
}

TEST_CASE("context parallelism keeps 1/cp of every activation, plus the ring's blocks in flight", "[memory]") {
  // The FlashAttention case above over cp 2 (dp 1, pp 4): each rank holds 1,024 of the
  // 2,048 positions, so every stored tensor and transient halves; the backward's ring
  // holds the keys and values with their gradients' sum going out and coming in, 4 blocks
  // of 1,024 positions x 2 x 5,120 values x 2 bytes. Weights, gradients and the optimizer
  // state are the cp = 1 figures (ZeRO would shard them over dp x cp).
  const std::string text = "cluster: dgx-h100\nmodel: gpt3-13b\ntraining: {global_batch: 32}\nplan: {dp: 1, pp: 4, cp: 2}\n";
  const Scenario s = scenario(text);
  const double sbh = 2048.0 * 5120;
  const double per_layer = (sbh * 34 + 4.0 * 40 * 2048) / 2;
  const double transient = (2.0 * 2048 * 5120 + 2.0 * 2048 * 4 * 5120) * 2 / 2 + 4 * (1024.0 * 2 * 5120 * 2);
  const MemoryBreakdown b = memory_per_rank(s).stages[0];
  CHECK(b.activations == Approx(4 * 10 * per_layer + transient));
  const MemoryBreakdown alone = memory_per_rank(scenario(text, {"plan.cp=1"})).stages[0];
  CHECK(b.weights == alone.weights);
  CHECK(b.optimizer == alone.optimizer);
  CHECK(memory_per_rank(scenario(text, {"plan.zero=1"})).stages[0].optimizer == Approx(alone.optimizer / 2));
  CHECK(memory_per_rank(s).stages[3].logits == Approx(1024.0 * 51200 * 4));
}

TEST_CASE("a 30B model does not fit one 80 GB GPU, tensor parallelism over 8 does", "[memory][scenario]") {
  // 30B x 16 bytes = 480 GB on one GPU. TP 8 holds 1/8 of the layers: 60 GB of model
  // state; with full recompute the activations shrink to the layer inputs.
  const Scenario single = scenario("cluster: {preset: dgx-h100, gpus_per_node: 1}\nmodel: gpt-30b\n"
                                   "training: {global_batch: 8}\n");
  const MemoryReport r1 = memory_per_rank(single);
  CHECK_FALSE(r1.fits());
  CHECK(r1.peak().total() > 400e9);
  const Scenario tp8 = scenario("cluster: dgx-h100\nmodel: gpt-30b\ntraining: {global_batch: 8, recompute: full}\n"
                                "plan: {tp: 8, dp: 1}\n");
  const MemoryReport r8 = memory_per_rank(tp8);
  CHECK(r8.fits());
  CHECK(describe_memory(r1).find("OUT OF MEMORY") != std::string::npos);
}

TEST_CASE(
    "TorchTitan's op-level checkpointing keeps the layer input, every odd mm's output and the flash "
    "kernel's",
    "[memory][torchtitan]") {
  // Llama 3 8B at 8,192 tokens, micro-batch 2, on 8 GPUs with FSDP: T = 16,384 tokens, h =
  // 4,096, the kv width 8 x 128 = 1,024, f = 14,336. Saved per layer, in bf16: the input
  // (T·h), wq's output (T·h), wv's (T·1,024), SDPA's output (T·h) and log-sum-exp (fp32, 32
  // heads), w1's (T·f) and w2's (T·h): T·(4h + 1,024 + f)·2 + T·32·4 bytes.
  const std::string text =
      "cluster: dgx-h100\nmodel: llama3-8b\n"
      "training: {framework: torchtitan, global_batch: 16, micro_batch: 2, recompute: selective}\n"
      "plan: {dp: 8, zero: 3}\n";
  const Scenario s = scenario(text);
  const double T = 16384, h = 4096;
  const double per_layer = T * (4 * h + 1024 + 14336) * 2 + T * 32 * 4;
  const MemoryBreakdown b = memory_per_rank(s).stages[0];
  REQUIRE(b.in_flight == 1);
  // Megatron's selective set for the same layer keeps about twice as much.
  const MemoryBreakdown megatron = memory_per_rank(scenario(text, {"training.framework=megatron-core"})).stages[0];
  // Beside them, one layer's backward transient: the gradients in and out (2 T·h) and the
  // MLP's two (2 T·f), in bf16.
  const double f = 14336;
  const double transient = (2 * T * h + 2 * T * f) * 2;
  CHECK(b.activations == Approx(32 * per_layer + transient));
  CHECK(megatron.activations ==
        Approx(32 * layer_activation_bytes(s.model, 2, 1, false, Recompute::selective, 2, true) + transient));
  CHECK(megatron.activations - transient > 1.8 * (b.activations - transient));
  // Under tp 2 (sequence parallel) the input halves, the column-parallel outputs and the
  // flash kernel's halve, w2's partial sums stay whole and the two reduce-scatters' outputs
  // (T·h/2 each) are kept too.
  const MemoryBreakdown tp2 =
      memory_per_rank(scenario(text, {"plan.tp=2", "plan.dp=4", "plan.sequence_parallel=true"})).stages[0];
  const double per_layer_tp2 = T * (h / 2 + h / 2 + 512 + h / 2 + 7168 + h + 2 * h / 2) * 2 + T * 16 * 4;
  CHECK(tp2.activations == Approx(32 * per_layer_tp2 + (T * h + T * f) * 2));
  // Full recompute is the same for both: each layer's input.
  const MemoryBreakdown full = memory_per_rank(scenario(text, {"training.recompute=full"})).stages[0];
  const MemoryBreakdown full_megatron =
      memory_per_rank(scenario(text, {"training.recompute=full", "training.framework=megatron-core"})).stages[0];
  CHECK(full.activations == Approx(full_megatron.activations));
}

TEST_CASE("TorchTitan's loss holds three fp32 copies of the logits at its backward, Megatron's one",
          "[memory][torchtitan]") {
  // cross_entropy(pred.float(), labels): the log-softmax output kept (4 bytes per logit)
  // and, as the backward starts, the NLL's gradient and the log-softmax's input gradient
  // (4 bytes each), less the layers' backward transient that comes after it.
  const std::string text =
      "cluster: dgx-h100\nmodel: llama3-8b\n"
      "training: {framework: torchtitan, global_batch: 16, micro_batch: 2, recompute: full}\n"
      "plan: {dp: 8, zero: 3}\n";
  const double logits = 16384.0 * 128256 * 4;
  const MemoryBreakdown titan = memory_per_rank(scenario(text)).stages[0];
  const MemoryBreakdown megatron = memory_per_rank(scenario(text, {"training.framework=megatron-core"})).stages[0];
  CHECK(megatron.logits == Approx(logits));
  // The layer's transient under full recompute: gradients in and out (2 T·h), the MLP's two
  // (2 T·f), and the recomputed layer's activations, all in bf16.
  const double T = 16384, h = 4096, f = 14336;
  const double layer = layer_activation_bytes(scenario(text).model, 2, 1, false, Recompute::none, 2, true);
  const double transient = (2 * T * h + 2 * T * f) * 2 + layer;
  CHECK(titan.logits == Approx(logits + 2 * logits - transient));
  CHECK(titan.activations == Approx(megatron.activations));
}

TEST_CASE("NCCL's buffers: per communicator, each channel's SIMPLE, LL128 and LL buffers", "[memory][nccl]") {
  // 24 channels on the H100 preset, 4 MiB + 4,915,200 B + 512 KiB each.
  const double per_communicator = 24 * (4194304.0 + 4915200.0 + 524288.0);
  auto buffers = [](std::vector<std::string> sets) {
    return nccl_buffer_bytes(
        scenario("cluster: {preset: dgx-h100, nodes: 4}\nmodel: gpt3-13b\n"
                 "training: {global_batch: 64}\nplan: {dp: 32}\n",
                 std::move(sets)));
  };
  // dp alone: the gradients' communicator is the world.
  CHECK(buffers({}) == Approx(per_communicator));
  // tp 8 x dp 4: tp's, dp's and the world's.
  CHECK(buffers({"plan.tp=8", "plan.dp=4"}) == Approx(3 * per_communicator));
  // tp 8 x pp 4: tp's and the world's, and the pipeline's two peers of two SIMPLE channels.
  CHECK(buffers({"plan.tp=8", "plan.pp=4", "plan.dp=1"}) == Approx(2 * per_communicator + 4 * 4194304.0));
  // One rank: none; a CPU device (no collective channels): none.
  CHECK(buffers({"plan.dp=1", "cluster.nodes=1", "cluster.gpus_per_node=1"}) == 0.0);
  const Scenario cpu = scenario(
      "cluster: {preset: cpu-host, gpus_per_node: 4}\nmodel: gpt3-13b\n"
      "training: {global_batch: 64}\nplan: {dp: 4}\n");
  CHECK(nccl_buffer_bytes(cpu) == 0.0);
  // They are part of the total, as the workspace is.
  const Scenario s = scenario(one_gpu, {"cluster.gpus_per_node=8", "plan.dp=8"});
  const MemoryBreakdown b = memory_per_rank(s).stages[0];
  CHECK(b.communicators == Approx(per_communicator));
  CHECK(b.total() == Approx(b.tensors() + b.workspace + b.communicators));
}

TEST_CASE("a plan fits when it leaves the headroom free", "[memory][headroom]") {
  const Scenario s = scenario(one_gpu);
  const MemoryReport r = memory_per_rank(s);
  CHECK(r.headroom == 0.05);
  CHECK(r.usable() == Approx(0.95 * r.capacity));
  CHECK(r.margin() == Approx((0.95 * r.capacity - r.peak().total()) / r.capacity));
  // A capacity between the total and the total over 0.95: fits the device, not the headroom.
  const double total = r.peak().total();
  const std::string memory = std::to_string(static_cast<long long>(total / 0.975)) + "B";
  const MemoryReport tight = memory_per_rank(scenario(one_gpu, {"cluster.device.memory=" + memory}));
  CHECK(tight.peak().total() < tight.capacity);
  CHECK_FALSE(tight.fits());
  CHECK(tight.margin() < 0.0);
  const MemoryReport lower =
      memory_per_rank(scenario(one_gpu, {"cluster.device.memory=" + memory, "cluster.device.headroom=2%"}));
  CHECK(lower.fits());
  CHECK_THAT(describe_memory(tight), Catch::Matchers::Contains("past the 5 % headroom"));
}
