#include "plan/model.hpp"

#include <algorithm>

namespace parasim::plan {

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

double ModelSpec::params_per_layer() const {
  const double h = hidden;
  const double kv = static_cast<double>(kv_heads) * head_dim();
  const double attention = h * (h + 2 * kv) + (h + 2 * kv) + h * h + h;
  const double mlp_all = moe() ? experts * mlp_params() + h * experts + shared_expert_params() : mlp_params();
  return attention + mlp_all + 4 * h;
}

double ModelSpec::linear_params_per_layer() const {
  const double h = hidden;
  const double kv = static_cast<double>(kv_heads) * head_dim();
  const double f = moe() ? expert_ffn_hidden : ffn_hidden;
  const double mlp_linear = (mlp == Mlp::gelu ? 2.0 : 3.0) * h * f * (moe() ? experts : 1);
  const double shared = (mlp == Mlp::gelu ? 2.0 : 3.0) * h * (moe() ? shared_expert_ffn_hidden : 0);
  return h * (h + 2 * kv) + h * h + mlp_linear + shared + (moe() ? h * experts : 0.0);
}

double ModelSpec::expert_load() const {
  if (!moe()) return 1.0;
  return capacity_factor > 0.0 ? std::min(moe_imbalance, capacity_factor) : moe_imbalance;
}

double ModelSpec::active_parameter_count() const {
  if (!moe()) return parameter_count();
  return parameter_count() - static_cast<double>(layers) * (experts - top_k) * mlp_params();
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
  return layers * params_per_layer() + embedding_params() + 2.0 * hidden;
}

std::string_view to_string(ModelKind k) { return k == ModelKind::transformer ? "transformer" : "generic"; }
std::string_view to_string(Mlp m) { return m == Mlp::gelu ? "gelu" : "swiglu"; }

double expert_params_on_rank(const ModelSpec& m, int tp, int ep) {
  if (!m.moe()) return 0.0;
  const double whole = m.mlp == Mlp::gelu ? static_cast<double>(m.experts) * m.hidden : 0.0;
  return ((m.expert_params_per_layer() - whole) / tp + whole) / ep;
}

double layer_params_on_rank(const ModelSpec& m, int layer, int tp, int ep) {
  if (m.kind == ModelKind::generic) return m.generic_layers[static_cast<std::size_t>(layer)].params;
  // Whole on every tp rank: the two norms, the biases added after a row-parallel sum (the
  // attention's; the dense MLP's or the shared experts'), and a mixture of experts' router.
  const double h = m.hidden;
  const bool mlp_bias = m.mlp == Mlp::gelu && (!m.moe() || m.shared_expert_ffn_hidden > 0);
  const double whole = 4.0 * h + h + (mlp_bias ? h : 0.0) + (m.moe() ? h * m.experts : 0.0);
  return (m.params_per_layer() - whole - m.expert_params_per_layer()) / tp + whole + expert_params_on_rank(m, tp, ep);
}

}  // namespace parasim::plan
