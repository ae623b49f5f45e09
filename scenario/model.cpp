#include "scenario/model.hpp"

#include <algorithm>

namespace parasim::scenario {

double ModelSpec::mlp_params() const {
  const double h = hidden;
  const double f = moe() ? expert_ffn_hidden : ffn_hidden;
  return mlp == Mlp::gelu ? 2 * h * f + f + h : 3 * h * f;
}

double ModelSpec::shared_expert_params() const {
  if (!moe() || shared_expert_ffn_hidden == 0) return 0.0;
  const double h = hidden;
  const double f = shared_expert_ffn_hidden;
  return mlp == Mlp::gelu ? 2 * h * f + f + h : 3 * h * f;
}

ModelSpec ModelSpec::layer_spec(int l) const {
  if (!moe() || moe_layer(l)) return *this;
  ModelSpec dense = *this;
  dense.experts = dense.top_k = dense.expert_ffn_hidden = dense.shared_expert_ffn_hidden = dense.dense_layers = 0;
  dense.capacity_factor = 0.0;
  dense.moe_imbalance = 1.0;
  return dense;
}

namespace {

// The attention's linear weights (no biases, no norms).
double attention_weights(const ModelSpec& m) {
  const double h = m.hidden;
  const double a = m.heads;
  if (m.mla()) {
    const double q_lora = m.q_lora_rank;
    const double kv_lora = m.kv_lora_rank;
    const double query = q_lora > 0 ? h * q_lora + q_lora * a * m.qk_head_dim() : h * a * m.qk_head_dim();
    const double key_value = h * (kv_lora + m.qk_rope_head_dim) + kv_lora * a * (m.qk_nope_head_dim + m.v_head_dim);
    return query + key_value + a * m.v_head_dim * h;
  }
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim();
  return h * (h + 2 * kv) + h * h;
}

}  // namespace

double ModelSpec::attention_params() const {
  const double h = hidden;
  if (mla()) return attention_weights(*this) + q_lora_rank + kv_lora_rank;  // and the two norms
  const double kv = static_cast<double>(kv_heads) * head_dim();
  return attention_weights(*this) + (h + 2 * kv) + h;
}

double ModelSpec::tp_whole_params() const {
  const double h = hidden;
  const bool mlp_bias = mlp == Mlp::gelu && (!moe() || shared_expert_ffn_hidden > 0);
  double whole = 4.0 * h + (mlp_bias ? h : 0.0) + (moe() ? h * experts : 0.0);
  return whole + (mla() ? mla_down_params() : h);  // without MLA: the attention's output bias
}

double ModelSpec::mla_down_params() const {
  if (!mla()) return 0.0;
  const double h = hidden;
  const double q = q_lora_rank > 0 ? h * q_lora_rank + q_lora_rank : 0.0;
  return q + h * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank;
}

double ModelSpec::params_per_layer() const {
  const double h = hidden;
  const double mlp_all = moe() ? experts * mlp_params() + h * experts + shared_expert_params() : mlp_params();
  return attention_params() + mlp_all + 4 * h;
}

double ModelSpec::linear_params_per_layer() const {
  const double h = hidden;
  const double f = moe() ? expert_ffn_hidden : ffn_hidden;
  const double mlp_linear = (mlp == Mlp::gelu ? 2.0 : 3.0) * h * f * (moe() ? experts : 1);
  const double shared = (mlp == Mlp::gelu ? 2.0 : 3.0) * h * (moe() ? shared_expert_ffn_hidden : 0);
  return attention_weights(*this) + mlp_linear + shared + (moe() ? h * experts : 0.0);
}

double ModelSpec::expert_load() const {
  if (!moe()) return 1.0;
  return capacity_factor > 0.0 ? std::min(moe_imbalance, capacity_factor) : moe_imbalance;
}

double ModelSpec::active_parameter_count() const {
  if (!moe()) return parameter_count();
  return parameter_count() - static_cast<double>(moe_layers()) * (experts - top_k) * mlp_params();
}

double ModelSpec::embedding_params() const {
  const double positions = mlp == Mlp::gelu ? static_cast<double>(seq_len) : 0.0;
  const double head = tie_embeddings ? 0.0 : static_cast<double>(vocab);
  return (vocab + head + positions) * hidden;
}

double ModelSpec::parameter_count() const {
  if (kind == ModelKind::generic) {
    double sum = 0.0;
    for (const GenericLayer& l : generic_layers) sum += l.params;
    return sum;
  }
  const double dense = dense_layers > 0 ? dense_layers * layer_spec(0).params_per_layer() : 0.0;
  return dense + (layers - dense_layers) * params_per_layer() + embedding_params() + 2.0 * hidden;
}

std::string_view to_string(ModelKind k) {
  return k == ModelKind::transformer ? "transformer" : "generic";
}
std::string_view to_string(Mlp m) {
  return m == Mlp::gelu ? "gelu" : "swiglu";
}

double expert_params_on_rank(const ModelSpec& m, int tp, int ep) {
  if (!m.moe()) return 0.0;
  const double whole = m.mlp == Mlp::gelu ? static_cast<double>(m.experts) * m.hidden : 0.0;
  return ((m.expert_params_per_layer() - whole) / tp + whole) / ep;
}

double layer_params_on_rank(const ModelSpec& m, int layer, int tp, int ep) {
  if (m.kind == ModelKind::generic) return m.generic_layers[static_cast<std::size_t>(layer)].params;
  if (m.moe() && !m.moe_layer(layer)) return layer_params_on_rank(m.layer_spec(layer), layer, tp, ep);
  const double whole = m.tp_whole_params();
  return (m.params_per_layer() - whole - m.expert_params_per_layer()) / tp + whole + expert_params_on_rank(m, tp, ep);
}

}  // namespace parasim::scenario
