// The kernels of multi-head latent attention's projections and of a mixture of experts'
// MLP (workload/kernels.hpp, MoeKernels; kernels_detail.hpp).
#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
#include "workload/kernels_detail.hpp"

namespace parasim::workload {

namespace detail {

// Multi-head latent attention's projections in (forward or backward): the down projections
// and their norms over every row (whole on each tp rank), the up projections column-
// parallel, the rotary part (the query's per head, the key's one shared) and the assembly
// of the heads' queries and keys from their two parts.
void mla_in_forward(Emit& k, const KernelPlan& p, const Dims& x) {
  const scenario::ModelSpec& m = p.model;
  const long long heads = m.heads / p.tp;
  const long long rope = m.qk_rope_head_dim;
  const long long kv_lora = m.kv_lora_rank;
  if (m.q_lora_rank > 0) {
    k.linear("q-down", x.Ti, m.q_lora_rank, x.hi);
    k.memory("q-norm", 2.0 * x.T * m.q_lora_rank * x.e);
    k.fp8_cast("q-up-input-cast", x.T * m.q_lora_rank, true);
    k.linear("q-up", x.Ti, heads * x.dqk, m.q_lora_rank);
  } else {
    k.linear("q", x.Ti, heads * x.dqk, x.hi);
  }
  k.linear("kv-down", x.Ti, kv_lora + rope, x.hi);
  k.memory("kv-norm", 2.0 * x.T * static_cast<double>(kv_lora) * x.e);
  k.fp8_cast("kv-up-input-cast", x.T * static_cast<double>(kv_lora), true);
  k.linear("kv-up", x.Ti, heads * (m.qk_nope_head_dim + x.dvi), kv_lora);
  k.memory("rotary-q", 2.0 * x.T * static_cast<double>(heads * rope) * x.e);
  k.memory("rotary-k", 2.0 * x.T * static_cast<double>(rope) * x.e);
  k.memory("mla-qk-assemble", 2.0 * x.T * (x.qw + x.kw) * x.e);
}

void mla_in_backward(Emit& k, const KernelPlan& p, const Dims& x) {
  const scenario::ModelSpec& m = p.model;
  const long long heads = m.heads / p.tp;
  const long long rope = m.qk_rope_head_dim;
  const long long kv_lora = m.kv_lora_rank;
  const long long kv_up = heads * (m.qk_nope_head_dim + x.dvi);
  k.memory("mla-qk-split-bwd", 2.0 * x.T * (x.qw + x.kw) * x.e);
  k.memory("rotary-q-bwd", 2.0 * x.T * static_cast<double>(heads * rope) * x.e);
  k.memory("rotary-k-bwd", 2.0 * x.T * static_cast<double>(rope) * x.e);
  k.fp8_cast("kv-up-grad-cast", x.T * static_cast<double>(kv_up), false);
  k.linear("kv-up-dgrad", x.Ti, kv_lora, kv_up);
  k.linear_wgrad("kv-up-wgrad", kv_up, kv_lora, x.Ti);
  k.memory("kv-norm-bwd", 3.0 * x.T * static_cast<double>(kv_lora) * x.e);
  k.linear("kv-down-dgrad", x.Ti, x.hi, kv_lora + rope);
  k.linear_wgrad("kv-down-wgrad", kv_lora + rope, x.hi, x.Ti);
  if (m.q_lora_rank > 0) {
    k.fp8_cast("q-up-grad-cast", x.T * x.qw, false);
    k.linear("q-up-dgrad", x.Ti, m.q_lora_rank, heads * x.dqk);
    k.linear_wgrad("q-up-wgrad", heads * x.dqk, m.q_lora_rank, x.Ti);
    k.memory("q-norm-bwd", 3.0 * x.T * m.q_lora_rank * x.e);
    k.linear("q-down-dgrad", x.Ti, x.hi, m.q_lora_rank);
    k.linear_wgrad("q-down-wgrad", m.q_lora_rank, x.hi, x.Ti);
  } else {
    k.fp8_cast("q-grad-cast", x.T * x.qw, false);
    k.linear("q-dgrad", x.Ti, x.hi, heads * x.dqk);
    k.linear_wgrad("q-wgrad", heads * x.dqk, x.hi, x.Ti);
  }
  k.memory("mla-input-grad-add", 3.0 * x.T * x.h * x.e);  // the query's and the keys' parts
}

struct MoeDims {
  long long local = 1, routed = 0, fi = 0;  // local experts, tokens per expert, expert width / tp
  double copies = 0.0;                      // routed token copies on this rank: T·top_k·load
  double experts = 0.0;                     // E
};

MoeDims moe_dims(const KernelPlan& p, const Dims& x) {
  const scenario::ModelSpec& m = p.model;
  MoeDims d;
  d.local = m.experts / p.ep;
  d.routed = expert_tokens(m, p.micro_batch, p.cp, p.ep, p.expert_load);
  d.fi = m.expert_ffn_hidden / p.tp;
  d.copies = x.T * m.top_k * p.expert_load;
  d.experts = m.experts;
  return d;
}

// The shared experts (DeepSeekMoE's): a dense MLP of their width over every token, run
// before the exchange as Megatron-Core's MoE layer does (its output is added to the
// experts' in the combine's unpermutation). Under tp it is split as a dense MLP (Megatron-
// Core's SharedExpertMLP): column- then row-parallel, over the tp group's gathered tokens.
void shared_experts(Emit& k, const KernelPlan& p, const Dims& x, bool backward) {
  if (p.model.shared_expert_ffn_hidden == 0) return;
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
  const long long fs = p.model.shared_expert_ffn_hidden / p.tp;
  const long long up = swiglu ? 2 * fs : fs;
  const double intermediate = x.T * static_cast<double>(fs);
  if (!backward) {
    k.linear(swiglu ? "shared-gate-up" : "shared-up", x.Ti, up, x.hi);
    k.memory(swiglu ? "shared-swiglu" : "shared-bias-gelu", (swiglu ? 3.0 : 2.0) * intermediate * x.e);
    k.fp8_cast("shared-down-input-cast", intermediate, true);
    k.linear("shared-down", x.Ti, x.hi, fs);
  } else {
    k.linear("shared-down-dgrad", x.Ti, fs, x.hi);
    k.linear_wgrad("shared-down-wgrad", fs, x.hi, x.Ti);
    k.memory(swiglu ? "shared-swiglu-bwd" : "shared-bias-gelu-bwd", (swiglu ? 5.0 : 3.0) * intermediate * x.e);
    k.fp8_cast("shared-up-grad-cast", x.T * static_cast<double>(up), true);
    k.linear("shared-up-dgrad", x.Ti, x.hi, up);
    k.linear_wgrad("shared-up-wgrad", up, x.hi, x.Ti);
  }
}

void moe_prepare(Emit& k, const KernelPlan& p, const Dims& x, bool backward) {
  const MoeDims d = moe_dims(p, x);
  if (!backward) {
    norm_forward(k, p, x);
    k.gemm("router", p.sequence_parallel ? x.Ti / p.tp : x.Ti, p.model.experts, x.hi);
    k.memory("router-softmax-topk", 3.0 * x.Tl * d.experts * 4.0);
    k.memory("moe-permute", (1.0 + d.copies / x.T) * x.Tl * x.h * x.e);
  } else {
    residual_backward(k, p, x);
    k.memory("moe-unpermute-bwd", (1.0 + 2.0 * d.copies / x.T) * x.Tl * x.h * x.e);
  }
  if (p.tp == 1) shared_experts(k, p, x, backward);  // with tp: between its own tp collectives
}

void moe_experts(Emit& k, const KernelPlan& p, const Dims& x, bool backward) {
  const MoeDims d = moe_dims(p, x);
  const bool swiglu = p.model.mlp == scenario::Mlp::swiglu;
  const long long up = swiglu ? 2 * d.fi : d.fi;
  const double intermediate = d.copies * static_cast<double>(d.fi);
  if (!backward) {
    k.fp8_cast("expert-input-cast", d.copies * x.h, false);
    k.expert(swiglu ? "expert-gate-up" : "expert-up", d.routed, up, x.hi, d.local);
    k.memory(swiglu ? "expert-swiglu" : "expert-bias-gelu", (swiglu ? 3.0 : 2.0) * intermediate * x.e);
    k.fp8_cast("expert-down-input-cast", intermediate, true);
    k.expert("expert-down", d.routed, x.hi, d.fi, d.local);
  } else {
    k.fp8_cast("expert-down-grad-cast", d.copies * x.h, false);
    k.expert("expert-down-dgrad", d.routed, d.fi, x.hi, d.local);
    k.expert_wgrad("expert-down-wgrad", d.fi, x.hi, d.routed, d.local);
    k.memory(swiglu ? "expert-swiglu-bwd" : "expert-bias-gelu-bwd", (swiglu ? 5.0 : 3.0) * intermediate * x.e);
    k.fp8_cast("expert-up-grad-cast", d.copies * static_cast<double>(up), true);
    k.expert("expert-up-dgrad", d.routed, x.hi, up, d.local);
    k.expert_wgrad("expert-up-wgrad", up, x.hi, d.routed, d.local);
  }
}

void moe_finish(Emit& k, const KernelPlan& p, const Dims& x, bool backward) {
  const MoeDims d = moe_dims(p, x);
  if (!backward) {
    k.memory("moe-unpermute", (1.0 + d.copies / x.T) * x.Tl * x.h * x.e);
    residual_forward(k, p, x);
  } else {
    k.memory("moe-permute-bwd", (1.0 + d.copies / x.T) * x.Tl * x.h * x.e);
    k.memory("router-softmax-bwd", 3.0 * x.Tl * d.experts * 4.0);
    const long long routed_here = p.sequence_parallel ? x.Ti / p.tp : x.Ti;
    k.gemm("router-dgrad", routed_here, x.hi, p.model.experts);
    k.wgrad("router-wgrad", p.model.experts, x.hi, routed_here);
    layer_norm_backward(k, p, x);
  }
}

}  // namespace detail

MoeKernels moe_kernels(const KernelPlan& p, bool backward) {
  using namespace detail;
  const Dims x = dims_of(p);
  MoeKernels out;
  Emit k(p);
  moe_prepare(k, p, x, backward);
  out.prepare = k.take();
  if (p.tp > 1) {
    shared_experts(k, p, x, backward);
    out.shared = k.take();
  }
  moe_experts(k, p, x, backward);
  out.experts = k.take();
  moe_finish(k, p, x, backward);
  out.finish = k.take();
  return out;
}

}  // namespace parasim::workload
