// The executor's parallel modes against the serial model: the same seed and data must
// give the same gradients, updates and loss whatever the plan. Run under MPI with the
// rank count in the tag: `mpirun -np 2 exec_mpi_tests "[np2]"` (tests/CMakeLists.txt).
//
// The reference is Gpt<float> on one process: every micro-batch of the global batch in
// turn, gradients accumulated and averaged, then AdamW with the executor's settings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exec/cpu/cpu_device.hpp"
#include "exec/execute.hpp"
#include "exec/generic_shard.hpp"
#include "exec/model/generic.hpp"
#include "exec/model/gpt.hpp"
#include "exec/model/kernels.hpp"
#include "exec/runner.hpp"
#include "exec/shard.hpp"
#include "plan/load.hpp"

using namespace parasim;
using namespace parasim::exec;

namespace {

CpuDevice& device() {
  static CpuDevice dev;
  return dev;
}

plan::Scenario tiny(std::vector<std::string> sets) {
  const std::string text = R"(cluster: {preset: cpu-host, gpus_per_node: 4}
model: {layers: 4, hidden: 32, heads: 4, vocab: 64, seq_len: 16}
training: {global_batch: 8, micro_batch: 2, precision: fp32}
plan: {dp: 1}
run: {seed: 7}
)";
  return plan::load_text(text, "parallel.yaml", sets);
}

// A small generic (CNN-like) model: four GEMM-equivalent layers with biases, stretches up
// and down, and ten classes.
plan::Scenario cnn(std::vector<std::string> sets) {
  const std::string text = R"(cluster: {preset: cpu-host, gpus_per_node: 4}
model:
  name: tiny-cnn
  kind: generic
  layers:
    - {name: c1, params: 150, forward_flops: 60000, activations: 300}
    - {name: c2, params: 600, forward_flops: 40000, activations: 200}
    - {name: fc1, params: 2000, forward_flops: 4000, activations: 40}
    - {name: fc2, params: 410, forward_flops: 800, activations: 10}
training: {global_batch: 8, micro_batch: 2, precision: fp32}
plan: {dp: 1}
run: {seed: 7}
)";
  return plan::load_text(text, "cnn.yaml", sets);
}

struct Outcome {
  std::vector<double> grads;   // full layout, after the last step (before its update)
  std::vector<double> params;  // full layout, after the last update
  std::vector<double> losses;  // per step
  double flops = 0.0;          // performed in the last step, all ranks
  std::vector<bool> skipped;   // per step: fp16 skipped the optimizer step
  std::vector<double> scales;  // per step: the loss scale after it
};

// Steps of a serial reference `model` (Gpt<float> or GenericNet<float>): every micro-batch
// of the global batch in turn (`micro_batch(i, step)` runs forward and backward of the i-th
// and returns its mean loss), gradients averaged, then AdamW with the executor's settings.
template <class Model, class MicroBatch>
Outcome train_serial(const plan::Scenario& s, int steps, Model& model, MicroBatch&& micro_batch) {
  const auto n = static_cast<std::size_t>(model.param_count());
  std::vector<float> am(n, 0.0F), av(n, 0.0F);
  Outcome out;
  const int count = s.training.global_batch / s.training.micro_batch;
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    double loss = 0.0;
    for (int i = 0; i < count; ++i) loss += micro_batch(i, step);
    for (float& g : model.grads()) g /= static_cast<float>(count);
    out.losses.push_back(loss / count);
    out.grads.assign(model.grads().begin(), model.grads().end());
    kernels::adamw(model.params().data(), model.grads().data(), am.data(), av.data(), static_cast<std::int64_t>(n),
                   kernels::AdamW{s.training.learning_rate, 0.9, 0.95, 1e-8, 0.0}, step + 1);
  }
  out.params.assign(model.params().begin(), model.params().end());
  return out;
}

Outcome serial(const plan::Scenario& s, int steps) {
  const int b = s.training.micro_batch;
  if (s.model.kind == plan::ModelKind::generic) {
    const GenericConfig cfg = generic_config(s);
    GenericNet<float> model(cfg, s.run.seed);
    ImageBatch batch;
    return train_serial(s, steps, model, [&](int i, int step) {
      if (i == 0) batch = synthetic_images(cfg.classes(), cfg.input_width, s.training.global_batch, s.run.seed, step);
      const auto width = static_cast<std::size_t>(cfg.input_width);
      const float loss =
          model.forward(std::span(batch.inputs).subspan(static_cast<std::size_t>(i * b) * width, b * width),
                        std::span(batch.labels).subspan(static_cast<std::size_t>(i * b), static_cast<std::size_t>(b)));
      model.backward();
      return static_cast<double>(loss);
    });
  }
  const plan::ModelSpec& m = s.model;
  GptConfig cfg{m.vocab, m.seq_len, m.layers, m.hidden, m.heads};
  if (m.moe()) {
    cfg.experts = m.experts;
    cfg.top_k = m.top_k;
    cfg.expert_ffn = m.expert_ffn_hidden;
  }
  Gpt<float> model(cfg, s.run.seed);
  Batch batch;
  return train_serial(s, steps, model, [&](int i, int step) {
    if (i == 0) batch = synthetic_batch(m.vocab, s.training.global_batch, m.seq_len, s.run.seed, step);
    const auto at = static_cast<std::size_t>(i) * b * m.seq_len;
    const auto len = static_cast<std::size_t>(b) * m.seq_len;
    const float loss = model.forward(std::span(batch.tokens).subspan(at, len), std::span(batch.targets).subspan(at, len),
                                     b, m.seq_len);
    model.backward();
    return static_cast<double>(loss);
  });
}

Outcome parallel(const plan::Scenario& s, int steps) {
  Device& dev = device();
  const plan::Program prog = plan::compile(s);
  const std::unique_ptr<Shard> owned = make_shard(dev, s, dev.rank());
  Shard& shard = *owned;
  Runner runner(dev, s, prog, shard, 30.0);
  Outcome out;
  for (int step = 0; step < steps; ++step) {
    const StepTiming t = runner.step(step);
    std::vector<double> sums{shard.loss_sum(), shard.loss_tokens(), t.flops};
    dev.sum_to_all(sums);
    out.losses.push_back(sums[0] / sums[1]);
    out.flops = sums[2];
    out.skipped.push_back(shard.last_step_skipped());
    out.scales.push_back(shard.loss_scale());
  }
  runner.gather_parameters();  // as execute() does after the last step
  for (bool grads : {true, false}) {
    std::vector<float> full(static_cast<std::size_t>(shard.full_param_count()), 0.0F);
    shard.add_to_full(full, grads);
    std::vector<double> sum(full.begin(), full.end());
    dev.sum_to_all(sum);
    (grads ? out.grads : out.params) = std::move(sum);
  }
  return out;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

double program_flops(const plan::Program& p) {
  double f = 0.0;
  for (const plan::Op& o : p.ops) f += o.flops;
  return f;
}

// One plan against the serial model over two steps: gradients of the second step (under
// ZeRO-1 each rank's reduce-scatter leaves only its share summed, so only the updated
// weights are compared), weights after two updates, losses, and FLOPs against the Program.
void matches_serial(const plan::Scenario& s, const std::vector<std::string>& sets, bool compare_grads) {
  REQUIRE(s.plan.world() == device().world());
  const Outcome ref = serial(s, 2);
  const Outcome got = parallel(s, 2);
  INFO("plan: " << fmt::format("{}", fmt::join(sets, " ")));
  if (compare_grads) {
    REQUIRE(got.grads.size() == ref.grads.size());
    CHECK(relative_error(got.grads, ref.grads) < 1e-5);
  }
  CHECK(max_abs_difference(got.params, ref.params) < 1e-5);  // 1 % of one update (lr 1e-3)
  CHECK(max_abs_difference(got.params, serial(s, 1).params) > 1e-4);  // the second update is seen
  for (std::size_t i = 0; i < ref.losses.size(); ++i) CHECK(got.losses[i] == Approx(ref.losses[i]).epsilon(1e-5));
  CHECK(got.flops == Approx(program_flops(plan::compile(s))).epsilon(1e-12));
}

void matches_serial(const std::vector<std::string>& sets, bool compare_grads = true) {
  matches_serial(tiny(sets), sets, compare_grads);
}

// The same for the generic model's GEMM equivalents.
void cnn_matches_serial(const std::vector<std::string>& sets, bool compare_grads = true) {
  matches_serial(cnn(sets), sets, compare_grads);
}

}  // namespace

TEST_CASE("one rank equals the serial model, with and without recompute", "[exec][np1]") {
  matches_serial({});
  matches_serial({"training.recompute=full"});
  matches_serial({"training.recompute=selective"});
  matches_serial({"training.global_batch=2"});  // a single micro-batch
}

TEST_CASE("a mixture of experts: the shard routes and trains as the reference model", "[exec][np1][moe]") {
  // 4 experts of width 48, each token to 2: the router's choice, the experts' GEMMs over
  // their rows and the gates' sums (and every gradient) as Gpt<float>'s.
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "training.recompute=full"});
}

TEST_CASE("the fused (flash) attention trains as the unfused one does", "[exec][np1]") {
  // The serial reference runs the unfused attention; the shard the fused kernel, which keeps
  // no t x t tensor: the same losses, gradients and weights to float rounding.
  matches_serial({"training.attention=flash"});
  matches_serial({"training.attention=flash", "training.recompute=selective"});
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

TEST_CASE("a mixture of experts under context parallelism and ZeRO-3 equals the serial run", "[exec][np2][moe]") {
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.cp=2"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.zero=3"}, false);
}

TEST_CASE("an all-to-all moves each member's block, of any size or none, to that member", "[exec][np2][np4]") {
  Device& dev = device();
  const int n = dev.world(), me = dev.rank();
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = n - 1 - r;  // members in reverse: member i is rank n-1-i
  const Comm comm = dev.comm_create(all, 900);
  const int mine = n - 1 - me;  // this rank's place among the members
  auto size = [](int from, int to) { return static_cast<std::int64_t>((from + 2 * to) % 3); };  // 0, 1 or 2 values
  auto value = [](int from, int to, int i) { return static_cast<float>(1000 * from + 10 * to + i); };
  std::vector<std::int64_t> send_counts, recv_counts;
  std::vector<float> send;
  for (int j = 0; j < n; ++j) {
    send_counts.push_back(size(mine, j));
    recv_counts.push_back(size(j, mine));
    for (int i = 0; i < size(mine, j); ++i) send.push_back(value(mine, j, i));
  }
  std::vector<float> want;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < size(j, mine); ++i) want.push_back(value(j, mine, i));
  }
  Buffer a = dev.allocate_floats(send.size() + 1), b = dev.allocate_floats(want.size() + 1);
  dev.upload(a.f(), send.data(), send.size() * sizeof(float));
  dev.wait(dev.all_to_all(a.f(), send_counts, b.f(), recv_counts, comm));
  std::vector<float> got(want.size());
  dev.download(got.data(), b.f(), got.size() * sizeof(float));
  CHECK(got == want);
}

TEST_CASE("expert parallelism 2: tokens dispatched to their experts' ranks and combined back equal the serial run",
          "[exec][np2][moe]") {
  // Each rank holds 2 of the 4 experts and routes its own tokens: the all-to-alls carry the
  // rows (a varying number per expert, step by step), the router's gradient is summed over
  // dp, each expert's stays with its one holder.
  const std::vector<std::string> ep{"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.ep=2"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), ep.begin(), ep.end());
    return more;
  };
  matches_serial(ep);
  matches_serial(with({"training.recompute=full"}));
  matches_serial(with({"model.top_k=1", "model.experts=8"}));  // 4 experts a rank, some with no rows
  matches_serial(with({"plan.zero=1", "plan.bucket_size=16KiB"}), false);
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.cp=2", "plan.ep=2"});  // ep over cp ranks
}

TEST_CASE("experts split over tp 2: each rank routes its rows, the tp group's rows gathered and their sums scattered",
          "[exec][np2][moe]") {
  // Sequence parallelism (as Megatron-Core requires): each tp rank routes its half of the
  // rows; the experts' first GEMM is split by columns, the second by rows, so the outputs
  // are partial sums, reduce-scattered back to their rows' ranks; the router's gradient is
  // each rank's rows', summed over tp with the norms'.
  const std::vector<std::string> tp{"model.experts=4", "model.expert_ffn_hidden=48", "plan.tp=2",
                                    "plan.sequence_parallel=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tp.begin(), tp.end());
    return more;
  };
  matches_serial(tp);
  matches_serial(with({"training.recompute=full"}));
  matches_serial(with({"model.top_k=1", "model.experts=8"}));
}

TEST_CASE("experts over tp 2 and ep 2 together, and with pp", "[exec][np4][moe]") {
  const std::vector<std::string> tp{"model.experts=4", "model.expert_ffn_hidden=48", "plan.tp=2",
                                    "plan.sequence_parallel=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tp.begin(), tp.end());
    return more;
  };
  matches_serial(with({"plan.dp=2", "plan.ep=2"}));
  matches_serial(with({"plan.dp=2", "plan.ep=2", "training.recompute=full"}));
  matches_serial(with({"plan.dp=2"}));  // every expert on each tp pair, their gradients summed over dp
  matches_serial(with({"plan.pp=2"}));
}

TEST_CASE("expert parallelism with dp 4, pp and ZeRO-1: each expert's gradient summed over its holders",
          "[exec][np4][moe]") {
  const std::vector<std::string> moe{"model.experts=4", "model.expert_ffn_hidden=48"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), moe.begin(), moe.end());
    return more;
  };
  matches_serial(with({"plan.dp=4", "plan.ep=4"}));
  matches_serial(with({"plan.dp=4", "plan.ep=2"}));  // every expert on two ranks: an expert all-reduce
  matches_serial(with({"plan.dp=4", "plan.ep=2", "plan.zero=1", "plan.bucket_size=16KiB"}), false);
  matches_serial(with({"plan.dp=2", "plan.pp=2", "plan.ep=2", "plan.schedule=1f1b"}));
  matches_serial(with({"plan.dp=2", "plan.cp=2", "plan.ep=4", "training.recompute=full"}));
}

TEST_CASE("a mixture of experts over data and pipeline parallelism equals the serial run", "[exec][np4][moe]") {
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.pp=2"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "model.top_k=1", "plan.dp=4", "plan.zero=1"}, false);
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
  const plan::Scenario s = tiny({"plan.dp=2", "plan.pp=2", "model.layers=2", "training.learning_rate=0.003"});
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

namespace {

// The tiny GPT under `plan` trained 30 steps at learning rate 3e-3 with `key` set to
// `reference`, then to `variant`: both runs and their largest difference in loss.
struct Compared {
  Outcome reference, variant;
  double worst = 0.0;
};
Compared train_both(const std::vector<std::string>& plan, const std::string& key, const char* reference,
                    const char* variant) {
  auto with = [&](const char* value) {
    std::vector<std::string> sets = plan;
    sets.insert(sets.end(), {"training.learning_rate=0.003", key + "=" + value});
    return tiny(sets);
  };
  Compared c{parallel(with(reference), 30), parallel(with(variant), 30), 0.0};
  for (std::size_t i = 0; i < c.reference.losses.size(); ++i) {
    c.worst = std::max(c.worst, std::abs(c.variant.losses[i] - c.reference.losses[i]));
  }
  return c;
}

}  // namespace

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
    const plan::Scenario s = tiny({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2",
                                   fmt::format("plan.ep={}", ep), "training.precision=fp8"});
    Device& dev = device();
    const plan::Program prog = plan::compile(s);
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
    std::vector<std::string> sets{plan, "training.precision=fp16", "training.loss_scale=1099511627776",
                                  "training.learning_rate=0.003"};
    if (std::string(plan) == "plan.dp=2") sets.push_back("plan.zero=1");  // each rank checks its share
    const plan::Scenario s = tiny(sets);
    const Outcome first = parallel(s, 1);
    CHECK(first.skipped.front());
    CHECK(max_abs_difference(first.params, serial(s, 0).params) == 0.0);  // untouched
    const Outcome got = parallel(s, 40);
    std::size_t k = 0;
    while (k < got.skipped.size() && got.skipped[k]) ++k;
    const auto later = std::count(got.skipped.begin() + static_cast<std::ptrdiff_t>(k), got.skipped.end(), true);
    INFO(plan << ": the first " << k << " steps skipped, " << later << " later");
    CHECK(k >= 17);
    CHECK(k + static_cast<std::size_t>(later) < 30);  // then mostly steps taken
    // Each skip halves the scale; a taken step keeps it (the window, 1000, is not reached).
    double scale = std::ldexp(1.0, 40);
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
  const plan::Scenario s = cnn({"training.learning_rate=0.01"});
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
  const plan::Scenario s = tiny({});
  CpuDevice small(64 << 10);
  RunOptions o;
  o.steps = 1;
  o.warmup = 0;
  CHECK_THROWS_WITH(execute(s, small, o), Catch::Contains("rank 0: out of device memory allocating") &&
                                              Catch::Contains("of 0.1 MiB"));
  CHECK(small.in_use() == 0);
  CHECK(small.peak() <= std::size_t{64} << 10);
}
