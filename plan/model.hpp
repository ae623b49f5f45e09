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
#pragma once

#include <string>
#include <vector>

namespace parasim::plan {

enum class ModelKind { transformer, generic };
enum class Mlp { gelu, swiglu };

struct GenericLayer {
  std::string name;
  double params = 0.0;
  double forward_flops = 0.0;  // per sample
  double activations = 0.0;    // values stored per sample for backward
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
  // generic
  std::vector<GenericLayer> generic_layers;

  [[nodiscard]] int layer_count() const {
    return kind == ModelKind::transformer ? layers : static_cast<int>(generic_layers.size());
  }
  [[nodiscard]] int head_dim() const { return heads > 0 ? hidden / heads : 0; }
  [[nodiscard]] double params_per_layer() const;  // transformer
  [[nodiscard]] double linear_params_per_layer() const;  // transformer: the four linear layers' weights
  [[nodiscard]] double embedding_params() const;  // transformer
  [[nodiscard]] double parameter_count() const;
  // Tokens per sample: the sequence length for a transformer, 1 for a generic model.
  [[nodiscard]] int tokens_per_sample() const { return kind == ModelKind::transformer ? seq_len : 1; }
};

std::string_view to_string(ModelKind k);
std::string_view to_string(Mlp m);

// Parameters of layer `l` on one of tp ranks: the sharded GEMM weights and biases, plus
// the tensors every tp rank holds whole (two norms, the biases added after the
// row-parallel sums). A generic layer's own count.
double layer_params_on_rank(const ModelSpec& m, int layer, int tp);

}  // namespace parasim::plan
