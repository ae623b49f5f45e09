// The executor's parallel modes against the serial model: the same seed and data must
// give the same gradients, updates and loss whatever the plan. Run under MPI with the
// rank count in the tag: `mpirun -np 2 exec_mpi_tests "[np2]"` (tests/CMakeLists.txt).
//
// The reference is Gpt<float> on one process: every micro-batch of the global batch in
// turn, gradients accumulated and averaged, then AdamW with the executor's settings.
#include <map>
#include <memory>

#include "tests/exec/parallel_helpers.hpp"

using namespace parasim;
using namespace parasim::exec;
using namespace parasim::test::parallel;

TEST_CASE("one rank equals the serial model, with and without recompute", "[exec][np1]") {
  matches_serial({});
  matches_serial({"training.recompute=full"});
  matches_serial({"training.recompute=selective"});
  matches_serial({"training.global_batch=2"});  // a single micro-batch
}

TEST_CASE("the fused (flash) attention trains as the unfused one does", "[exec][np1]") {
  // The serial reference runs the unfused attention; the shard the fused kernel, which keeps
  // no t x t tensor: the same losses, gradients and weights to float rounding.
  matches_serial({"training.attention=flash"});
  matches_serial({"training.attention=flash", "training.recompute=selective"});
}

TEST_CASE("the step's losses are read from the device once, after the step, whatever its micro-batches", "[exec][np1]") {
  // On a GPU every download stops the host until the device has caught up: one per
  // micro-batch for its loss would stall the issuing at each head backward. The losses stay
  // on the device and end_step() reads them at once, so a step of 4 micro-batches asks for
  // as many downloads as a step of one, and the loss is the same sum.
  CpuDevice& dev = device();
  const auto downloads_per_step = [&](const scenario::Scenario& s) {
    const program::Program prog = program::compile(s);
    const std::unique_ptr<Shard> shard = make_shard(dev, s, dev.rank());
    Runner runner(dev, s, prog, *shard, 30.0);
    runner.step(0);
    const std::int64_t before = dev.downloads();
    runner.step(1);
    CHECK(shard->loss_tokens() == static_cast<double>(s.training.global_batch) * s.model.seq_len);
    CHECK(std::isfinite(shard->loss_sum()));
    return dev.downloads() - before;
  };
  const std::int64_t one = downloads_per_step(tiny({"training.global_batch=2"}));  // one micro-batch of 2
  const std::int64_t four = downloads_per_step(tiny({}));                         // four of 2
  CHECK(four == one);
  CHECK(one <= 2);  // the losses, and the gradient norm's sum
}

TEST_CASE("data parallel 2: the all-reduced gradient is the full mini-batch's", "[exec][np2]") {
  matches_serial({"plan.dp=2"});
  matches_serial({"plan.dp=2", "plan.overlap_dp=false"});
  matches_serial({"plan.dp=2", "plan.bucket_size=16KiB"});  // several buckets
  matches_serial({"plan.dp=2", "plan.zero=1", "plan.bucket_size=16KiB"}, false);
  // The parameter all-gathers deferred to the next step's forward: step 2's loss needs
  // them before each layer, the final parameters the last step's gathers.
  matches_serial({"plan.dp=2", "plan.zero=1", "plan.bucket_size=16KiB", "plan.overlap_param_gather=true"}, false);
}

TEST_CASE("ZeRO-2 and ZeRO-3, dp 2: sharded gradients and gathered parameters equal the serial model", "[exec][np2]") {
  // Two micro-batches per step: each unit's gradient is reduce-scattered after each, its
  // share accumulating the sum. ZeRO-3 also gathers each unit before each pass over it:
  // the other share is NaN between uses, so a missed gather shows in the losses.
  for (const char* zero : {"plan.zero=2", "plan.zero=3"}) {
    matches_serial({"plan.dp=2", zero}, false);
    matches_serial({"plan.dp=2", zero, "training.recompute=full"}, false);
    matches_serial({"plan.dp=2", zero, "training.recompute=selective", "training.attention=flash"}, false);
    matches_serial({"plan.dp=2", zero, "training.global_batch=4"}, false);  // one micro-batch
    cnn_matches_serial({"plan.dp=2", zero}, false);
  }
}

TEST_CASE("tensor parallel 2: sharded layers equal the unsharded model", "[exec][np2]") {
  matches_serial({"plan.tp=2"});
  matches_serial({"plan.tp=2", "training.recompute=full"});
  matches_serial({"plan.tp=2", "training.recompute=selective"});
}

TEST_CASE("sequence parallel tp 2: sharded rows and gathered inputs equal the unsharded model", "[exec][np2]") {
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", "training.attention=flash"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", "training.recompute=full"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", "training.recompute=selective"});
}

TEST_CASE("tp communication overlap, tp 2: ring-exchanged blocks and pipelined sums equal the unsharded model",
          "[exec][np2]") {
  const std::string on = "plan.tp_comm_overlap=true";
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on, "training.attention=flash"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on, "training.recompute=full"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on, "training.recompute=selective"});
  // 18 rows per rank: two blocks in the pipelined reduce-scatter; 7: one.
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on, "model.seq_len=18"});
  matches_serial({"plan.tp=2", "plan.sequence_parallel=true", on, "model.seq_len=14", "training.micro_batch=1"});
}

TEST_CASE("context parallel 2: ring attention over load-balanced chunks equals the whole sequence's", "[exec][np2]") {
  // Each rank holds chunks i and 3 - i of the sequence's four; keys and values travel the
  // ring, their gradients come home: the serial model's losses, gradients and weights.
  matches_serial({"plan.cp=2"});
  matches_serial({"plan.cp=2", "training.recompute=full"});
  matches_serial({"plan.cp=2", "training.micro_batch=1", "model.seq_len=12"});
}

TEST_CASE("pipeline 2 under each schedule equals gradient accumulation on one rank", "[exec][np2]") {
  matches_serial({"plan.pp=2", "plan.schedule=gpipe"});
  matches_serial({"plan.pp=2", "plan.schedule=1f1b"});
  matches_serial({"plan.pp=2", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2"});
  matches_serial({"plan.pp=2", "plan.schedule=1f1b", "training.recompute=full"});
}

TEST_CASE("tensor parallel 4 equals the unsharded model", "[exec][np4]") {
  matches_serial({"plan.tp=4"});
  matches_serial({"plan.tp=4", "plan.sequence_parallel=true"});
  matches_serial({"plan.tp=4", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true"});
  matches_serial({"plan.tp=4", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true", "training.micro_batch=1"});
}

TEST_CASE("context parallel 4, and cp 2 with tp, dp and pp, equal the serial model", "[exec][np4]") {
  matches_serial({"plan.cp=4"});
  matches_serial({"plan.cp=2", "plan.tp=2"});
  matches_serial({"plan.cp=2", "plan.tp=2", "plan.sequence_parallel=true"});
  matches_serial({"plan.cp=2", "plan.pp=2"});
  matches_serial({"plan.cp=2", "plan.dp=2"});
  // The cp ranks are part of the gradients' group: ZeRO shards over dp x cp.
  matches_serial({"plan.cp=2", "plan.dp=2", "plan.zero=1"}, false);
  matches_serial({"plan.cp=2", "plan.dp=2", "plan.zero=3"}, false);
  matches_serial({"plan.cp=2", "plan.placement=cp,tp,dp,pp", "plan.dp=2"});
}

TEST_CASE("pipeline 4 under each schedule equals gradient accumulation on one rank", "[exec][np4]") {
  matches_serial({"plan.pp=4", "plan.schedule=gpipe"});
  matches_serial({"plan.pp=4", "plan.schedule=1f1b"});
  matches_serial({"plan.pp=4", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2", "model.layers=8"});
}

TEST_CASE("combined dp x tp x pp plans equal the serial run", "[exec][np4]") {
  matches_serial({"plan.dp=2", "plan.tp=2"});
  matches_serial({"plan.dp=2", "plan.pp=2"});
  matches_serial({"plan.tp=2", "plan.pp=2"});
  matches_serial({"plan.dp=2", "plan.pp=2", "plan.zero=1"}, false);
  matches_serial({"plan.tp=2", "plan.pp=2", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2"});
  matches_serial({"plan.tp=2", "plan.pp=2", "plan.sequence_parallel=true"});
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.zero=1"}, false);
  matches_serial({"plan.tp=2", "plan.pp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true"});
  matches_serial({"plan.tp=2", "plan.pp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true",
                  "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2", "training.recompute=full"});
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true"});
  matches_serial({"plan.dp=2", "plan.pp=2", "plan.zero=1", "plan.overlap_param_gather=true"}, false);
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.zero=1", "plan.overlap_param_gather=true"}, false);
  // ZeRO-2/3 units sharded over dp while tp splits them, with the sequence-parallel norms'
  // gradient sum over tp on the shards.
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.zero=2"}, false);
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.zero=3"}, false);
  matches_serial({"plan.dp=2", "plan.tp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true", "plan.zero=3",
                  "training.recompute=full"}, false);
}

TEST_CASE("hybrid sharding, dp 4 in shard groups of 2: sharded within, summed across, equal the serial model",
          "[exec][np4]") {
  // Two micro-batches per step (micro-batch 1): ZeRO-2/3 reduce-scatter within the shard
  // group after each and sum the shards over the replicas after the last.
  for (const char* zero : {"plan.zero=1", "plan.zero=2", "plan.zero=3"}) {
    matches_serial({"plan.dp=4", zero, "plan.shard_group=2", "training.micro_batch=1"}, false);
    cnn_matches_serial({"plan.dp=4", zero, "plan.shard_group=2", "training.micro_batch=1"}, false);
  }
  matches_serial({"plan.dp=4", "plan.zero=3", "plan.shard_group=2", "training.recompute=full"}, false);
}

TEST_CASE("dp x tp x pp training learns: the loss falls over 50 steps", "[exec][np4]") {
  const scenario::Scenario s = tiny({"plan.dp=2", "plan.pp=2", "model.layers=2", "training.learning_rate=0.003"});
  const Outcome got = parallel(s, 50);
  const Outcome ref = serial(s, 50);
  // Chance level is ln 64 = 4.16; the successor structure of the data is learnable.
  CHECK(got.losses.front() == Approx(std::log(64.0)).epsilon(0.05));
  CHECK(got.losses.back() < 0.6 * got.losses.front());
  // Fifty steps of the same arithmetic in another order stay with the serial run.
  CHECK(got.losses.back() == Approx(ref.losses.back()).epsilon(1e-3));
  UNSCOPED_INFO("loss " << got.losses.front() << " -> " << got.losses.back());
}

TEST_CASE("mixed precision: 16-bit storage with fp32 master weights tracks the fp32 run", "[exec][np2]") {
  // bf16 (8 mantissa bits) and fp16 (11) are emulated: weights and stored activations
  // rounded to the format, fp32 arithmetic, fp32 master weights and optimizer state.
  const Outcome fp32 = parallel(tiny({"plan.tp=2", "training.learning_rate=0.003"}), 30);
  for (const char* dtype : {"bf16", "fp16"}) {
    const Outcome half =
        parallel(tiny({"plan.tp=2", "training.learning_rate=0.003", std::string("training.precision=") + dtype}), 30);
    INFO(dtype << ": loss " << half.losses.back() << " against fp32 " << fp32.losses.back());
    double worst = 0.0;
    for (std::size_t i = 0; i < fp32.losses.size(); ++i) worst = std::max(worst, std::abs(half.losses[i] - fp32.losses[i]));
    CHECK(worst < 0.02);   // the stated tolerance: 0.02 nats over 30 steps
    CHECK(worst > 1e-6);   // and the rounding is really there
    CHECK(half.losses.back() < 0.8 * half.losses.front());
  }
}

TEST_CASE("16-bit storage holds two bytes a value: the weights' copy and what a layer keeps for its backward",
          "[exec][np1]") {
  // The tiny GPT (hidden 32, 4 heads, MLP 128, micro-batch 2 x sequence 16: N = 32 rows)
  // with the unfused attention (b x heads x t x t = 2,048 probabilities).
  const std::int64_t N = 32, H = 32, F = 128, att = 2 * 4 * 16 * 16;
  CpuDevice& dev = device();
  std::map<std::string, std::size_t> weights, layer;
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    const scenario::Scenario s = tiny({std::string("training.precision=") + dtype, "training.attention=naive"});
    const std::size_t before = dev.in_use();
    std::unique_ptr<Shard> shard = make_shard(dev, s, 0);
    weights[dtype] = dev.in_use() - before;
    shard->begin_step(0);
    shard->embedding_forward(0);
    for (int l = 0; l < 2; ++l) shard->layer_forward(l, 0, program::ComputeWhat::layer, false);
    const std::size_t at = dev.in_use();
    shard->layer_forward(2, 0, program::ComputeWhat::layer, false);
    // Layer 2's stored tensors, less its input (there before, fp32 until packed), plus
    // layer 3's input (fp32, written now): what layer 2 keeps, its input included.
    layer[dtype] = dev.in_use() - at;
    INFO(dtype << ": " << shard->param_count() << " parameters");
    const auto value = static_cast<std::size_t>(std::string(dtype) == "fp32" ? 4 : 2);
    // x, ln1, qkv (3), atty, x1, ln2: 8 N H; fc pre-activation and activation: 2 N F; the
    // probabilities; and the two layer norms' mean and rstd, fp32 always.
    const auto stored = static_cast<std::size_t>(8 * N * H + 2 * N * F + att);
    CHECK(layer[dtype] == value * stored + 4 * 4 * static_cast<std::size_t>(N));
  }
  // The compute copy of the weights: none in fp32 (the master weights are used), two bytes a
  // parameter in 16 bits.
  const std::size_t params = make_shard(dev, tiny({}), 0)->param_count();
  CHECK(weights["bf16"] - weights["fp32"] == 2 * params);
  CHECK(weights["fp16"] == weights["bf16"]);
}

TEST_CASE("fp8: FP8 GEMM operands on bf16 storage track the bf16 run", "[exec][np2][fp8]") {
  // The linear layers' GEMMs take operands rounded to E4M3 (E5M2 for gradients) under each
  // tensor's scale, current (its own amax) or delayed (the amax history of the steps
  // before, 1 at first); the rest as bf16. Plain tp 2, and tp 2 with sequence parallelism
  // and the tp communication overlap's blocks.
  std::vector<std::vector<double>> losses;
  for (const std::vector<std::string>& plan :
       {std::vector<std::string>{"plan.tp=2", "training.fp8_recipe=current"},
        std::vector<std::string>{"plan.tp=2", "training.fp8_recipe=delayed"},
        std::vector<std::string>{"plan.tp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true",
                                 "training.fp8_recipe=current"},
        std::vector<std::string>{"plan.tp=2", "plan.sequence_parallel=true", "plan.tp_comm_overlap=true",
                                 "training.fp8_recipe=delayed"}}) {
    const Compared c = train_both(plan, "training.precision", "bf16", "fp8");
    losses.push_back(c.variant.losses);
    const Outcome& bf16 = c.reference;
    const Outcome& fp8 = c.variant;
    const double worst = c.worst;
    INFO(fmt::format("{}: loss {} against bf16 {}, worst difference {}", fmt::join(plan, " "), fp8.losses.back(),
                     bf16.losses.back(), worst));
    CHECK(worst < 0.05);  // the stated tolerance: 0.05 nats over 30 steps
    CHECK(worst > 1e-4);  // FP8's 3 mantissa bits are really there
    CHECK(fp8.losses.back() < 0.8 * fp8.losses.front());
  }
  // The experts' GEMMs too (each expert its own scales), every expert on each rank and over
  // expert parallelism.
  for (const std::vector<std::string>& plan :
       {std::vector<std::string>{"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2"},
        std::vector<std::string>{"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.ep=2",
                                 "training.fp8_recipe=current"}}) {
    const Compared c = train_both(plan, "training.precision", "bf16", "fp8");
    INFO(fmt::format("{}: loss {} against bf16 {}, worst difference {}", fmt::join(plan, " "), c.variant.losses.back(),
                     c.reference.losses.back(), c.worst));
    CHECK(c.worst < 0.05);
    CHECK(c.worst > 1e-4);
    CHECK(c.variant.losses.back() < 0.8 * c.variant.losses.front());
  }
  // The recipes scale differently: the same first loss (forward before any update), then not.
  CHECK(losses[0].front() != losses[1].front());
  CHECK(losses[0] != losses[1]);
  CHECK(losses[2] != losses[3]);
}

TEST_CASE("fp8 delayed scaling keeps a scale for each linear layer's three tensors, each expert's too",
          "[exec][np2][fp8][moe]") {
  // 4 layers: QKV and the projection, and the experts' two GEMMs each (input, weight and
  // output gradient of every one); the router and the LM head stay in 16 bits. Every
  // expert on each rank (4), or over ep 2 (2 a rank).
  for (const int ep : {1, 2}) {
    const scenario::Scenario s = tiny({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2",
                                       fmt::format("plan.ep={}", ep), "training.precision=fp8"});
    Device& dev = device();
    const program::Program prog = program::compile(s);
    const std::unique_ptr<Shard> shard = make_shard(dev, s, dev.rank());
    Runner runner(dev, s, prog, *shard, 30.0);
    for (int step = 0; step < 2; ++step) runner.step(step);
    CHECK(shard->fp8_tensors() == static_cast<std::size_t>(4 * (2 + 2 * 4 / ep) * 3));
  }
}

TEST_CASE("8-bit AdamW: blockwise-quantized moments track fp32 AdamW's training", "[exec][np2]") {
  // The moments stored a byte per value (exec/model/adam8bit.hpp): replicated (dp 2), and
  // sharded over dp with ZeRO-1 and ZeRO-3, each rank quantizing its own share.
  for (const std::vector<std::string>& plan :
       {std::vector<std::string>{"plan.dp=2"}, std::vector<std::string>{"plan.dp=2", "plan.zero=1"},
        std::vector<std::string>{"plan.dp=2", "plan.zero=3"}}) {
    const Compared c = train_both(plan, "training.optimizer", "adamw", "adamw8bit");
    const Outcome& full = c.reference;
    const Outcome& eight = c.variant;
    const double worst = c.worst;
    INFO(fmt::format("{}: loss {} against fp32 moments' {}, worst difference {}", fmt::join(plan, " "),
                     eight.losses.back(), full.losses.back(), worst));
    CHECK(worst < 0.05);  // the stated tolerance: 0.05 nats over 30 steps
    CHECK(worst > 1e-6);  // the quantization is really there
    CHECK(eight.losses.back() < 0.8 * eight.losses.front());
  }
}

TEST_CASE("fp16 dynamic loss scaling skips overflowing steps and halves the scale until the gradients fit",
          "[exec][np2]") {
  // 128 tokens a step: the target's logit gradient is (1 - p) S / 128 with p about 1/64 at
  // the start, beyond fp16's largest value (65504) for every scale S >= 2^24. From
  // S = 2^40 at least the 17 steps at 2^40 ... 2^24 must overflow and be skipped, the
  // parameters untouched, the scale halved each time; then training goes on (a later
  // overflow, as gradients grow, skips a step and halves the scale again).
  for (const char* plan : {"plan.tp=2", "plan.dp=2"}) {
    std::vector<std::string> sets{plan, "training.precision=fp16", "training.loss_scale=4294967296",
                                  "training.learning_rate=0.003"};
    if (std::string(plan) == "plan.dp=2") sets.push_back("plan.zero=1");  // each rank checks its share
    const scenario::Scenario s = tiny(sets);
    const Outcome first = parallel(s, 1);
    CHECK(first.skipped.front());
    CHECK(max_abs_difference(first.params, serial(s, 0).params) == 0.0);  // untouched
    const Outcome got = parallel(s, 40);
    std::size_t k = 0;
    while (k < got.skipped.size() && got.skipped[k]) ++k;
    const auto later = std::count(got.skipped.begin() + static_cast<std::ptrdiff_t>(k), got.skipped.end(), true);
    INFO(plan << ": the first " << k << " steps skipped, " << later << " later");
    CHECK(k >= 9);
    CHECK(k + static_cast<std::size_t>(later) < 30);  // then mostly steps taken
    // Each skip halves the scale; a taken step keeps it (the window, 1000, is not reached).
    double scale = std::ldexp(1.0, 32);
    for (std::size_t i = 0; i < got.scales.size(); ++i) {
      if (got.skipped[i]) scale /= 2.0;
      CHECK(got.scales[i] == scale);
    }
    CHECK(std::all_of(got.params.begin(), got.params.end(), [](double p) { return std::isfinite(p); }));
    CHECK(got.losses.back() < 0.9 * got.losses.front());
  }
}

TEST_CASE("fp16 loss scale doubles after each window of overflow-free steps and tracks the fp32 run", "[exec][np1]") {
  const Outcome fp32 = parallel(tiny({"training.learning_rate=0.003"}), 12);
  const Outcome got = parallel(tiny({"training.precision=fp16", "training.loss_scale=1024",
                                     "training.loss_scale_window=5", "training.learning_rate=0.003"}),
                               12);
  for (bool sk : got.skipped) CHECK_FALSE(sk);
  CHECK(got.scales[3] == 1024.0);
  CHECK(got.scales[4] == 2048.0);  // after 5 steps
  CHECK(got.scales[9] == 4096.0);  // after 10
  CHECK(got.scales[11] == 4096.0);
  double worst = 0.0;
  for (std::size_t i = 0; i < fp32.losses.size(); ++i) worst = std::max(worst, std::abs(got.losses[i] - fp32.losses[i]));
  CHECK(worst < 0.02);
  CHECK(worst > 1e-6);
}

TEST_CASE("generic models on one rank equal GenericNet, with and without recompute", "[exec][np1][generic]") {
  cnn_matches_serial({});
  cnn_matches_serial({"training.recompute=full"});
  cnn_matches_serial({"training.global_batch=2"});
}

TEST_CASE("generic models learn the synthetic classes: the loss falls over 50 steps", "[exec][np1][generic]") {
  const scenario::Scenario s = cnn({"training.learning_rate=0.01"});
  const Outcome got = parallel(s, 50);
  // Ten classes: chance is ln 10 = 2.30.
  CHECK(got.losses.back() < 0.5 * std::log(10.0));
  CHECK(got.losses.back() < 0.5 * got.losses.front());
  UNSCOPED_INFO("loss " << got.losses.front() << " -> " << got.losses.back());
}

TEST_CASE("generic models in bf16 track the fp32 run", "[exec][np1][generic]") {
  const Outcome fp32 = parallel(cnn({"training.learning_rate=0.01"}), 20);
  const Outcome half = parallel(cnn({"training.learning_rate=0.01", "training.precision=bf16"}), 20);
  double worst = 0.0;
  for (std::size_t i = 0; i < fp32.losses.size(); ++i) worst = std::max(worst, std::abs(half.losses[i] - fp32.losses[i]));
  INFO("worst loss difference " << worst);
  CHECK(worst < 0.05);  // the stated tolerance: 0.05 nats over 20 steps
  CHECK(worst > 1e-6);  // and the rounding is really there
}

TEST_CASE("generic models, data parallel 2 and pipeline 2, equal the serial run", "[exec][np2][generic]") {
  cnn_matches_serial({"plan.dp=2"});
  cnn_matches_serial({"plan.dp=2", "plan.bucket_size=4KiB"});  // several buckets
  cnn_matches_serial({"plan.dp=2", "plan.zero=1", "plan.bucket_size=4KiB"}, false);
  cnn_matches_serial({"plan.pp=2", "plan.schedule=gpipe"});
  cnn_matches_serial({"plan.pp=2", "plan.schedule=1f1b", "training.recompute=full"});
  cnn_matches_serial({"plan.pp=2", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2"});
}

TEST_CASE("generic models over dp 2 x pp 2 and pp 4 equal the serial run", "[exec][np4][generic]") {
  cnn_matches_serial({"plan.dp=2", "plan.pp=2"});
  cnn_matches_serial({"plan.pp=4", "plan.schedule=1f1b"});
  // No tied embedding: ZeRO-2/3 with pipeline stages.
  cnn_matches_serial({"plan.dp=2", "plan.pp=2", "plan.zero=2"}, false);
  cnn_matches_serial({"plan.dp=2", "plan.pp=2", "plan.zero=3"}, false);
}

TEST_CASE("a rank out of device memory stops with OutOfMemory naming the rank and the sizes", "[exec][np1]") {
  // 64 KiB holds less than the weights (about 55K parameters of 4 bytes): the first
  // allocation past the capacity throws, and every buffer is given back as it unwinds.
  const scenario::Scenario s = tiny({});
  CpuDevice small(64 << 10);
  RunOptions o;
  o.steps = 1;
  o.warmup = 0;
  CHECK_THROWS_WITH(execute(s, small, o), Catch::Contains("rank 0: out of device memory allocating") &&
                                              Catch::Contains("of 0.1 MiB"));
  CHECK(small.in_use() == 0);
  CHECK(small.peak() <= std::size_t{64} << 10);
}
