// What the host models' tests share: central finite differences of a loss, and a short
// training run on the synthetic sequences.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "exec/model/gpt.hpp"
#include "exec/model/kernels.hpp"

namespace parasim::exec::test {

// (loss(p_i + h) - loss(p_i - h)) / 2h for every parameter p_i, each put back after.
template <class Loss>
std::vector<double> central_differences(std::span<double> params, double h, Loss&& loss) {
  std::vector<double> numeric(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const double up = loss();
    params[i] = keep - h;
    const double down = loss();
    params[i] = keep;
    numeric[i] = (up - down) / (2 * h);
  }
  return numeric;
}

// A Gpt<double>'s gradients on one batch of b sequences of t tokens against central
// differences (h 1e-5): how many are off by more than 1e-5 relative or 1e-8 absolute (for
// gradients so small that the quotient's rounding, about 1e-16 / h, dominates; a wrong
// gradient is off by its own size), and the worst relative error where |grad| > 1e-4.
struct GradientCheck {
  std::vector<double> analytic;
  int wrong = 0;
  double worst = 0.0;
};
inline GradientCheck check_gradients(Gpt<double>& model, const Batch& batch, int b, int t) {
  model.zero_grad();
  model.forward(batch.tokens, batch.targets, b, t);
  model.backward();
  GradientCheck out;
  out.analytic.assign(model.grads().begin(), model.grads().end());
  const std::vector<double> numerics =
      central_differences(model.params(), 1e-5, [&] { return model.forward(batch.tokens, batch.targets, b, t); });
  for (std::size_t i = 0; i < numerics.size(); ++i) {
    const double diff = std::abs(numerics[i] - out.analytic[i]);
    if (diff > 1e-8 + 1e-5 * std::abs(numerics[i])) ++out.wrong;
    if (std::abs(numerics[i]) > 1e-4) out.worst = std::max(out.worst, diff / std::abs(numerics[i]));
  }
  return out;
}

// The first and last losses of `steps` AdamW steps (lr 3e-3) of `model` on batches of 4
// synthetic sequences of 16 tokens.
inline std::pair<float, float> train_losses(Gpt<float>& model, int steps) {
  std::vector<float> m(model.params().size(), 0.0F), v(model.params().size(), 0.0F);
  kernels::AdamW opt;
  opt.lr = 3e-3;
  float first = 0.0F, last = 0.0F;
  for (int step = 1; step <= steps; ++step) {
    const Batch batch = synthetic_batch(model.config().vocab, 4, 16, 11, step);
    model.zero_grad();
    const float loss = model.forward(batch.tokens, batch.targets, 4, 16);
    model.backward();
    kernels::adamw(model.params().data(), model.grads().data(), m.data(), v.data(), model.param_count(), opt, step);
    if (step == 1) first = loss;
    last = loss;
  }
  return {first, last};
}

}  // namespace parasim::exec::test
