// Stability on the executor: the global gradient norm and clipping, the learning rate's
// schedule, divergence detection and injected faults, each against the serial model or
// values computed by hand. Run under MPI like parallel_test.cpp.
#include <bit>

#include "exec/execute.hpp"
#include "scenario/load.hpp"
#include "tests/exec/parallel_helpers.hpp"

using namespace parasim;
using namespace parasim::exec;
using namespace parasim::test::parallel;

namespace {

double norm(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

// The overrides `base` and more.
std::vector<std::string> plus(std::vector<std::string> base, std::initializer_list<std::string> more) {
  base.insert(base.end(), more);
  return base;
}

// a + k (b - a), element by element.
std::vector<double> extrapolated(const std::vector<double>& a, const std::vector<double>& b, double k) {
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + k * (b[i] - a[i]);
  return out;
}

}  // namespace

TEST_CASE("clipping and the learning rate's schedule equal the serial model's", "[exec][np1]") {
  // A clip far under the norm: every step clipped; warm-up then a cosine decay: step 0 at
  // lr / 1, step 1 halfway down to min_lr.
  matches_serial({"training.grad_clip=0.001"});
  matches_serial(
      {"training.warmup_steps=1", "training.lr_decay=cosine", "training.decay_steps=3", "training.min_lr=0.0001"});
  matches_serial({"training.lr_scaling=sqrt", "training.lr_reference_batch=16", "training.lr_decay=linear",
                  "training.decay_steps=3"});
  // Clipped, the gradients the update uses have the clip's norm.
  const Outcome clipped = parallel(tiny({"training.grad_clip=0.001"}), 1);
  const Outcome free = parallel(tiny({}), 1);
  REQUIRE(free.norms[0] > 0.01);
  CHECK(clipped.norms[0] == Approx(free.norms[0]).epsilon(1e-6));  // the norm is taken before clipping
  CHECK(norm(clipped.grads) == Approx(0.001 * free.norms[0] / (free.norms[0] + 1e-6)).epsilon(1e-5));
  CHECK(norm(free.grads) == Approx(free.norms[0]).epsilon(1e-5));
}

TEST_CASE("the global gradient norm and clipping over tp x pp x dp shards equal the serial model's", "[exec][np4]") {
  matches_serial({"plan.tp=2", "plan.dp=2", "training.grad_clip=0.001"});
  matches_serial({"plan.pp=2", "plan.dp=2", "plan.zero=1", "training.grad_clip=0.001"}, false);
  matches_serial({"plan.tp=2", "plan.pp=2", "plan.sequence_parallel=true", "training.grad_clip=0.001"});
}

TEST_CASE("a bad worker: one rank's injected gradient, aggregated, is what the hand computes", "[exec][np2]") {
  // dp 2: the aggregated gradient is g0 + g1 (each rank's half of the batch). Zeroing rank
  // 1's gives g0 alone; scaling it by 10 must give g0 + 10 g1 = Z + 10 (G - Z).
  const std::vector<std::string> dp2{"plan.dp=2"};
  auto with = [&](const std::string& inject) { return tiny(plus(dp2, {"run.inject=[" + inject + "]"})); };
  const Outcome g = parallel(tiny(dp2), 1);
  const Outcome z = parallel(with("{step: 1, rank: 1, kind: zero}"), 1);
  const Outcome x10 = parallel(with("{step: 1, rank: 1, kind: scale, factor: 10}"), 1);
  REQUIRE(relative_error(z.grads, g.grads) > 0.1);  // rank 1's half counts
  CHECK(relative_error(x10.grads, extrapolated(z.grads, g.grads, 10.0)) < 1e-5);
  // The mean is dominated by the bad worker: the norm grows about tenfold.
  CHECK(x10.norms[0] > 5.0 * g.norms[0]);
  // Clipping bounds what the update sees (each value keeps its direction); the norm taken
  // before it still shows the fault.
  const Outcome c = parallel(
      tiny(plus(dp2, {"run.inject=[{step: 1, rank: 1, kind: scale, factor: 10}]", "training.grad_clip=0.01"})), 1);
  CHECK(c.norms[0] == Approx(x10.norms[0]).epsilon(1e-6));
  CHECK(norm(c.grads) == Approx(0.01).epsilon(1e-3));
  // Only the step named (steps count from 1): one of step 2 leaves step 1 alone.
  const Outcome later = parallel(with("{step: 2, rank: 1, kind: zero}"), 1);
  CHECK(relative_error(later.grads, g.grads) < 1e-6);
  // Random: noise of the gradients' own scale, different from the gradient.
  const Outcome noisy = parallel(with("{step: 1, rank: 1, kind: random, factor: 1}"), 1);
  CHECK(relative_error(noisy.grads, g.grads) > 0.1);
  CHECK(std::isfinite(noisy.norms[0]));
}

TEST_CASE("a NaN injected into one rank's gradients is caught, named by step and rank, and stops the run",
          "[exec][np2]") {
  const scenario::Scenario s =
      tiny({"plan.dp=2", "run.inject=[{step: 3, rank: 1, kind: nan}]", "run.steps=3", "run.warmup=0"});
  RunOptions o;
  o.steps = 3;
  o.warmup = 0;
  const Measurement m = execute(s, device(), o);
  REQUIRE(m.steps.size() == 3);
  CHECK(m.steps[0].divergence.empty());
  CHECK(m.steps[1].divergence.empty());
  CHECK(std::isnan(m.steps[2].grad_norm));
  CHECK(m.steps[2].largest_rank == 1);
  CHECK_THAT(m.steps[2].divergence, Catch::Contains("step 3: the gradient norm is nan (non-finite on rank 1)"));
  const scenario::Scenario stop =
      tiny({"plan.dp=2", "run.inject=[{step: 2, rank: 1, kind: nan}]", "run.on_divergence=stop"});
  CHECK_THROWS_WITH(execute(stop, device(), o),
                    Catch::Contains("training diverged at step 2: the gradient norm is nan"));
}

TEST_CASE("learning rate 3 diverges: the loss spikes over its median and the step is named", "[exec][np1]") {
  const scenario::Scenario s = tiny({"training.learning_rate=3", "run.on_divergence=stop"});
  RunOptions o;
  o.steps = 30;
  o.warmup = 0;
  try {
    (void)execute(s, device(), o);
    FAIL("a learning rate of 3 trained 30 steps without diverging");
  } catch (const Diverged& e) {
    // The second step's loss is some 60 times the first's.
    CHECK_THAT(e.what(), Catch::StartsWith("training diverged at step 2: the loss") &&
                             Catch::Contains("times the median of the last 1 steps'"));
  }
}

TEST_CASE("without fp32 master weights, updates under half a bf16 step are lost", "[exec][np1]") {
  // AdamW's first updates are about the learning rate per value: at 1e-6, far under half a
  // bf16 step of weights around 0.02 (6e-5), the 16-bit weights stay where they are unless
  // the fp32 master copy accumulates the updates.
  const std::vector<std::string> base{"training.precision=bf16", "training.learning_rate=0.000001"};
  const std::vector<std::string> off = plus(base, {"training.master_weights=false"});
  const Outcome start = parallel(tiny(off), 1);
  const Outcome lost = parallel(tiny(off), 3);
  const Outcome kept = parallel(tiny(base), 3);
  auto moved = [&](const Outcome& o) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < o.params.size(); ++i) n += o.params[i] != start.params[i] ? 1 : 0;
    return static_cast<double>(n) / static_cast<double>(o.params.size());
  };
  CHECK(moved(lost) < 0.1);  // only values near zero, whose steps are finer
  CHECK(moved(kept) > 0.9);
}

TEST_CASE("fp16 without loss scaling keeps a scale of 1 and skips no step", "[exec][np1]") {
  const Outcome o = parallel(tiny({"training.precision=fp16", "training.loss_scaling=none"}), 3);
  for (std::size_t i = 0; i < o.scales.size(); ++i) {
    CHECK(o.scales[i] == 1.0);
    CHECK_FALSE(o.skipped[i]);
  }
  const Outcome scaled = parallel(tiny({"training.precision=fp16"}), 3);
  CHECK(scaled.scales[0] == 65536.0);
}

TEST_CASE("seed scenarios: diverge-lr stops at its spike, bad-worker's fault dominates the norm and is clipped",
          "[exec][np2]") {
  RunOptions o;
  o.warmup = 0;
  o.steps = 10;
  const scenario::Scenario lr = scenario::load(PARASIM_SOURCE_DIR "/scenarios/diverge-lr.yaml");
  CHECK_THROWS_WITH(execute(lr, device(), o), Catch::StartsWith("training diverged at step 2: the loss"));
  const scenario::Scenario bad = scenario::load(PARASIM_SOURCE_DIR "/scenarios/bad-worker.yaml");
  o.steps = bad.run.steps;
  const Measurement m = execute(bad, device(), o);
  REQUIRE(m.steps.size() == 6);
  const double around = std::max(m.steps[1].grad_norm, m.steps[3].grad_norm);
  CHECK(m.steps[2].grad_norm > 4.0 * around);  // step 3, counted from 1
  CHECK(m.steps[2].largest_rank == 1);
  // Named against its peer: its norm 10x rank 0's (the injected factor), the other steps'
  // ranks within a small factor of each other.
  CHECK(m.steps[2].largest_ratio > 5.0);
  for (std::size_t i : {0U, 1U, 3U, 4U, 5U}) CHECK(m.steps[i].largest_ratio < 5.0);
  CHECK(m.steps[2].clip == Approx(1.0 / (m.steps[2].grad_norm + 1e-6)));
  for (const StepRecord& r : m.steps) CHECK(r.divergence.empty());
}

TEST_CASE("16-bit main gradients: accumulated and reduced in bf16, close to the fp32 ones", "[exec][np2]") {
  // dp 2, two micro-batches a rank: each layer's gradient is rounded to bf16 after each
  // micro-batch's backward and after the all-reduce, as Megatron keeps bf16 main gradients.
  const std::vector<std::string> base{"plan.dp=2", "training.precision=bf16"};
  const Outcome wide = parallel(tiny(base), 1);
  const Outcome bf16 = parallel(tiny(plus(base, {"training.grad_dtype=bf16"})), 1);
  auto is_bf16 = [](double v) {
    const auto f = static_cast<float>(v);
    return static_cast<double>(f) == v && (std::bit_cast<std::uint32_t>(f) & 0xFFFFU) == 0;
  };
  const auto narrow_count = std::count_if(bf16.grads.begin(), bf16.grads.end(), is_bf16);
  const auto wide_count = std::count_if(wide.grads.begin(), wide.grads.end(), is_bf16);
  CHECK(narrow_count == static_cast<std::ptrdiff_t>(bf16.grads.size()));
  CHECK(wide_count < static_cast<std::ptrdiff_t>(wide.grads.size() / 10));
  const double err = relative_error(bf16.grads, wide.grads);
  CHECK(err > 1e-4);  // rounding shows
  CHECK(err < 1e-2);  // bf16's 8 bits: well under a percent
}
