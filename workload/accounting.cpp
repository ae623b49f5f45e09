#include "workload/accounting.hpp"

#include <algorithm>
#include <cmath>

namespace parasim::workload {

double sum_flops(const std::vector<Gemm>& gemms) {
  double f = 0.0;
  for (const Gemm& g : gemms) f += g.flops();
  return f;
}

double gemm_io_bytes(const std::vector<Gemm>& gemms, int element_bytes) {
  double b = 0.0;
  for (const Gemm& g : gemms) b += g.io_bytes(element_bytes);
  return b;
}

long long expert_tokens(const scenario::ModelSpec& m, int micro_batch, int cp, int ep, double load) {
  const double tokens = static_cast<double>(micro_batch) * (m.seq_len / cp);
  return static_cast<long long>(std::ceil(ep * tokens * m.top_k * load / m.experts - 1e-9));
}

int attention_gemm_count(const scenario::ModelSpec& m) {
  return m.mla() ? (m.q_lora_rank > 0 ? 7 : 6) : 4;
}

std::vector<Gemm> layer_forward_gemms(const scenario::ModelSpec& m, int micro_batch, int tp, int cp, int ep,
                                      double load) {
  const long long b = micro_batch;
  const long long s = m.seq_len;
  const long long sl = s / cp;  // this rank's queries (context parallelism); the keys stay s
  const long long h = m.hidden;
  const long long d = m.head_dim();
  const long long heads = m.heads / tp;
  const long long kv = static_cast<long long>(m.kv_heads) * d / tp;
  const long long f = m.ffn_hidden / tp;
  const long long tokens = b * sl;
  std::vector<Gemm> g;
  if (m.mla()) {
    // The down projections over every row on each tp rank (whole, their weight gradients
    // partial sums: summed over tp), the up projections column-parallel.
    const long long qk = m.qk_head_dim();
    const long long dv = m.v_head_dim;
    const long long q_lora = m.q_lora_rank;
    const long long kv_lora = m.kv_lora_rank;
    if (q_lora > 0) {
      g.push_back({"q-down", tokens, q_lora, h, 1});
      g.push_back({"q-up", tokens, heads * qk, q_lora, 1});
    } else {
      g.push_back({"q", tokens, heads * qk, h, 1});
    }
    g.push_back({"kv-down", tokens, kv_lora + m.qk_rope_head_dim, h, 1});
    g.push_back({"kv-up", tokens, heads * (m.qk_nope_head_dim + dv), kv_lora, 1});
    g.push_back({"attention-scores", sl, s, qk, b * heads});
    g.push_back({"attention-values", sl, dv, s, b * heads});
    g.push_back({"attention-out", tokens, h, heads * dv, 1});
  } else {
    g = {
        {"qkv", tokens, h / tp + 2 * kv, h, 1},
        {"attention-scores", sl, s, d, b * heads},  // Q·K^T per head
        {"attention-values", sl, d, s, b * heads},  // softmax·V per head
        {"attention-out", tokens, h, h / tp, 1},
    };
  }
  if (m.moe()) {
    const long long fe = m.expert_ffn_hidden / tp;
    const long long local = m.experts / ep;
    const long long routed = expert_tokens(m, micro_batch, cp, ep, load);
    g.push_back({"router", tokens / tp, m.experts, h, 1});  // each tp rank routes its sequence shard
    g.push_back({m.mlp == scenario::Mlp::gelu ? "expert-up" : "expert-gate-up", routed,
                 m.mlp == scenario::Mlp::gelu ? fe : 2 * fe, h, local});
    g.push_back({"expert-down", routed, h, fe, local});
    if (m.shared_expert_ffn_hidden > 0) {  // every token, beside its routed experts
      const long long fs = m.shared_expert_ffn_hidden / tp;
      g.push_back({m.mlp == scenario::Mlp::gelu ? "shared-up" : "shared-gate-up", tokens,
                   m.mlp == scenario::Mlp::gelu ? fs : 2 * fs, h, 1});
      g.push_back({"shared-down", tokens, h, fs, 1});
    }
    return g;
  }
  if (m.mlp == scenario::Mlp::gelu) {
    g.push_back({"mlp-up", tokens, f, h, 1});
  } else {
    g.push_back({"mlp-gate-up", tokens, 2 * f, h, 1});
  }
  g.push_back({"mlp-down", tokens, h, f, 1});
  return g;
}

Gemm lm_head_gemm(const scenario::ModelSpec& m, int micro_batch, int tp, int cp) {
  return {"lm-head", static_cast<long long>(micro_batch) * (m.seq_len / cp), m.vocab / tp, m.hidden, 1};
}

Gemm generic_layer_gemm(const scenario::GenericLayer& layer, int micro_batch) {
  const double weights = std::round(layer.params) - layer.batch_norm.params();
  const auto side = std::max(1LL, static_cast<long long>(std::floor(std::sqrt(weights))));
  const double square = static_cast<double>(side) * static_cast<double>(side);
  const auto rows = std::max(1LL, std::llround(layer.forward_flops * micro_batch / (2.0 * square)));
  return {layer.name, rows, side, side, 1};
}

long long generic_layer_bias(const scenario::GenericLayer& layer) {
  const long long side = generic_layer_gemm(layer, 1).n;
  return std::max(0LL, std::llround(layer.params - layer.batch_norm.params()) - side * side);
}

double step_flops(const scenario::ModelSpec& m, int global_batch, scenario::Recompute recompute) {
  // Forward + backward (2x); full recompute repeats the layers' forward once more,
  // selective recompute only the attention core.
  auto per_layer = [&](const scenario::ModelSpec& spec) {
    double layer = 0.0;
    double core = 0.0;  // the attention core: Q·K^T and softmax·V
    for (const Gemm& g : layer_forward_gemms(spec, global_batch, 1)) {
      layer += g.flops();
      if (g.name.starts_with("attention-scores") || g.name.starts_with("attention-values")) core += g.flops();
    }
    double f = 3.0 * layer;
    if (recompute == scenario::Recompute::full) f += layer;
    if (recompute == scenario::Recompute::selective) f += core;
    return f;
  };
  const double head = lm_head_gemm(m, global_batch, 1).flops();
  const double dense = m.dense_layers > 0 && m.moe() ? m.dense_layers * per_layer(m.layer_spec(0)) : 0.0;
  return dense + (m.layers - (m.moe() ? m.dense_layers : 0)) * per_layer(m) + head * 3.0;
}

std::vector<StoredTensor> layer_stored_tensors(const scenario::ModelSpec& m, int micro_batch, int activation_bytes,
                                               int linear_bytes) {
  const double sbh = static_cast<double>(m.seq_len) * micro_batch * m.hidden;
  const double kv_share = static_cast<double>(m.kv_heads) / m.heads;
  const double attn = static_cast<double>(m.heads) * m.seq_len * m.seq_len * micro_batch;  // a·s²·b
  const double f_share = static_cast<double>(m.ffn_hidden) / m.hidden;
  const int e = activation_bytes;
  const int li = linear_bytes > 0 ? linear_bytes : e;
  std::vector<StoredTensor> t{
      {"ln1-input", sbh, e, false, false},
      {"qkv-input", sbh, li, false, false},
  };
  if (m.mla()) {
    // The compressed query and keys/values (before and after their norms, whole on every
    // tp rank once gathered), the heads' queries, keys and values, the output's input.
    const double sb = static_cast<double>(m.seq_len) * micro_batch;
    const double heads = m.heads;
    if (m.q_lora_rank > 0) {
      t.push_back({"q-compressed", sb * m.q_lora_rank, e, false, false, false});
      t.push_back({"q-up-input", sb * m.q_lora_rank, li, false, false, false});
    }
    t.push_back({"kv-compressed", sb * m.kv_lora_rank, e, false, false, false});
    t.push_back({"kv-up-input", sb * m.kv_lora_rank, li, false, false, false});
    t.push_back({"q", sb * heads * m.qk_head_dim(), e, true, false});
    t.push_back({"k", sb * heads * m.qk_head_dim(), e, true, false});
    t.push_back({"softmax-output", attn, e, true, true});
    t.push_back({"v", sb * heads * m.v_head_dim, e, true, false});
    t.push_back({"attention-out-input", sb * heads * m.v_head_dim, li, true, false});
  } else {
    t.push_back({"q", sbh, e, true, false});
    t.push_back({"k", sbh * kv_share, e, true, false});
    t.push_back({"softmax-output", attn, e, true, true});
    t.push_back({"v", sbh * kv_share, e, true, false});
    t.push_back({"attention-out-input", sbh, li, true, false});
  }
  t.push_back({"ln2-input", sbh, e, false, false});
  t.push_back({"mlp-input", sbh, li, false, false});
  // Dropout keeps its masks (a byte each) and, on the attention probabilities, its output.
  const bool dropout = m.dropout > 0.0;
  if (dropout) {
    t.push_back({"softmax-dropout-mask", attn, 1, true, true});
    t.push_back({"attention-dropout-output", attn, e, true, true});
    t.push_back({"attention-dropout-mask", sbh, 1, false, false});
  }
  if (m.moe()) {
    const double routed = sbh * m.top_k * m.expert_load();
    const double fe_share = static_cast<double>(m.expert_ffn_hidden) / m.hidden;
    t.push_back({"router-probs", static_cast<double>(m.seq_len) * micro_batch * m.experts, 4, false, false, false});
    t.push_back({"expert-input", routed, li, false, false, false});
    if (m.mlp == scenario::Mlp::gelu) {
      t.push_back({"expert-gelu-input", routed * fe_share, e, true, false});
    } else {
      t.push_back({"expert-gate", routed * fe_share, e, true, false});
      t.push_back({"expert-up", routed * fe_share, e, true, false});
    }
    t.push_back({"expert-down-input", routed * fe_share, li, true, false});
    t.push_back({"expert-output", routed, e, false, false, false});
    if (m.shared_expert_ffn_hidden > 0) {  // a dense MLP's, of the shared width (its input is the router's)
      const double fs_share = static_cast<double>(m.shared_expert_ffn_hidden) / m.hidden;
      if (m.mlp == scenario::Mlp::gelu) {
        t.push_back({"shared-gelu-input", sbh * fs_share, e, true, false});
      } else {
        t.push_back({"shared-gate", sbh * fs_share, e, true, false});
        t.push_back({"shared-up", sbh * fs_share, e, true, false});
      }
      t.push_back({"shared-down-input", sbh * fs_share, li, true, false});
    }
  } else if (m.mlp == scenario::Mlp::gelu) {
    t.push_back({"gelu-input", sbh * f_share, e, true, false});
    t.push_back({"mlp-down-input", sbh * f_share, li, true, false});
  } else {
    t.push_back({"gate", sbh * f_share, e, true, false});
    t.push_back({"up", sbh * f_share, e, true, false});
    t.push_back({"mlp-down-input", sbh * f_share, li, true, false});
  }
  if (dropout) t.push_back({"mlp-dropout-mask", sbh, 1, false, false});
  return t;
}

double layer_activation_bytes(const scenario::ModelSpec& m, int micro_batch, int tp, bool sequence_parallel,
                              scenario::Recompute recompute, int activation_bytes, bool flash, int linear_bytes) {
  if (recompute == scenario::Recompute::full) {
    // Only the layer input stays; sequence parallelism shards it too.
    const double input = static_cast<double>(m.seq_len) * micro_batch * m.hidden * activation_bytes;
    return sequence_parallel ? input / tp : input;
  }
  double bytes = flash ? 4.0 * m.heads / tp * m.seq_len * micro_batch : 0.0;
  for (const StoredTensor& t : layer_stored_tensors(m, micro_batch, activation_bytes, linear_bytes)) {
    if ((flash || recompute == scenario::Recompute::selective) && t.attention_core) continue;
    const double b = t.elements * t.bytes_per_element;
    bytes += t.tp_sharded || (sequence_parallel && t.sequence_sharded) ? b / tp : b;
  }
  return bytes;
}

double cp_kv_block_bytes(const scenario::Scenario& s) {
  const scenario::ModelSpec& m = s.model;
  const int e = topology::dtype_bytes(topology::storage_dtype(s.training.precision));
  return static_cast<double>(s.training.micro_batch) * (m.seq_len / s.plan.cp) * 2.0 * m.kv_heads * m.head_dim() /
         s.plan.tp * e;
}

}  // namespace parasim::workload
