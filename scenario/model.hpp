// The model being trained: a GPT-style decoder described by its dimensions, or a generic
// list of layers (CNNs) each given by parameters, forward FLOPs and stored activation
// values per sample.
//
// Transformer parameter count (Megatron layout, biases included):
//   attention  h*(h + 2*kv*d) + (h + 2*kv*d)   QKV with kv key/value heads of d = h/a
//              h*h + h                          output projection
//   MLP        gelu: 2*h*f + f + h;  swiglu: 3*h*f  (no biases)
//   norms      4*h per layer (two layer norms), 2*h final
//   embedding  V*h (+ s*h learned positions for gelu/GPT; rotary for swiglu/LLaMA),
//              and V*h more for an LM head not tied to the embedding (LLaMA)
// With kv = a, f = 4h and gelu this is the familiar 12*l*h^2 + 13*l*h + (V + s)*h + 2h.
//
// Mixture of experts (experts E > 0, Mixtral's and Megatron-Core's layout): every layer's
// MLP is E experts, each an MLP of width f_e (expert_ffn_hidden, the same GeLU or SwiGLU
// form), and a router h*E (no bias); each token goes to its top_k experts, whose outputs
// are summed weighted by the router's probabilities. Parameters per layer: attention +
// E * expert + h*E + norms; a token computes with top_k experts only (active parameters).
// Shared experts (DeepSeekMoE's, Qwen-MoE's; Megatron-Core's shared_expert_intermediate_size):
// one more MLP of width f_s (shared_expert_ffn_hidden, all shared experts together) that
// every token goes through beside its routed experts, added to their weighted sum.
// DeepSeek's first_k_dense_replace: the first `dense_layers` layers keep a dense MLP of
// ffn_hidden; layer_spec(l) is the spec a layer is built from.
//
// Multi-head latent attention (MLA, DeepSeek-V2/V3; kv_lora_rank > 0), with a heads, rank
// r_q of the query's compression (0: none), r_kv of the keys' and values', head widths
// d_n (no position), d_r (rotary, one key shared by all heads) and d_v (values):
//   query     h*r_q + r_q (its norm) + r_q*a*(d_n + d_r)    (r_q = 0: h*a*(d_n + d_r))
//   key/value h*(r_kv + d_r) + r_kv (its norm) + r_kv*a*(d_n + d_v)
//   output    a*d_v*h                                        (no biases)
// The down projections and their norms are whole on every tp rank (Megatron-Core's
// "duplicated" linear layers); the up projections are column-parallel, the output row-
// parallel.
#pragma once

#include <string>
#include <vector>

namespace parasim::scenario {

enum class ModelKind { transformer, generic };
enum class Mlp { gelu, swiglu };

// Batch normalisation inside a generic layer (a CNN stage's convolutions are each
// followed by one): `layers` BatchNorm layers of `channels` channels each, normalising
// `values` of the layer's values per sample between them (each its share, in turn). Their
// scales and shifts (2·layers·channels) are part of the layer's params. Training
// normalises by the batch's statistics: the rank's micro-batch's, or under SyncBN
// (TrainingSpec::sync_batch_norm) those of the same micro-batch over every dp replica.
struct BatchNorm {
  int layers = 0;
  int channels = 0;
  double values = 0.0;  // per sample, all of the layer's BatchNorm layers together
  [[nodiscard]] double params() const { return 2.0 * layers * static_cast<double>(channels); }
};

struct GenericLayer {
  std::string name;
  double params = 0.0;
  double forward_flops = 0.0;  // per sample
  double activations = 0.0;    // values stored per sample for backward
  BatchNorm batch_norm{};
};

struct ModelSpec {
  std::string name;
  ModelKind kind = ModelKind::transformer;
  // transformer
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int ffn_hidden = 0;
  int vocab = 0;
  int seq_len = 0;
  Mlp mlp = Mlp::gelu;
  bool tie_embeddings = true;  // LM head shares the embedding matrix
  // Dropout probability (GPT's 0.1 on the attention probabilities and after each block;
  // LLaMA trains without): with 0 no masks are kept and no dropout kernels run.
  double dropout = 0.1;
  // Mixture of experts (0: a dense MLP).
  int experts = 0;
  int top_k = 0;                     // experts per token (2 by default with experts)
  int expert_ffn_hidden = 0;         // each expert's MLP width (ffn_hidden by default)
  int shared_expert_ffn_hidden = 0;  // the shared experts' MLP width (0: none)
  // Tokens an expert takes at most, as a multiple of an even share (top_k·tokens/E); those
  // past it are dropped (GShard, Switch). 0: dropless (Megatron-Core's default).
  double capacity_factor = 0.0;
  // The busiest expert-parallel rank's routed tokens over the mean (1: perfectly balanced):
  // the step waits for it, in its expert GEMMs and its all-to-all. Capped by the capacity.
  double moe_imbalance = 1.0;
  int dense_layers = 0;  // mixture of experts: the first layers' MLP stays dense (ffn_hidden)
  // Multi-head latent attention (0: none; the usual multi-head / grouped-query attention).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // generic
  std::vector<GenericLayer> generic_layers;

  [[nodiscard]] int layer_count() const {
    return kind == ModelKind::transformer ? layers : static_cast<int>(generic_layers.size());
  }
  [[nodiscard]] int head_dim() const { return heads > 0 ? hidden / heads : 0; }
  [[nodiscard]] bool moe() const { return kind == ModelKind::transformer && experts > 0; }
  [[nodiscard]] bool mla() const { return kind == ModelKind::transformer && kv_lora_rank > 0; }
  // Widths of a head's query/key and value (the head dimension twice without MLA).
  [[nodiscard]] int qk_head_dim() const { return mla() ? qk_nope_head_dim + qk_rope_head_dim : head_dim(); }
  [[nodiscard]] int value_head_dim() const { return mla() ? v_head_dim : head_dim(); }
  // Layer l's MLP is a mixture of experts (the model's, past its dense first layers).
  [[nodiscard]] bool moe_layer(int l) const { return moe() && l >= dense_layers; }
  // The spec layer l is built from: this one, or for a dense first layer of a mixture of
  // experts the same model with a dense MLP.
  [[nodiscard]] ModelSpec layer_spec(int l) const;
  // Layers whose MLP is a mixture of experts.
  [[nodiscard]] int moe_layers() const { return moe() ? layers - dense_layers : 0; }
  // One layer's attention parameters (projections and their biases; MLA's norms too).
  [[nodiscard]] double attention_params() const;
  // Parameters every tp rank holds whole in a layer: the norms, the biases added after a
  // row-parallel sum, a mixture of experts' router, MLA's down projections and their norms.
  [[nodiscard]] double tp_whole_params() const;
  // MLA's down projections and their norms (0 without MLA): whole on every tp rank, each
  // computing with its own part of the up projections' input gradient, so their gradients
  // are summed over tp with or without sequence parallelism.
  [[nodiscard]] double mla_down_params() const;
  // Parameters of one expert (moe()), or of the dense MLP.
  [[nodiscard]] double mlp_params() const;
  // The experts' parameters in one layer (0 when dense): what expert parallelism shards.
  [[nodiscard]] double expert_params_per_layer() const { return moe() ? experts * mlp_params() : 0.0; }
  // Parameters of the shared experts' MLP in one layer (0 without).
  [[nodiscard]] double shared_expert_params() const;
  // The routed tokens' load on the busiest expert-parallel rank, relative to an even share:
  // the imbalance, capped by the capacity factor (1 when dense).
  [[nodiscard]] double expert_load() const;
  // Parameters a token computes with (top_k experts of each layer; all of them when dense).
  [[nodiscard]] double active_parameter_count() const;
  // Transformer: one layer's parameters; its linear layers' weights (MLP and experts
  // included). Of a mixture of experts' layer: see layer_spec for the dense first ones.
  [[nodiscard]] double params_per_layer() const;
  [[nodiscard]] double linear_params_per_layer() const;
  [[nodiscard]] double embedding_params() const;  // transformer
  [[nodiscard]] double parameter_count() const;
  // Tokens per sample: the sequence length for a transformer, 1 for a generic model.
  [[nodiscard]] int tokens_per_sample() const { return kind == ModelKind::transformer ? seq_len : 1; }
};

std::string_view to_string(ModelKind k);
std::string_view to_string(Mlp m);

// Parameters of layer `l` on one of tp ranks: the sharded GEMM weights and biases, plus
// the tensors every tp rank holds whole (two norms, the biases added after the
// row-parallel sums), and under expert parallelism 1/ep of the experts. A generic layer's
// own count.
double layer_params_on_rank(const ModelSpec& m, int layer, int tp, int ep = 1);
// The experts' part of it: experts / ep of them, each split over tp but for its second
// bias (GeLU), which every tp rank holds whole as the dense MLP's.
double expert_params_on_rank(const ModelSpec& m, int tp, int ep);

}  // namespace parasim::scenario
