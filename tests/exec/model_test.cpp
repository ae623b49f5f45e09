// The GPT decoder's numerics on the host kernels: every gradient against central finite
// differences of the loss (in double, where the difference quotient is accurate to about
// 1e-8), the kernels against hand-computed values, and training that learns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "exec/model/batch_norm.hpp"
#include "exec/model/generic.hpp"
#include "exec/model/gpt.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/random.hpp"
#include "exec/model/ring_attention.hpp"
#include "model_helpers.hpp"

using namespace parasim::exec;
using parasim::exec::test::central_differences;

TEST_CASE("GEMM and the linear layer against hand-computed products", "[exec][model]") {
  // [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50]; transposes give the products of transposes.
  const std::vector<double> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<double> c(4, 0.0);
  kernels::gemm<double>(false, false, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());
  CHECK(c == std::vector<double>{19, 22, 43, 50});
  kernels::gemm<double>(true, false, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());  // a^T b
  CHECK(c == std::vector<double>{26, 30, 38, 44});
  kernels::gemm<double>(false, true, 2, 2, 2, 1.0, a.data(), b.data(), 1.0, c.data());  // + a b^T
  CHECK(c == std::vector<double>{26 + 17, 30 + 23, 38 + 39, 44 + 53});
  const std::vector<double> bias{1, -1};
  kernels::linear_forward<double>(c.data(), a.data(), b.data(), bias.data(), 2, 2, 2);
  CHECK(c == std::vector<double>{20, 21, 44, 49});
}

TEST_CASE("layer norm, GELU, softmax attention and cross-entropy against hand-computed values", "[exec][model]") {
  // Layer norm of (1, 2, 3): mean 2, variance 2/3.
  const std::vector<double> x{1, 2, 3}, gamma{1, 1, 1}, beta{0, 0, 0};
  std::vector<double> y(3), mean(1), rstd(1);
  kernels::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), 1, 3);
  CHECK(mean[0] == Approx(2.0));
  CHECK(y[2] == Approx(1.0 / std::sqrt(2.0 / 3.0 + 1e-5)));
  // GELU(0) = 0, GELU(1) = 0.841192 (tanh form).
  const std::vector<double> gx{0.0, 1.0};
  std::vector<double> gy(2);
  kernels::gelu_forward(gy.data(), gx.data(), 2);
  CHECK(gy[0] == 0.0);
  CHECK(gy[1] == Approx(0.8411919906).epsilon(1e-9));
  // Attention, one head of width 1, two positions: position 0 sees only itself; position 1
  // weighs v0, v1 by softmax(q1 k0, q1 k1) = softmax(0, 2).
  const std::vector<double> qkv{/*pos0*/ 1, 0, 10, /*pos1*/ 2, 1, 20};
  std::vector<double> out(2), att(4);
  kernels::attention_forward(out.data(), att.data(), qkv.data(), 1, 2, 1, 1);
  CHECK(out[0] == Approx(10.0));
  const double w1 = std::exp(2.0) / (1.0 + std::exp(2.0));
  CHECK(att[3] == Approx(w1));
  CHECK(att[1] == 0.0);  // causal: position 0 never sees position 1
  CHECK(out[1] == Approx((1 - w1) * 10 + w1 * 20));
  // Cross-entropy of uniform logits over 4 classes is log 4.
  const std::vector<double> logits{0, 0, 0, 0};
  const std::vector<std::int32_t> target{2};
  std::vector<double> dl(4);
  CHECK(kernels::cross_entropy(dl.data(), logits.data(), target.data(), 1, 4) == Approx(std::log(4.0)));
  CHECK(dl[2] == Approx(-0.75));
  CHECK(dl[0] == Approx(0.25));
}


TEST_CASE("every GPT gradient equals the central finite difference of the loss", "[exec][model]") {
  const GptConfig cfg{11, 5, 2, 8, 2};
  Gpt<double> model(cfg, 7);
  const test::GradientCheck c = test::check_gradients(model, synthetic_batch(cfg.vocab, 2, 5, 3, 0), 2, 5);
  INFO("parameters " << c.analytic.size() << ", worst relative error where |grad| > 1e-4: " << c.worst);
  CHECK(c.wrong == 0);
  CHECK(c.worst < 1e-6);
}

TEST_CASE("the GPT learns the synthetic sequences: the loss falls over 50 AdamW steps", "[exec][model]") {
  const GptConfig cfg{32, 16, 2, 32, 4};
  Gpt<float> model(cfg, 1);
  const auto [first, last] = test::train_losses(model, 50);
  INFO("loss " << first << " -> " << last);
  CHECK(first == Approx(std::log(32.0F)).epsilon(0.05));  // an untrained model is near uniform
  CHECK(last < 0.5F * first);
}

TEST_CASE("the same seed gives the same model and the same batches", "[exec][model]") {
  const GptConfig cfg{16, 8, 1, 16, 2};
  Gpt<float> a(cfg, 42), b(cfg, 42), c(cfg, 43);
  CHECK(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  CHECK_FALSE(std::equal(a.params().begin(), a.params().end(), c.params().begin()));
  CHECK(synthetic_batch(16, 2, 8, 5, 3).tokens == synthetic_batch(16, 2, 8, 5, 3).tokens);
  CHECK(synthetic_batch(16, 2, 8, 5, 3).tokens != synthetic_batch(16, 2, 8, 5, 4).tokens);
}

TEST_CASE("a parameter's initial value is found alone, equal to the sequential draw", "[exec][model]") {
  // The draw as one sequence: one splitmix stream through the normal-drawn tensors in
  // layout order (wte, wpe, then per layer qkv, projection, fc, fc projection), norms' gains
  // at 1, everything else 0.
  const GptConfig cfg{24, 8, 3, 16, 2};
  const std::uint64_t seed = 1234;
  const auto c = static_cast<std::size_t>(cfg.hidden);
  const GptLayout lay(cfg);
  std::vector<float> want(lay.count, 0.0F);
  std::uint64_t state = seed;
  auto draw = [&](std::size_t at, std::size_t n, double sd) {
    for (std::size_t i = 0; i < n; ++i) want[at + i] = static_cast<float>(sd * parasim::exec::normal(state));
  };
  const double residual = 0.02 / std::sqrt(2.0 * cfg.layers);
  draw(lay.wte, 24 * c, 0.02);
  draw(lay.wpe, 8 * c, 0.02);
  for (const LayerOffsets& ly : lay.layers) {
    std::fill_n(want.begin() + static_cast<std::ptrdiff_t>(ly.ln1w), c, 1.0F);
    draw(ly.qkvw, 3 * c * c, 0.02);
    draw(ly.projw, c * c, residual);
    std::fill_n(want.begin() + static_cast<std::ptrdiff_t>(ly.ln2w), c, 1.0F);
    draw(ly.fcw, 4 * c * c, 0.02);
    draw(ly.fcprojw, 4 * c * c, residual);
  }
  std::fill_n(want.begin() + static_cast<std::ptrdiff_t>(lay.lnfw), c, 1.0F);
  const GptInitialValues initial(cfg, seed);
  Gpt<float> model(cfg, seed);
  REQUIRE(static_cast<std::size_t>(model.param_count()) == want.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    same += static_cast<float>(initial(i)) == want[i] && model.params()[i] == want[i] ? 1 : 0;
  }
  CHECK(same == want.size());
}

TEST_CASE("the fused (flash) attention equals the unfused one, forward and backward", "[exec][model]") {
  // Random q, k, v of 2 sequences of 13 positions, 3 heads of 8, in double: the online
  // softmax and the recomputed probabilities give the unfused kernels' output and gradients
  // to rounding; lse is the log of each row's softmax denominator.
  const int b = 2, t = 13, h = 3, d = 8, c = h * d;
  std::uint64_t state = 99;
  std::vector<double> qkv(static_cast<std::size_t>(b) * t * 3 * c), dout(static_cast<std::size_t>(b) * t * c);
  for (double& v : qkv) v = parasim::exec::normal(state);
  for (double& v : dout) v = parasim::exec::normal(state);
  std::vector<double> out(dout.size()), att(static_cast<std::size_t>(b) * h * t * t), dqkv(qkv.size(), 0.0);
  parasim::exec::kernels::attention_forward(out.data(), att.data(), qkv.data(), b, t, h, d);
  parasim::exec::kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, h, d);
  std::vector<double> fout(out.size()), lse(static_cast<std::size_t>(b) * h * t), fdqkv(qkv.size(), 7.0);
  parasim::exec::kernels::flash_attention_forward(fout.data(), lse.data(), qkv.data(), b, t, h, d);
  parasim::exec::kernels::flash_attention_backward(fdqkv.data(), dout.data(), fout.data(), qkv.data(), lse.data(), b, t,
                                                   h, d);
  double worst = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(fout[i] - out[i]));
  for (std::size_t i = 0; i < qkv.size(); ++i) worst = std::max(worst, std::abs(fdqkv[i] - dqkv[i]));  // 7s overwritten
  CHECK(worst < 1e-12);
  // Row 5 of sequence 1, head 2: lse = log sum_{j <= 5} exp(q.k_j / sqrt(d)).
  double sum = 0.0;
  const double* q = qkv.data() + (1 * t + 5) * 3 * c + 2 * d;
  for (int j = 0; j <= 5; ++j) {
    const double* k = qkv.data() + (1 * t + j) * 3 * c + c + 2 * d;
    double s = 0.0;
    for (int e = 0; e < d; ++e) s += q[e] * k[e];
    sum += std::exp(s / std::sqrt(8.0));
  }
  CHECK(lse[(1 * h + 2) * t + 5] == Approx(std::log(sum)).epsilon(1e-12));
}

TEST_CASE("ring attention over cp ranks equals the whole sequence's attention, forward and backward", "[exec][model]") {
  // 2 sequences of 24 positions, 2 heads of 4, over cp 3: six chunks of 4, rank i holding
  // chunks i and 5 - i. Each rank's queries meet every rank's keys and values block by
  // block (in ring order from its own), and each block's key and value gradients are
  // summed over the ranks: the unfused kernels' output and gradients on the whole
  // sequence, to rounding.
  namespace ring = parasim::exec::ring;
  const int b = 2, t = 24, h = 2, d = 4, c = h * d, cp = 3, tl = t / cp;
  CHECK(ring::positions(t, cp, 1) == std::vector<int>{4, 5, 6, 7, 16, 17, 18, 19});
  std::uint64_t state = 5;
  std::vector<double> qkv(static_cast<std::size_t>(b) * t * 3 * c), dout(static_cast<std::size_t>(b) * t * c);
  for (double& v : qkv) v = parasim::exec::normal(state);
  for (double& v : dout) v = parasim::exec::normal(state);
  std::vector<double> out(dout.size()), att(static_cast<std::size_t>(b) * h * t * t), dqkv(qkv.size(), 0.0);
  parasim::exec::kernels::attention_forward(out.data(), att.data(), qkv.data(), b, t, h, d);
  parasim::exec::kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, h, d);
  // Each rank's rows: its positions of each sequence.
  auto rows_of = [&](const std::vector<double>& whole, int width, int rank) {
    std::vector<double> mine;
    for (int bi = 0; bi < b; ++bi) {
      for (int pos : ring::positions(t, cp, rank)) {
        const double* row = whole.data() + (static_cast<std::size_t>(bi) * t + pos) * width;
        mine.insert(mine.end(), row, row + width);
      }
    }
    return mine;
  };
  const auto rowsz = static_cast<std::size_t>(b) * tl;
  std::vector<std::vector<double>> lqkv, kv, lout, lse, ldq, dkv;
  for (int r = 0; r < cp; ++r) {
    lqkv.push_back(rows_of(qkv, 3 * c, r));
    kv.emplace_back(rowsz * 2 * c);
    ring::kv_pack(kv.back().data(), lqkv.back().data(), static_cast<std::int64_t>(rowsz), c);
    dkv.emplace_back(rowsz * 2 * c, 0.0);
  }
  double worst = 0.0;
  for (int r = 0; r < cp; ++r) {
    std::vector<double> acc(rowsz * c), m(rowsz * h), l(rowsz * h);
    ring::forward_begin(acc.data(), m.data(), l.data(), b, tl, h, d);
    const std::vector<int> mine = ring::positions(t, cp, r);
    for (int step = 0; step < cp; ++step) {
      const int owner = (r - step + cp) % cp;
      ring::forward_block(acc.data(), m.data(), l.data(), lqkv[static_cast<std::size_t>(r)].data(),
                          kv[static_cast<std::size_t>(owner)].data(), mine, ring::positions(t, cp, owner), b, h, d);
    }
    lout.emplace_back(rowsz * c);
    lse.emplace_back(rowsz * h);
    ring::forward_end(lout.back().data(), lse.back().data(), acc.data(), m.data(), l.data(), b, tl, h, d);
    const std::vector<double> want = rows_of(out, c, r);
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(lout.back()[i] - want[i]));
  }
  CHECK(worst < 1e-12);
  for (int r = 0; r < cp; ++r) {
    const std::vector<double> ldout = rows_of(dout, c, r);
    ldq.emplace_back(rowsz * 3 * c, 0.0);
    for (int step = 0; step < cp; ++step) {
      const int owner = (r - step + cp) % cp;
      ring::backward_block(ldq.back().data(), dkv[static_cast<std::size_t>(owner)].data(), ldout.data(),
                           lout[static_cast<std::size_t>(r)].data(), lqkv[static_cast<std::size_t>(r)].data(),
                           kv[static_cast<std::size_t>(owner)].data(), lse[static_cast<std::size_t>(r)].data(),
                           ring::positions(t, cp, r), ring::positions(t, cp, owner), b, h, d);
    }
  }
  worst = 0.0;
  for (int r = 0; r < cp; ++r) {
    std::vector<double>& g = ldq[static_cast<std::size_t>(r)];
    ring::kv_unpack_add(g.data(), dkv[static_cast<std::size_t>(r)].data(), static_cast<std::int64_t>(rowsz), c);
    const std::vector<double> want = rows_of(dqkv, 3 * c, r);
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]));
  }
  CHECK(worst < 1e-12);
}

TEST_CASE("the float GELU (exp-based tanh) against the double reference", "[exec][model]") {
  // The float kernels compute tanh from a polynomial exp so that they vectorize; over the
  // range a network sees, GELU and its gradient stay within a few float roundings of the
  // double reference (std::tanh).
  std::vector<float> xf;
  for (double v = -30.0; v <= 30.0; v += 0.01) xf.push_back(static_cast<float>(v));
  xf.push_back(1e-8F);
  const auto n = static_cast<std::int64_t>(xf.size());
  std::vector<double> xd(xf.begin(), xf.end());
  std::vector<float> yf(xf.size()), gf(xf.size(), 0.0F), dy(xf.size(), 1.0F);
  std::vector<double> yd(xd.size()), gd(xd.size(), 0.0), dyd(xd.size(), 1.0);
  kernels::gelu_forward(yf.data(), xf.data(), n);
  kernels::gelu_forward(yd.data(), xd.data(), n);
  kernels::gelu_backward(gf.data(), xf.data(), dy.data(), n);
  kernels::gelu_backward(gd.data(), xd.data(), dyd.data(), n);
  double worst_y = 0.0, worst_g = 0.0;
  for (std::size_t i = 0; i < xf.size(); ++i) {
    worst_y = std::max(worst_y, std::abs(yf[i] - yd[i]) / (1.0 + std::abs(yd[i])));
    worst_g = std::max(worst_g, std::abs(gf[i] - gd[i]) / (1.0 + std::abs(gd[i])));
  }
  CHECK(worst_y < 1e-6);
  CHECK(worst_g < 1e-6);
  CHECK(yf.front() == 0.0F);  // GELU(-30): tanh is exactly -1 in float
}

// --- generic models' GEMM equivalents -----------------------------------------------------

TEST_CASE("stretch, ReLU and the cyclic bias against hand-computed values", "[exec][model][generic]") {
  // Up: 3 values over 7 (i·3/7 = 0,0,0,1,1,2,2); down: 7 over 3 (i·7/3 = 0,2,4).
  const std::vector<double> x3{1, 2, 3}, x7{1, 2, 3, 4, 5, 6, 7};
  std::vector<double> y7(7), y3(3);
  kernels::resample_forward(y7.data(), 7, x3.data(), 3, false);
  kernels::resample_forward(y3.data(), 3, x7.data(), 7, false);
  CHECK(y7 == std::vector<double>{1, 1, 1, 2, 2, 3, 3});
  CHECK(y3 == std::vector<double>{1, 3, 5});
  // Backward writes each value's gradient: the sum over its stretch.
  std::vector<double> dx3(3, 99.0), dx7(7, 99.0);
  kernels::resample_backward(dx3.data(), 3, x7.data(), 7, static_cast<const double*>(nullptr));
  CHECK(dx3 == std::vector<double>{1 + 2 + 3, 4 + 5, 6 + 7});
  kernels::resample_backward(dx7.data(), 7, x3.data(), 3, static_cast<const double*>(nullptr));
  CHECK(dx7 == std::vector<double>{1, 0, 2, 0, 3, 0, 0});
  // The same length copies.
  std::vector<double> same(7);
  kernels::resample_forward(same.data(), 7, x7.data(), 7, false);
  CHECK(same == x7);

  // Through a ReLU: negative and zero inputs give 0 forward, and no gradient backward.
  const std::vector<double> signed3{-1, 0, 2};
  kernels::resample_forward(y7.data(), 7, signed3.data(), 3, true);
  CHECK(y7 == std::vector<double>{0, 0, 0, 0, 0, 2, 2});
  kernels::resample_backward(dx3.data(), 3, x7.data(), 7, signed3.data());
  CHECK(dx3 == std::vector<double>{0, 0, 6 + 7});

  std::vector<double> y(5, 0.0);
  const std::vector<double> bias{1, 2};
  kernels::add_cyclic(y.data(), 5, bias.data(), 2);
  CHECK(y == std::vector<double>{1, 2, 1, 2, 1});
  std::vector<double> db{0.5, 0.5};
  kernels::cyclic_backward(db.data(), 2, x7.data(), 5);
  CHECK(db == std::vector<double>{0.5 + 1 + 3 + 5, 0.5 + 2 + 4});
}

TEST_CASE("the stretch's backward is its adjoint at any pair of sizes", "[exec][model][generic]") {
  // <stretch(x), y> = <x, stretch^T(y)> for every x, y: checked on sizes that divide,
  // that do not, and far apart.
  for (const auto& [nx, ny] : std::vector<std::pair<int, int>>{{3, 7}, {7, 3}, {12, 12}, {5, 1000}, {1000, 5}, {97, 61}}) {
    std::vector<double> x(static_cast<std::size_t>(nx)), y(static_cast<std::size_t>(ny));
    for (int i = 0; i < nx; ++i) x[static_cast<std::size_t>(i)] = std::sin(1.0 + i);
    for (int i = 0; i < ny; ++i) y[static_cast<std::size_t>(i)] = std::cos(2.0 * i);
    std::vector<double> sx(static_cast<std::size_t>(ny)), ty(static_cast<std::size_t>(nx), 0.0);
    kernels::resample_forward(sx.data(), ny, x.data(), nx, false);
    kernels::resample_backward(ty.data(), nx, y.data(), ny, static_cast<const double*>(nullptr));
    double left = 0.0, right = 0.0;
    for (int i = 0; i < ny; ++i) left += sx[static_cast<std::size_t>(i)] * y[static_cast<std::size_t>(i)];
    for (int i = 0; i < nx; ++i) right += x[static_cast<std::size_t>(i)] * ty[static_cast<std::size_t>(i)];
    INFO(nx << " -> " << ny);
    CHECK(left == Approx(right).epsilon(1e-12));
  }
}

namespace {
// Three layers that stretch up, down and to the classes, with biases, for batch 2.
GenericConfig small_generic() {
  GenericConfig cfg;
  cfg.batch = 2;
  cfg.input_width = 6;
  cfg.layers = {{9, 3, 2, 20}, {4, 5, 1, 8}, {2, 4, 0, 4}};
  return cfg;
}
}  // namespace

TEST_CASE("every GEMM-equivalent gradient equals the central finite difference", "[exec][model][generic]") {
  const GenericConfig cfg = small_generic();
  GenericNet<double> model(cfg, 5);
  const ImageBatch b = synthetic_images(cfg.classes(), cfg.input_width, cfg.batch, 5, 0);
  const std::vector<double> inputs(b.inputs.begin(), b.inputs.end());
  // Biases start at 0; move them off so their gradients meet non-trivial values.
  for (int l = 0; l < 3; ++l) {
    const GenericOffsets& o = model.offsets(l);
    for (std::int64_t j = 0; j < cfg.layers[static_cast<std::size_t>(l)].bias; ++j) {
      model.params()[o.bias + static_cast<std::size_t>(j)] = 0.1 * static_cast<double>(j + 1);
    }
  }
  model.zero_grad();
  model.forward(inputs, b.labels);
  model.backward();
  const std::vector<double> analytic(model.grads().begin(), model.grads().end());
  auto params = model.params();
  CHECK(params.size() == 9 + 2 + 25 + 1 + 16);
  int wrong = 0;
  int nonzero = 0;
  const std::vector<double> numerics = central_differences(params, 1e-6, [&] { return model.forward(inputs, b.labels); });
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double numeric = numerics[i];
    if (std::abs(numeric - analytic[i]) > 1e-8 + 1e-6 * std::abs(numeric)) ++wrong;
    if (std::abs(analytic[i]) > 1e-6) ++nonzero;
  }
  CHECK(wrong == 0);
  CHECK(nonzero > static_cast<int>(params.size()) / 2);  // the check is not vacuous
}

namespace {
// small_generic() with BatchNorm: one BN layer of 2 channels over 15 of the first layer's
// 20 values, two of 3 channels over the second's 8 (shares of 4: runs of 1, 1 and 2).
GenericConfig small_generic_bn() {
  GenericConfig cfg = small_generic();
  cfg.layers[0].bn_layers = 1;
  cfg.layers[0].bn_channels = 2;
  cfg.layers[0].bn_values = 15;
  cfg.layers[1].bn_layers = 2;
  cfg.layers[1].bn_channels = 3;
  cfg.layers[1].bn_values = 8;
  return cfg;
}
}  // namespace

TEST_CASE("BatchNorm's gradients equal the central finite difference, alone and over a group", "[exec][model][generic][bn]") {
  const GenericConfig cfg = small_generic_bn();
  for (int group : {1, 2}) {
    GenericNet<double> model(cfg, 5);
    const ImageBatch b = synthetic_images(cfg.classes(), cfg.input_width, cfg.batch * group, 5, 0);
    const std::vector<double> inputs(b.inputs.begin(), b.inputs.end());
    // Scales and shifts off their start (1, 0) so that their gradients meet other values.
    auto params = model.params();
    for (int l = 0; l < 2; ++l) {
      const GenericOffsets& o = model.offsets(l);
      const GenericShape& s = cfg.layers[static_cast<std::size_t>(l)];
      for (std::int64_t j = 0; j < s.bn_layers * s.bn_channels; ++j) {
        params[o.gamma + static_cast<std::size_t>(j)] = 0.8 + 0.1 * static_cast<double>(j);
        params[o.beta + static_cast<std::size_t>(j)] = 0.05 * static_cast<double>(j) - 0.1;
      }
    }
    CHECK(params.size() == 9 + 2 + 4 + 25 + 1 + 12 + 16);
    model.zero_grad();
    model.forward(inputs, b.labels);
    model.backward();
    const std::vector<double> analytic(model.grads().begin(), model.grads().end());
    const std::vector<double> numerics =
        central_differences(params, 1e-6, [&] { return model.forward(inputs, b.labels); });
    int wrong = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (std::abs(numerics[i] - analytic[i]) > 1e-7 + 1e-5 * std::abs(numerics[i])) ++wrong;
    }
    INFO("group " << group);
    CHECK(wrong == 0);
    // The scales' and shifts' gradients are not vacuous.
    const GenericOffsets& o = model.offsets(1);
    CHECK(std::abs(analytic[o.gamma]) > 1e-6);
    CHECK(std::abs(analytic[o.beta + 2]) > 1e-6);
  }
}

TEST_CASE("BatchNorm's statistics merge exactly and normalise each channel to mean 0, variance 1", "[exec][model][bn]") {
  // Two samples of 7 values, values [1, 6) normalised over 2 channels, each a run as in
  // NCHW: channel 0 holds positions 1 and 2 of each sample, channel 1 positions 3 to 5.
  const std::vector<double> x{9, 1, 2, 3, 4, 5, 9, 9, 6, 8, 10, 12, 14, 9};
  const BnShape whole{2, 7, 1, 5, 2};
  const BnShape first{1, 7, 1, 5, 2};
  std::vector<double> stats(5), halves(10), mi(4), mi_merged(4);
  kernels::bn_stats(stats.data(), x.data(), whole);
  // Channel 0: 1, 2, 6, 8 -> mean 4.25; channel 1: 3, 4, 5, 10, 12, 14 -> mean 8.
  CHECK(stats[0] == Approx(4.25));
  CHECK(stats[1] == Approx(8.0));
  CHECK(stats[2] == Approx(3.25 * 3.25 + 2.25 * 2.25 + 1.75 * 1.75 + 3.75 * 3.75));
  CHECK(stats[3] == Approx(25.0 + 16.0 + 9.0 + 4.0 + 16.0 + 36.0));
  CHECK(stats[4] == 2.0);
  kernels::bn_stats(halves.data(), x.data(), first);
  kernels::bn_stats(halves.data() + 5, x.data() + 7, first);
  kernels::bn_merge(mi.data(), stats.data(), 1, whole);
  kernels::bn_merge(mi_merged.data(), halves.data(), 2, first);
  for (std::size_t i = 0; i < 4; ++i) CHECK(mi_merged[i] == Approx(mi[i]).epsilon(1e-12));
  CHECK(mi[2] == Approx(1.0 / std::sqrt(stats[2] / 4.0 + batch_norm_eps)));
  const std::vector<double> gamma{1, 1}, beta{0, 0};
  std::vector<double> y = x;
  kernels::bn_normalize(y.data(), x.data(), mi.data(), gamma.data(), beta.data(), whole);
  for (int c = 0; c < 2; ++c) {
    double sum = 0.0, sq = 0.0;
    int n = 0;
    for (int s = 0; s < 2; ++s) {
      for (int i = c == 0 ? 1 : 3; i < (c == 0 ? 3 : 6); ++i) {
        sum += y[static_cast<std::size_t>(s * 7 + i)];
        sq += y[static_cast<std::size_t>(s * 7 + i)] * y[static_cast<std::size_t>(s * 7 + i)];
        ++n;
      }
    }
    CHECK(std::abs(sum / n) < 1e-12);
    CHECK(sq / n == Approx(1.0).epsilon(1e-4));  // var / (var + eps)
  }
  CHECK(y[0] == 9.0);  // outside the stretch: untouched
  CHECK(y[6] == 9.0);
}

TEST_CASE("the synthetic images: labelled, learnable, the same for the same seed", "[exec][model][generic]") {
  const ImageBatch a = synthetic_images(10, 16, 64, 3, 1);
  CHECK(a.inputs.size() == 64 * 16);
  CHECK(a.labels.size() == 64);
  CHECK(*std::min_element(a.labels.begin(), a.labels.end()) >= 0);
  CHECK(*std::max_element(a.labels.begin(), a.labels.end()) <= 9);
  CHECK(a.labels == synthetic_images(10, 16, 64, 3, 1).labels);
  CHECK(a.labels != synthetic_images(10, 16, 64, 3, 2).labels);
  // Two samples of one class are closer than two of different classes (the prototypes).
  auto distance = [&](int i, int j) {
    double d = 0.0;
    for (int k = 0; k < 16; ++k) d += std::pow(a.inputs[static_cast<std::size_t>(i * 16 + k)] - a.inputs[static_cast<std::size_t>(j * 16 + k)], 2);
    return d;
  };
  double same = 0.0, other = 0.0;
  int n_same = 0, n_other = 0;
  for (int i = 0; i < 64; ++i) {
    for (int j = i + 1; j < 64; ++j) {
      (a.labels[static_cast<std::size_t>(i)] == a.labels[static_cast<std::size_t>(j)] ? same : other) += distance(i, j);
      ++(a.labels[static_cast<std::size_t>(i)] == a.labels[static_cast<std::size_t>(j)] ? n_same : n_other);
    }
  }
  CHECK(same / n_same < 0.5 * other / n_other);
}
