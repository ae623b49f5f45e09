// What one transformer layer costs, derived from its parts rather than from summary
// formulas: the GEMMs it runs (shape per tensor-parallel rank) and the tensors it keeps
// for backward. The published closed forms are what the tests check these against:
//
//   FLOPs per step (Narayanan et al. 2021): 72·B·s·l·h²·(1 + s/6h + V/12lh), and
//     96·B·s·l·h²·(1 + s/6h + V/16lh) with full recompute (GPT layout, f = 4h, kv = a).
//   Activations per layer, 16-bit (Korthikanti et al. 2022): s·b·h·(34 + 5·a·s/h);
//     tensor parallel t: s·b·h·(10 + 24/t + 5·a·s/(h·t)); sequence parallel: that /t
//     entirely; selective recompute drops the 5·a·s/h attention term; full recompute
//     keeps only the layer input, 2·s·b·h.
//
// Generalisations beyond the papers, stated here: grouped-query attention narrows the K
// and V projections to kv·d columns; SwiGLU has three MLP GEMMs (gate, up, down) and stores
// gate, up and their product; element sizes follow the precision (2 bytes for bf16/fp16,
// 4 for fp32/tf32), masks are one byte per element.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::workload {

// C[m x n] = A[m x k] · B[k x n], `batch` times (strided-batched for attention).
struct Gemm {
  std::string name;
  long long m = 0;
  long long n = 0;
  long long k = 0;
  long long batch = 1;
  [[nodiscard]] double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  }
  // Memory traffic: read A and B, write C, each element `element_bytes` wide.
  [[nodiscard]] double io_bytes(int element_bytes) const {
    const auto dm = static_cast<double>(m);
    const auto dn = static_cast<double>(n);
    const auto dk = static_cast<double>(k);
    return static_cast<double>(batch) * (dm * dk + dk * dn + dm * dn) * element_bytes;
  }
};

// Sums over a set of GEMMs: FLOPs, and memory traffic with `element_bytes` per element.
double sum_flops(const std::vector<Gemm>& gemms);
double gemm_io_bytes(const std::vector<Gemm>& gemms, int element_bytes);

// Forward GEMMs of one layer for a micro-batch of b samples, on one of tp x cp ranks (each
// cp rank runs s/cp of the positions: its queries against all s keys). Mixture of experts:
// the MLP is the router (T/tp, E, h: with tp, sequence parallelism gives each rank its
// share of the tokens to route) and the E/ep local experts' GEMMs, batched, each over
// ceil(ep·T·top_k·load / E) tokens (the tokens the ep ranks route to it, `load` times an
// even share: ModelSpec::expert_load() on the busiest rank, 1 for the model's FLOPs).
// The attention's GEMMs come first (attention_gemm_count of them: the projections in, the
// core's two, the output projection), then the MLP's. Multi-head latent attention: q-down
// and q-up (or q without a query compression), kv-down and kv-up; the down projections
// over every row on each tp rank, whole.
std::vector<Gemm> layer_forward_gemms(const scenario::ModelSpec& m, int micro_batch, int tp, int cp = 1, int ep = 1,
                                      double load = 1.0);
int attention_gemm_count(const scenario::ModelSpec& m);
// Mixture of experts: the tokens one local expert computes (the GEMMs' m above).
long long expert_tokens(const scenario::ModelSpec& m, int micro_batch, int cp, int ep, double load);
// Forward GEMM of the LM head (logits) for a micro-batch, on one of tp x cp ranks.
Gemm lm_head_gemm(const scenario::ModelSpec& m, int micro_batch, int tp, int cp = 1);

// A generic layer (model.kind: generic) as a GEMM of the same FLOPs and parameters: a
// square weight of side S = floor(sqrt(P)) and rows = round(forward_flops · b / 2S²) per
// micro-batch of b samples, so 2·rows·S² is the layer's forward FLOPs to within one row;
// P is the layer's params less its BatchNorm's scales and shifts. The P − S² left over
// (fewer than 2S + 1) are a bias vector; the executor adds it cyclically to the layer's
// output.
Gemm generic_layer_gemm(const scenario::GenericLayer& layer, int micro_batch);
long long generic_layer_bias(const scenario::GenericLayer& layer);

// Training FLOPs of one step for the whole model and global batch (hardware FLOPs):
// forward, backward (twice the forward) and what recompute runs again (the whole layer
// forward for full, the attention core for selective).
double step_flops(const scenario::ModelSpec& m, int global_batch, scenario::Recompute recompute);

// A tensor kept for backward.
struct StoredTensor {
  std::string_view name;  // a literal
  double elements = 0.0;  // per micro-batch, unsharded
  int bytes_per_element = 2;
  bool tp_sharded = false;      // split over tp ranks by tensor parallelism
  bool attention_core = false;  // the s^2 terms that selective recompute drops
  // Split over tp by sequence parallelism (false: every tp rank holds it whole, as the
  // tokens routed to the experts and the router's probabilities).
  bool sequence_sharded = true;
};

// Mixture of experts: the MLP keeps its input (the router's and the permutation's), the
// router's probabilities (fp32, s·b·E), and per routed token copy (top_k·load of them per
// token on the busiest rank) the expert's input, its intermediates (tp-sharded) and its
// output (for the router's gradient).
// `linear_bytes`: bytes per element of the four linear layers' inputs (1 under fp8, where
// Transformer Engine keeps their FP8 copy for the weight gradient; 0: activation_bytes).
std::vector<StoredTensor> layer_stored_tensors(const scenario::ModelSpec& m, int micro_batch, int activation_bytes,
                                               int linear_bytes = 0);

// Bytes one layer keeps for backward per micro-batch on one rank. Under FlashAttention
// (`flash`) the s² tensors are never stored, as with selective recompute; the kernel keeps
// the softmax's log-sum-exp instead (4 bytes per head and token).
double layer_activation_bytes(const scenario::ModelSpec& m, int micro_batch, int tp, bool sequence_parallel,
                              scenario::Recompute recompute, int activation_bytes, bool flash = false,
                              int linear_bytes = 0);

// Context parallelism: the keys and values of one cp rank's positions for a micro-batch on
// one tp rank (b·s/cp positions, 2·kv_heads·d/tp values each): what one ring step carries.
double cp_kv_block_bytes(const scenario::Scenario& s);

}  // namespace parasim::workload
