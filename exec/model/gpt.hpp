// A GPT-style decoder on the host kernels (kernels.hpp): token and position embeddings,
// pre-norm blocks of causal multi-head attention and a GELU MLP (4x wide) with residuals,
// a final layer norm and an LM head tied to the token embedding, mean cross-entropy.
// Parameters and their gradients live in one flat buffer each (params(), grads()), laid
// out as GPT-2's: wte, wpe, then per layer ln1, qkv, attention projection, ln2, fc, fc
// projection, then the final norm. Weights are stored [in x out].
//
// One seed initialises everything: normal(0, 0.02) weights, the two residual projections
// scaled by 1/sqrt(2 layers), norms at gamma 1, beta 0, biases 0.
//
// With experts (GptConfig::experts > 0) every layer's MLP is a mixture of experts
// (moe.hpp): after ln2 the router [C x E], then each expert's fc, its bias, fc projection
// and its bias, expert after expert; the router normal(0, 0.02) as the other weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/model/moe.hpp"

namespace parasim::exec {

// Where one layer's tensors start in a flat parameter buffer, in GPT-2's order. `cl` is the
// width of the attention's heads held (hidden, or hidden / tp for a tensor-parallel shard),
// `fl` the MLP's (4 x hidden, or 4 x hidden / tp). Advances `at` past the layer.
// With `experts` > 0 the fc tensors are expert 0's, expert e's `expert_stride` x e further,
// and `router` the router's [hidden x experts] before them. Under expert parallelism a
// rank holds `held` of the experts (0: all), laid out from `*expert_at` (advanced past
// them) when given: the experts' own region of the buffer.
struct LayerOffsets {
  std::size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  std::size_t router = 0, expert_stride = 0;
};
LayerOffsets lay_out_layer(std::size_t& at, std::size_t hidden, std::size_t cl, std::size_t fl, std::size_t experts = 0,
                           std::size_t held = 0, std::size_t* expert_at = nullptr);

struct GptConfig {
  int vocab = 64;
  int seq_len = 16;  // longest sequence (rows of wpe)
  int layers = 2;
  int hidden = 32;
  int heads = 4;
  int experts = 0;     // mixture of experts per layer (0: a dense MLP of 4 x hidden)
  int top_k = 0;       // experts per token
  int expert_ffn = 0;  // each expert's MLP width
};

// Where each tensor of a Gpt starts in its flat parameter vector.
struct GptLayout {
  explicit GptLayout(const GptConfig& config);
  std::size_t wte = 0, wpe = 0, lnfw = 0, lnfb = 0, count = 0;
  std::vector<LayerOffsets> layers;
};

// The value Gpt(config, seed) gives parameter i, found without drawing the others: the
// normal draws take two splitmix steps each, in layout order, so a weight's draw follows
// from how many normal-drawn weights precede it. A shard draws only what it holds.
class GptInitialValues {
 public:
  GptInitialValues(const GptConfig& config, std::uint64_t seed);
  [[nodiscard]] double operator()(std::size_t i) const;

 private:
  struct Range {  // [begin, end): normal(0, stddev) from draw `first`, or (stddev 0) ones
    std::size_t begin = 0, end = 0, first = 0;
    double stddev = 0.0;
  };
  std::vector<Range> ranges_;  // by begin; parameters in none are 0
  std::uint64_t seed_ = 0;
};

template <class T>
class Gpt {
 public:
  Gpt(const GptConfig& config, std::uint64_t seed);

  [[nodiscard]] const GptConfig& config() const { return cfg_; }
  [[nodiscard]] std::span<T> params() { return params_; }
  [[nodiscard]] std::span<T> grads() { return grads_; }
  [[nodiscard]] std::int64_t param_count() const { return static_cast<std::int64_t>(params_.size()); }

  // Forward over b sequences of t tokens (t <= seq_len); returns the mean loss against
  // `targets` and keeps what backward() needs.
  T forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets, int b, int t);
  // Adds d(loss)/d(params) of the last forward into grads().
  void backward();
  void zero_grad();

  // Where each tensor starts in params() and grads().
  using Layer = LayerOffsets;
  [[nodiscard]] const Layer& layer_offsets(int l) const { return layers_[static_cast<std::size_t>(l)]; }
  [[nodiscard]] std::size_t wte_offset() const { return wte_; }
  [[nodiscard]] std::size_t wpe_offset() const { return wpe_; }
  [[nodiscard]] std::size_t lnfw_offset() const { return lnfw_; }
  [[nodiscard]] std::size_t lnfb_offset() const { return lnfb_; }

 private:
  struct LayerActs {
    std::vector<T> x, ln1, mean1, rstd1, qkv, att, atty, x1, ln2, mean2, rstd2, fch, fcg;
    moe::Saved<T> moe;  // a mixture-of-experts MLP's
  };
  [[nodiscard]] std::vector<moe::Expert<T>> experts_of(const Layer& ly) const;
  [[nodiscard]] std::vector<moe::ExpertGrads<T>> expert_grads_of(const Layer& ly);

  GptConfig cfg_;
  std::vector<T> params_;
  std::vector<T> grads_;
  std::size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;
  std::vector<Layer> layers_;
  // Activations of the last forward.
  int b_ = 0, t_ = 0;
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<LayerActs> acts_;
  std::vector<T> out_, lnf_, meanf_, rstdf_, logits_, dlogits_;
};

// Deterministic token sequences a model can learn: each token is followed by a fixed
// successor (a permutation of the vocabulary drawn from the seed), starting from a token
// drawn per (step, sequence). The targets are the tokens shifted by one.
struct Batch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
};
Batch synthetic_batch(int vocab, int b, int t, std::uint64_t seed, std::int64_t step);

}  // namespace parasim::exec
