// The host mixture-of-experts MLP (exec/model/moe.hpp) in the GPT decoder: routing against
// hand-computed cases, every gradient against central finite differences, and one expert
// chosen by every token equal to the dense MLP with the same weights.
#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "exec/model/gpt.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/moe.hpp"
#include "model_helpers.hpp"

using namespace parasim::exec;

TEST_CASE("top-k routing: the largest logits, ties to the lower expert, gates their softmax", "[exec][model][moe]") {
  // Row 0: logits 1 3 2 3, top 2: experts 1 and 3 (tied, the lower first), gates 1/2 each.
  // Row 1: 0, ln 3, -5, -5: experts 1 then 0, gates 3/4 and 1/4.
  const std::vector<double> z{1, 3, 2, 3, 0, std::log(3.0), -5, -5};
  std::vector<int> e(4);
  std::vector<double> g(4);
  moe::route(e.data(), g.data(), z.data(), 2, 4, 2);
  CHECK(e == std::vector<int>{1, 3, 1, 0});
  CHECK(g[0] == Approx(0.5));
  CHECK(g[1] == Approx(0.5));
  CHECK(g[2] == Approx(0.75));
  CHECK(g[3] == Approx(0.25));
  // The gates' softmax backward: dz_j = g_j (dg_j - sum g dg), zero on the experts not chosen.
  const std::vector<double> dg{1, 0, 2, 4};
  std::vector<double> dz(8);
  moe::route_backward(dz.data(), e.data(), g.data(), dg.data(), 2, 4, 2);
  const std::vector<double> want{0, 0.25, 0, -0.25, 0.25 * (4 - 2.5), 0.75 * (2 - 2.5), 0, 0};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(dz[i] == Approx(want[i]).margin(1e-15));
}

TEST_CASE("every gradient of a mixture-of-experts GPT equals the central finite difference", "[exec][model][moe]") {
  GptConfig cfg{11, 5, 2, 8, 2};
  cfg.experts = 4;
  cfg.top_k = 2;
  cfg.expert_ffn = 12;
  Gpt<double> model(cfg, 7);
  const test::GradientCheck c = test::check_gradients(model, synthetic_batch(cfg.vocab, 2, 5, 3, 0), 2, 5);
  // The routers' gradients are nonzero, so the gates' path is checked too.
  double router = 0.0;
  for (int l = 0; l < cfg.layers; ++l) {
    const std::size_t r = model.layer_offsets(l).router;
    for (std::size_t i = 0; i < 8 * 4; ++i) router = std::max(router, std::abs(c.analytic[r + i]));
  }
  INFO("parameters " << c.analytic.size() << ", worst relative error where |grad| > 1e-4: " << c.worst);
  CHECK(c.wrong == 0);
  CHECK(c.worst < 1e-6);
  CHECK(router > 1e-4);
}

TEST_CASE("one expert for every token is the dense MLP with its weights", "[exec][model][moe]") {
  // experts 1, top 1 of width 4h: the gate is 1, the output the expert's MLP. The same
  // tensors copied into the dense layout give the same loss and gradients; the router's
  // gradient is 0 (a softmax over one logit).
  const GptConfig dense_cfg{13, 6, 2, 8, 2};
  GptConfig moe_cfg = dense_cfg;
  moe_cfg.experts = 1;
  moe_cfg.top_k = 1;
  moe_cfg.expert_ffn = 32;
  Gpt<double> dense(dense_cfg, 5);
  Gpt<double> mixed(moe_cfg, 5);
  REQUIRE(mixed.param_count() == dense.param_count() + 2 * 8);  // a router [8 x 1] per layer
  // Every dense parameter's place in the mixture's layout: the same, shifted past the
  // routers before it.
  auto at = [&](std::size_t i) {
    std::size_t shift = 0;
    for (int l = 0; l < 2; ++l) shift += i >= dense.layer_offsets(l).fcw ? 8 : 0;
    return i + shift;
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(dense.param_count()); ++i)
    mixed.params()[at(i)] = dense.params()[i];
  const Batch batch = synthetic_batch(13, 3, 6, 9, 0);
  dense.zero_grad();
  mixed.zero_grad();
  CHECK(mixed.forward(batch.tokens, batch.targets, 3, 6) ==
        Approx(dense.forward(batch.tokens, batch.targets, 3, 6)).epsilon(1e-12));
  dense.backward();
  mixed.backward();
  double worst = 0.0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(dense.param_count()); ++i) {
    worst = std::max(worst, std::abs(mixed.grads()[at(i)] - dense.grads()[i]));
  }
  CHECK(worst < 1e-12);
  for (int l = 0; l < 2; ++l) {
    for (std::size_t i = 0; i < 8; ++i) CHECK(mixed.grads()[mixed.layer_offsets(l).router + i] == 0.0);
  }
}

TEST_CASE("a mixture-of-experts GPT learns the synthetic sequences", "[exec][model][moe]") {
  GptConfig cfg{32, 16, 2, 32, 4};
  cfg.experts = 4;
  cfg.top_k = 2;
  cfg.expert_ffn = 64;
  Gpt<float> model(cfg, 1);
  const auto [first, last] = test::train_losses(model, 50);
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.5F * first);
}

TEST_CASE("the token permutation into expert rows and back, by hand", "[exec][model][moe]") {
  // 2 tokens of 2 values, 2 copies each; copies 0..3 go to rows 2, 0, 3, 1.
  const std::vector<double> x{1, 2, 3, 4};
  const std::vector<double> pos{2, 0, 3, 1};
  const std::vector<double> gate{0.5, 0.25, 2, 1};
  std::vector<double> rows(8, -1.0);
  kernels::moe_permute(rows.data(), x.data(), pos.data(), gate.data(), 2, 2, 2);
  CHECK(rows == std::vector<double>{0.25, 0.5, 3, 4, 0.5, 1, 6, 8});
  // Back: token 0 = 0.5 x row 2 + 0.25 x row 0; token 1 = 2 x row 3 + 1 x row 1, added to y.
  std::vector<double> y{10, 10, 10, 10};
  kernels::moe_unpermute(y.data(), rows.data(), pos.data(), gate.data(), 2, 2, 2, true);
  CHECK(y == std::vector<double>{10 + 0.25 + 0.0625, 10 + 0.5 + 0.125, 10 + 12 + 3, 10 + 16 + 4});
  kernels::moe_unpermute<double>(y.data(), rows.data(), pos.data(), nullptr, 2, 2, 2, false);
  CHECK(y == std::vector<double>{0.75, 1.5, 9, 12});
}
