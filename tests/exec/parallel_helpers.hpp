// The serial reference and the parallel run of the executor's MPI tests, and their
// comparison (tests/exec/parallel_test.cpp says what they check). Inline, so that every
// test file of exec_mpi_tests shares the one CPU device (one MPI job).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "exec/cpu/cpu_device.hpp"
#include "exec/execute.hpp"
#include "exec/generic_shard.hpp"
#include "exec/model/generic.hpp"
#include "exec/model/gpt.hpp"
#include "exec/model/kernels.hpp"
#include "exec/runner.hpp"
#include "exec/shard.hpp"
#include "scenario/load.hpp"

namespace parasim::test::parallel {

using namespace parasim;
using namespace parasim::exec;

inline CpuDevice& device() {
  static CpuDevice dev;
  return dev;
}

inline scenario::Scenario tiny(std::vector<std::string> sets) {
  const std::string text = R"(cluster: {preset: cpu-host, gpus_per_node: 4}
model: {layers: 4, hidden: 32, heads: 4, vocab: 64, seq_len: 16}
training: {global_batch: 8, micro_batch: 2, precision: fp32}
plan: {dp: 1}
run: {seed: 7}
)";
  return scenario::load_text(text, "parallel.yaml", sets);
}

// A small generic (CNN-like) model: four GEMM-equivalent layers with biases, stretches up
// and down, and ten classes.
inline scenario::Scenario cnn(std::vector<std::string> sets) {
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
  return scenario::load_text(text, "cnn.yaml", sets);
}

// The same with BatchNorm: one BN layer of 4 channels in c1, two of 3 channels over 151
// values in c2 (shares of 75 and 76: a channel with one value more), one of 8 channels
// over all of fc1's 40 values (BatchNorm1d), none in fc2. Each BN layer's scales and
// shifts are in its layer's params.
inline scenario::Scenario cnn_bn(std::vector<std::string> sets) {
  const std::string text = R"(cluster: {preset: cpu-host, gpus_per_node: 4}
model:
  name: tiny-cnn-bn
  kind: generic
  layers:
    - {name: c1, params: 158, forward_flops: 60000, activations: 300, batch_norm: {channels: 4, values: 200}}
    - {name: c2, params: 612, forward_flops: 40000, activations: 200, batch_norm: {layers: 2, channels: 3, values: 151}}
    - {name: fc1, params: 2016, forward_flops: 4000, activations: 40, batch_norm: {channels: 8}}
    - {name: fc2, params: 410, forward_flops: 800, activations: 10}
training: {global_batch: 8, micro_batch: 2, precision: fp32}
plan: {dp: 1}
run: {seed: 7}
)";
  return scenario::load_text(text, "cnn-bn.yaml", sets);
}

struct Outcome {
  std::vector<double> grads;   // full layout, after the last step (clipped, before its update)
  std::vector<double> params;  // full layout, after the last update
  std::vector<double> losses;  // per step
  double flops = 0.0;          // performed in the last step, all ranks
  std::vector<bool> skipped;   // per step: fp16 skipped the optimizer step
  std::vector<double> scales;  // per step: the loss scale after it
  std::vector<double> norms;   // per step: the global gradient norm (before clipping)
};

// Steps of a serial reference `model` (Gpt<float> or GenericNet<float>): `count` parts of
// the global batch in turn (`micro_batch(i, step)` runs forward and backward of the i-th
// and returns its mean loss), gradients averaged, then AdamW with the executor's settings.
template <class Model, class MicroBatch>
Outcome train_serial(const scenario::Scenario& s, int steps, Model& model, MicroBatch&& micro_batch, int count) {
  const auto n = static_cast<std::size_t>(model.param_count());
  std::vector<float> am(n, 0.0F), av(n, 0.0F);
  Outcome out;
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    double loss = 0.0;
    for (int i = 0; i < count; ++i) loss += micro_batch(i, step);
    for (float& g : model.grads()) g /= static_cast<float>(count);
    out.losses.push_back(loss / count);
    // The gradient norm, clipping (Megatron's) and the learning rate's schedule; the
    // gradients kept are those the update uses, as the shards' (clipped in place).
    double norm2 = 0.0;
    for (float g : model.grads()) norm2 += static_cast<double>(g) * g;
    const double norm = std::sqrt(norm2);
    out.norms.push_back(norm);
    if (s.training.grad_clip > 0.0 && s.training.grad_clip / (norm + 1e-6) < 1.0) {
      const auto clip = static_cast<float>(s.training.grad_clip / (norm + 1e-6));
      for (float& g : model.grads()) g *= clip;
    }
    out.grads.assign(model.grads().begin(), model.grads().end());
    kernels::adamw(model.params().data(), model.grads().data(), am.data(), av.data(), static_cast<std::int64_t>(n),
                   kernels::AdamW{scenario::learning_rate_at(s.training, step), 0.9, 0.95, 1e-8, 0.0}, step + 1);
  }
  out.params.assign(model.params().begin(), model.params().end());
  return out;
}

inline Outcome serial(const scenario::Scenario& s, int steps) {
  const int b = s.training.micro_batch;
  if (s.model.kind == scenario::ModelKind::generic) {
    const GenericConfig cfg = generic_config(s);
    GenericNet<float> model(cfg, s.run.seed);
    ImageBatch batch;
    // Under SyncBN part i is micro-batch i of every dp replica (replica d trains on the
    // global batch's micro-batches d·m to d·m + m - 1), their BatchNorms sharing statistics;
    // else one micro-batch.
    const int group = s.syncs_batch_norm() ? s.plan.dp : 1;
    const int parts = s.training.global_batch / (b * group);
    return train_serial(
        s, steps, model,
        [&](int i, int step) {
          if (i == 0) batch = synthetic_images(cfg.classes(), cfg.input_width, s.training.global_batch, s.run.seed, step);
          const auto width = static_cast<std::size_t>(cfg.input_width);
          std::vector<float> inputs;
          std::vector<std::int32_t> labels;
          for (int d = 0; d < group; ++d) {
            const auto at = static_cast<std::size_t>((d * parts + i) * b);
            inputs.insert(inputs.end(), batch.inputs.begin() + static_cast<std::ptrdiff_t>(at * width),
                          batch.inputs.begin() + static_cast<std::ptrdiff_t>((at + b) * width));
            labels.insert(labels.end(), batch.labels.begin() + static_cast<std::ptrdiff_t>(at),
                          batch.labels.begin() + static_cast<std::ptrdiff_t>(at + b));
          }
          const float loss = model.forward(inputs, labels);
          model.backward();
          return static_cast<double>(loss);
        },
        parts);
  }
  const scenario::ModelSpec& m = s.model;
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
    const float loss = model.forward(std::span(batch.tokens).subspan(at, len),
                                     std::span(batch.targets).subspan(at, len), b, m.seq_len);
    model.backward();
    return static_cast<double>(loss);
  }, s.training.global_batch / b);
}

inline Outcome parallel(const scenario::Scenario& s, int steps) {
  Device& dev = device();
  const program::Program prog = program::compile(s);
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
    out.norms.push_back(shard.grad_norm());
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

inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

inline double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

inline double program_flops(const program::Program& p) {
  double f = 0.0;
  for (const program::Op& o : p.ops) f += o.flops;
  return f;
}

// One plan against the serial model over two steps: gradients of the second step (under
// ZeRO-1 each rank's reduce-scatter leaves only its share summed, so only the updated
// weights are compared), weights after two updates, losses, and FLOPs against the Program.
inline void matches_serial(const scenario::Scenario& s, const std::vector<std::string>& sets, bool compare_grads) {
  REQUIRE(s.plan.world() == device().world());
  const Outcome ref = serial(s, 2);
  const Outcome got = parallel(s, 2);
  INFO("plan: " << fmt::format("{}", fmt::join(sets, " ")));
  if (compare_grads) {
    REQUIRE(got.grads.size() == ref.grads.size());
    CHECK(relative_error(got.grads, ref.grads) < 1e-5);
  }
  CHECK(max_abs_difference(got.params, ref.params) < 1e-5);           // 1 % of one update (lr 1e-3)
  CHECK(max_abs_difference(got.params, serial(s, 1).params) > 1e-4);  // the second update is seen
  for (std::size_t i = 0; i < ref.losses.size(); ++i) CHECK(got.losses[i] == Approx(ref.losses[i]).epsilon(1e-5));
  // The global gradient norm over every shard, each value once: the serial model's.
  for (std::size_t i = 0; i < ref.norms.size(); ++i) CHECK(got.norms[i] == Approx(ref.norms[i]).epsilon(1e-5));
  CHECK(got.flops == Approx(program_flops(program::compile(s))).epsilon(1e-12));
}

inline void matches_serial(const std::vector<std::string>& sets, bool compare_grads = true) {
  matches_serial(tiny(sets), sets, compare_grads);
}

// The same for the generic model's GEMM equivalents, and with BatchNorm.
inline void cnn_matches_serial(const std::vector<std::string>& sets, bool compare_grads = true) {
  matches_serial(cnn(sets), sets, compare_grads);
}
inline void cnn_bn_matches_serial(const std::vector<std::string>& sets, bool compare_grads = true) {
  matches_serial(cnn_bn(sets), sets, compare_grads);
}

// The tiny GPT under `plan` trained 30 steps at learning rate 3e-3 with `key` set to
// `reference`, then to `variant`: both runs and their largest difference in loss.
struct Compared {
  Outcome reference, variant;
  double worst = 0.0;
};
inline Compared train_both(const std::vector<std::string>& plan, const std::string& key, const char* reference,
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

}  // namespace parasim::test::parallel
