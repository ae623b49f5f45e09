#include "exec/model/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "exec/model/kernels.hpp"
#include "exec/model/random.hpp"

namespace parasim::exec {
namespace k = kernels;

LayerOffsets lay_out_layer(std::size_t& at, std::size_t hidden, std::size_t cl, std::size_t fl, std::size_t experts,
                           std::size_t held, std::size_t* expert_at) {
  auto take = [&](std::size_t n) {
    const std::size_t o = at;
    at += n;
    return o;
  };
  LayerOffsets ly{};
  ly.ln1w = take(hidden);
  ly.ln1b = take(hidden);
  ly.qkvw = take(hidden * 3 * cl);
  ly.qkvb = take(3 * cl);
  ly.projw = take(cl * hidden);
  ly.projb = take(hidden);
  ly.ln2w = take(hidden);
  ly.ln2b = take(hidden);
  if (experts > 0) ly.router = take(hidden * experts);
  std::size_t& next = expert_at != nullptr ? *expert_at : at;
  const std::size_t first = next;
  std::swap(at, next);  // the experts' tensors taken where they live
  ly.fcw = take(hidden * fl);
  ly.fcb = take(fl);
  ly.fcprojw = take(fl * hidden);
  ly.fcprojb = take(hidden);
  if (experts > 0) {
    ly.expert_stride = at - first;
    at += ((held > 0 ? held : experts) - 1) * ly.expert_stride;
  }
  std::swap(at, next);
  return ly;
}

GptLayout::GptLayout(const GptConfig& config) {
  const auto c = static_cast<std::size_t>(config.hidden);
  std::size_t at = 0;
  auto take = [&](std::size_t n) {
    const std::size_t o = at;
    at += n;
    return o;
  };
  wte = take(static_cast<std::size_t>(config.vocab) * c);
  wpe = take(static_cast<std::size_t>(config.seq_len) * c);
  const std::size_t f = config.experts > 0 ? static_cast<std::size_t>(config.expert_ffn) : 4 * c;
  for (int l = 0; l < config.layers; ++l) layers.push_back(lay_out_layer(at, c, c, f, static_cast<std::size_t>(config.experts)));
  lnfw = take(c);
  lnfb = take(c);
  count = at;
}

GptInitialValues::GptInitialValues(const GptConfig& config, std::uint64_t seed) : seed_(seed) {
  const GptLayout lay(config);
  const auto c = static_cast<std::size_t>(config.hidden);
  std::size_t draws = 0;
  auto normal_range = [&](std::size_t offset, std::size_t n, double stddev) {
    ranges_.push_back({offset, offset + n, draws, stddev});
    draws += n;
  };
  auto ones = [&](std::size_t offset) { ranges_.push_back({offset, offset + c, 0, 0.0}); };
  const double residual = 0.02 / std::sqrt(2.0 * config.layers);
  normal_range(lay.wte, static_cast<std::size_t>(config.vocab) * c, 0.02);
  normal_range(lay.wpe, static_cast<std::size_t>(config.seq_len) * c, 0.02);
  const std::size_t f = config.experts > 0 ? static_cast<std::size_t>(config.expert_ffn) : 4 * c;
  for (const LayerOffsets& ly : lay.layers) {
    ones(ly.ln1w);
    normal_range(ly.qkvw, c * 3 * c, 0.02);
    normal_range(ly.projw, c * c, residual);
    ones(ly.ln2w);
    if (config.experts > 0) normal_range(ly.router, c * static_cast<std::size_t>(config.experts), 0.02);
    for (std::size_t e = 0; e < std::max<std::size_t>(1, static_cast<std::size_t>(config.experts)); ++e) {
      normal_range(ly.fcw + e * ly.expert_stride, c * f, 0.02);
      normal_range(ly.fcprojw + e * ly.expert_stride, f * c, residual);
    }
  }
  ones(lay.lnfw);
}

double GptInitialValues::operator()(std::size_t i) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), i, [](std::size_t v, const Range& r) { return v < r.begin; });
  if (it == ranges_.begin()) return 0.0;
  --it;
  if (i >= it->end) return 0.0;
  if (it->stddev == 0.0) return 1.0;
  // Draw k starts after 2k splitmix steps (splitmix adds a constant to its state).
  std::uint64_t state = seed_ + 2 * (it->first + (i - it->begin)) * 0x9e3779b97f4a7c15ULL;
  return it->stddev * normal(state);
}

template <class T>
Gpt<T>::Gpt(const GptConfig& config, std::uint64_t seed) : cfg_(config) {
  if (cfg_.hidden % cfg_.heads != 0) throw std::invalid_argument("GPT: hidden must be a multiple of heads");
  if (cfg_.experts > 0 && (cfg_.top_k < 1 || cfg_.top_k > cfg_.experts || cfg_.expert_ffn < 1)) {
    throw std::invalid_argument("GPT: a mixture of experts needs 1 <= top_k <= experts and an expert width");
  }
  const GptLayout lay(cfg_);
  wte_ = lay.wte;
  wpe_ = lay.wpe;
  layers_ = lay.layers;
  lnfw_ = lay.lnfw;
  lnfb_ = lay.lnfb;
  params_.assign(lay.count, T(0));
  grads_.assign(lay.count, T(0));
  const GptInitialValues initial(cfg_, seed);
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i] = static_cast<T>(initial(i));
}

template <class T>
std::vector<moe::Expert<T>> Gpt<T>::experts_of(const Layer& ly) const {
  std::vector<moe::Expert<T>> out;
  const T* p = params_.data();
  for (std::size_t e = 0; e < static_cast<std::size_t>(cfg_.experts); ++e) {
    const std::size_t at = e * ly.expert_stride;
    out.push_back({p + ly.fcw + at, p + ly.fcb + at, p + ly.fcprojw + at, p + ly.fcprojb + at});
  }
  return out;
}

template <class T>
std::vector<moe::ExpertGrads<T>> Gpt<T>::expert_grads_of(const Layer& ly) {
  std::vector<moe::ExpertGrads<T>> out;
  T* g = grads_.data();
  for (std::size_t e = 0; e < static_cast<std::size_t>(cfg_.experts); ++e) {
    const std::size_t at = e * ly.expert_stride;
    out.push_back({g + ly.fcw + at, g + ly.fcb + at, g + ly.fcprojw + at, g + ly.fcprojb + at});
  }
  return out;
}

template <class T>
void Gpt<T>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
T Gpt<T>::forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets, int b, int t) {
  if (t > cfg_.seq_len) throw std::invalid_argument("GPT: sequence longer than the position table");
  const auto n = static_cast<std::size_t>(b) * t;
  if (tokens.size() != n || targets.size() != n) throw std::invalid_argument("GPT: tokens and targets must be b x t");
  for (std::int32_t tok : tokens) {
    if (tok < 0 || tok >= cfg_.vocab) throw std::out_of_range("GPT: token outside the vocabulary");
  }
  const int c = cfg_.hidden;
  const int h = cfg_.heads;
  const int rows = static_cast<int>(n);
  const auto nc = n * static_cast<std::size_t>(c);
  b_ = b;
  t_ = t;
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  acts_.resize(layers_.size());
  const T* p = params_.data();

  std::vector<T> x(nc);
  std::vector<T> tmp(nc);  // a projection's output before the residual add
  k::embedding_forward(x.data(), tokens_.data(), p + wte_, p + wpe_, b, t, c);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& ly = layers_[l];
    LayerActs& a = acts_[l];
    a.x = x;
    a.ln1.resize(nc);
    a.mean1.resize(n);
    a.rstd1.resize(n);
    a.qkv.resize(3 * nc);
    a.att.resize(static_cast<std::size_t>(b) * h * t * t);
    a.atty.resize(nc);
    a.x1.resize(nc);
    a.ln2.resize(nc);
    a.mean2.resize(n);
    a.rstd2.resize(n);
    if (cfg_.experts == 0) {
      a.fch.resize(4 * nc);
      a.fcg.resize(4 * nc);
    }
    k::layer_norm_forward(a.ln1.data(), a.mean1.data(), a.rstd1.data(), a.x.data(), p + ly.ln1w, p + ly.ln1b, rows, c);
    k::linear_forward(a.qkv.data(), a.ln1.data(), p + ly.qkvw, p + ly.qkvb, rows, c, 3 * c);
    k::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), b, t, h, c / h);
    k::linear_forward(tmp.data(), a.atty.data(), p + ly.projw, p + ly.projb, rows, c, c);
    for (std::size_t i = 0; i < nc; ++i) a.x1[i] = a.x[i] + tmp[i];
    k::layer_norm_forward(a.ln2.data(), a.mean2.data(), a.rstd2.data(), a.x1.data(), p + ly.ln2w, p + ly.ln2b, rows, c);
    if (cfg_.experts > 0) {
      moe::forward(tmp.data(), a.moe, a.ln2.data(), p + ly.router, experts_of(ly), rows, c, cfg_.expert_ffn, cfg_.top_k);
    } else {
      k::linear_forward(a.fch.data(), a.ln2.data(), p + ly.fcw, p + ly.fcb, rows, c, 4 * c);
      k::gelu_forward(a.fcg.data(), a.fch.data(), static_cast<std::int64_t>(4 * nc));
      k::linear_forward(tmp.data(), a.fcg.data(), p + ly.fcprojw, p + ly.fcprojb, rows, 4 * c, c);
    }
    for (std::size_t i = 0; i < nc; ++i) x[i] = a.x1[i] + tmp[i];
  }
  out_ = x;
  lnf_.resize(nc);
  meanf_.resize(n);
  rstdf_.resize(n);
  k::layer_norm_forward(lnf_.data(), meanf_.data(), rstdf_.data(), out_.data(), p + lnfw_, p + lnfb_, rows, c);
  logits_.resize(n * static_cast<std::size_t>(cfg_.vocab));
  dlogits_.resize(logits_.size());
  k::gemm<T>(false, true, rows, cfg_.vocab, c, T(1), lnf_.data(), p + wte_, T(0), logits_.data());
  return k::cross_entropy(dlogits_.data(), logits_.data(), targets_.data(), rows, cfg_.vocab);
}

template <class T>
void Gpt<T>::backward() {
  if (acts_.empty()) throw std::logic_error("GPT: backward() before forward()");
  const int c = cfg_.hidden;
  const int h = cfg_.heads;
  const auto n = static_cast<std::size_t>(b_) * t_;
  const int rows = static_cast<int>(n);
  const auto nc = n * static_cast<std::size_t>(c);
  const T* p = params_.data();
  T* g = grads_.data();

  // LM head (tied): logits = lnf wte^T.
  std::vector<T> dlnf(nc, T(0));
  k::gemm<T>(false, false, rows, c, cfg_.vocab, T(1), dlogits_.data(), p + wte_, T(0), dlnf.data());
  k::gemm<T>(true, false, cfg_.vocab, c, rows, T(1), dlogits_.data(), lnf_.data(), T(1), g + wte_);
  std::vector<T> dres(nc, T(0));
  k::layer_norm_backward(dres.data(), g + lnfw_, g + lnfb_, dlnf.data(), out_.data(), meanf_.data(), rstdf_.data(),
                         p + lnfw_, rows, c);

  std::vector<T> dfcg(4 * nc), dfch(4 * nc), dln(nc), datty(nc), dqkv(3 * nc);
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const Layer& ly = layers_[l];
    const LayerActs& a = acts_[l];
    // x_out = x1 + fcproj(gelu(fc(ln2(x1)))), or the mixture of experts of ln2(x1)
    std::fill(dln.begin(), dln.end(), T(0));
    if (cfg_.experts > 0) {
      moe::backward(dln.data(), g + ly.router, expert_grads_of(ly), dres.data(), a.moe, a.ln2.data(), p + ly.router,
                    experts_of(ly), rows, c, cfg_.expert_ffn, cfg_.top_k);
    } else {
      std::fill(dfcg.begin(), dfcg.end(), T(0));
      std::fill(dfch.begin(), dfch.end(), T(0));
      k::linear_backward(dfcg.data(), g + ly.fcprojw, g + ly.fcprojb, dres.data(), a.fcg.data(), p + ly.fcprojw, rows,
                         4 * c, c);
      k::gelu_backward(dfch.data(), a.fch.data(), dfcg.data(), static_cast<std::int64_t>(4 * nc));
      k::linear_backward(dln.data(), g + ly.fcw, g + ly.fcb, dfch.data(), a.ln2.data(), p + ly.fcw, rows, c, 4 * c);
    }
    k::layer_norm_backward(dres.data(), g + ly.ln2w, g + ly.ln2b, dln.data(), a.x1.data(), a.mean2.data(),
                           a.rstd2.data(), p + ly.ln2w, rows, c);
    // x1 = x + proj(attention(qkv(ln1(x))))
    std::fill(datty.begin(), datty.end(), T(0));
    std::fill(dqkv.begin(), dqkv.end(), T(0));
    std::fill(dln.begin(), dln.end(), T(0));
    k::linear_backward(datty.data(), g + ly.projw, g + ly.projb, dres.data(), a.atty.data(), p + ly.projw, rows, c, c);
    k::attention_backward(dqkv.data(), datty.data(), a.qkv.data(), a.att.data(), b_, t_, h, c / h);
    k::linear_backward(dln.data(), g + ly.qkvw, g + ly.qkvb, dqkv.data(), a.ln1.data(), p + ly.qkvw, rows, c, 3 * c);
    k::layer_norm_backward(dres.data(), g + ly.ln1w, g + ly.ln1b, dln.data(), a.x.data(), a.mean1.data(),
                           a.rstd1.data(), p + ly.ln1w, rows, c);
  }
  k::embedding_backward(g + wte_, g + wpe_, dres.data(), tokens_.data(), b_, t_, c);
}

template class Gpt<float>;
template class Gpt<double>;

Batch synthetic_batch(int vocab, int b, int t, std::uint64_t seed, std::int64_t step) {
  // The successor permutation: Fisher-Yates from the seed.
  std::vector<std::int32_t> next(static_cast<std::size_t>(vocab));
  std::iota(next.begin(), next.end(), 0);
  std::uint64_t state = seed ^ 0x5eed5eed5eed5eedULL;
  for (int i = vocab - 1; i > 0; --i) {
    const auto j = static_cast<int>(splitmix(state) % static_cast<std::uint64_t>(i + 1));
    std::swap(next[static_cast<std::size_t>(i)], next[static_cast<std::size_t>(j)]);
  }
  Batch out;
  out.tokens.resize(static_cast<std::size_t>(b) * t);
  out.targets.resize(out.tokens.size());
  for (int s = 0; s < b; ++s) {
    std::uint64_t st = seed + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(step * 1000003 + s + 1);
    auto tok = static_cast<std::int32_t>(splitmix(st) % static_cast<std::uint64_t>(vocab));
    for (int i = 0; i < t; ++i) {
      const std::size_t at = static_cast<std::size_t>(s) * t + i;
      out.tokens[at] = tok;
      tok = next[static_cast<std::size_t>(tok)];
      out.targets[at] = tok;
    }
  }
  return out;
}

}  // namespace parasim::exec
