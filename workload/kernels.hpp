// The kernels a real implementation launches for each compute op: what Megatron-LM runs
// on a GPU for one layer pass, the embedding, the LM head with its cross-entropy, and the
// optimizer. The simulator times each kernel on the device (sim/compute_model.hpp) and
// charges the host for launching it; the op's FLOPs for the report stay the model's.
//
// A layer's forward, per tensor-parallel rank, for T = b·s tokens (T/tp in the parts that
// sequence parallelism shards), hidden h, q = h/tp and kv = kv_heads·d/tp columns, MLP
// width f = ffn/tp, A = b·(a/tp)·s² attention scores, element size e:
//
//   attention  layer norm (2Th·e) | QKV GEMM (T, q+2kv, h) | [rotary on q and k (LLaMA)]
//              naive: q/k layout copy, scores GEMM (s, s, d) x b·a/tp, scale-mask-softmax
//                     (2A·e), dropout (2A·e + A), context GEMM (s, d, s) x b·a/tp, context
//                     permute copy (2Tq·e)
//              flash: one FlashAttention kernel (causal: half the score FLOPs)
//              output GEMM (T, h, q) | bias-dropout-add (3Th·e + Th)
//   MLP        layer norm | up GEMM (T, f or 2f, h) | bias-GeLU (2Tf·e) or SwiGLU (3Tf·e) |
//              down GEMM (T, h, f) | bias-dropout-add
//
// Backward runs each GEMM twice (data gradient (T, k, n), weight gradient (n, k, T)), the
// weight gradient accumulating into the main gradient in its dtype (Megatron's gradient
// accumulation fusion: the wgrad GEMM reads and writes main_grad, --gradient-accumulation-
// fusion on by default in megatron/training/arguments.py; elsewhere the kernels of
// accumulate_bytes after it), each element-wise kernel's backward (about 1.5x its traffic),
// the bias gradients' reductions, the layer norms' two backward kernels and the residual
// gradient's add. GPT (GeLU) layers have dropout and biases; LLaMA (SwiGLU) layers have
// neither and use rotary embeddings.
//
// fp8 (Transformer Engine): the four linear layers' GEMMs (forward, data and weight
// gradients) take FP8 operands at the device's fp8 rate and write 16-bit outputs; each
// GEMM input is cast to FP8 in both layouts (the transpose feeds the weight gradient):
// fused into the layer norm and the activation (and its backward), a cast-transpose kernel
// of its own for the attention output and the gradients entering the projection, MLP-down
// and QKV backward; current scaling adds an amax pass before every cast. The weights are
// cast once per step (weight_cast_kernels). Attention, the LM head and everything else
// stay in bf16.
//
// The LM head computes logits (T, V/tp, h) and Megatron's vocabulary-parallel
// cross-entropy on an fp32 copy of them (cast, max, subtract, exp, sum, divide: 38 bytes
// per logit forward from 16-bit logits, 14 backward). The optimizer is Megatron's mixed
// precision step as multi-tensor kernels over the rank's parameters (optimizer_kernels).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "workload/accounting.hpp"
#include "scenario/scenario.hpp"

namespace parasim::workload {

enum class KernelKind : std::uint8_t { gemm, memory, flash_forward, flash_backward };

struct Kernel {
  KernelKind kind = KernelKind::memory;
  std::string_view name;  // a static name
  // gemm: C[m x n] = A[m x k] · B[k x n], `batch` times. flash_*: m = n = s (query and key
  // lengths), k = head dim, batch = b·heads.
  long long m = 0, n = 0, k = 0, batch = 1;
  int element = 2;         // bytes per A, B (and C unless accumulating or `out`) element
  int accumulate = 0;      // gemm: C is read and written in this many bytes per element (0: written in `element`)
  double bytes = 0.0;      // memory: bytes moved
  bool causal = false;     // flash_*: only the lower triangle is computed
  bool fp8 = false;        // gemm: FP8 operands (1 byte each) at the device's fp8 rate, C in `element`
  bool v1 = false;         // flash_*: FlashAttention's first generation (KernelSpec::flash_v1_*)
  bool v2 = false;         // flash_*: FlashAttention-2 itself (KernelSpec::flash_v2_*)

  [[nodiscard]] double flops() const;      // the arithmetic the kernel performs
  [[nodiscard]] double io_bytes() const;   // its minimum memory traffic
};

// How the implementation runs a layer, from the scenario.
struct KernelPlan {
  scenario::ModelSpec model;
  int micro_batch = 1;
  int tp = 1;
  int cp = 1;               // context parallelism: this rank runs b·s/cp of the positions
  bool sequence_parallel = false;
  int element = 2;          // activation bytes
  int grad_element = 2;     // main-gradient bytes (weight gradients accumulate into them)
  scenario::Framework framework = scenario::Framework::megatron_core;
  // Megatron-LM and Megatron-Core's wgrad GEMMs accumulate into the main gradient; the other
  // frameworks' write the gradient and add it after (accumulate_bytes).
  [[nodiscard]] bool fused_grad_accumulation() const {
    return scenario::megatron_kernels(framework);
  }
  // TorchTitan's Llama (SwiGLU) layers without torch.compile (training.compile false, its
  // default): RMSNorm, rotary embeddings and SwiGLU run as PyTorch's eager ops, a kernel per
  // op with fp32 intermediates (kernels_norms.cpp, kernels_mlp.cpp); compiled, Inductor
  // fuses each chain into one kernel, as the other frameworks' fused kernels do.
  bool compiled = false;
  [[nodiscard]] bool eager_elementwise() const {
    return framework == scenario::Framework::torchtitan && !compiled && model.mlp == scenario::Mlp::swiglu;
  }
  bool flash = true;        // FlashAttention rather than the unfused attention core
  bool flash_v1 = false;    // its first generation (scenario::Attention::flash_v1)
  bool flash_v2 = false;    // FlashAttention-2 itself (scenario::Attention::flash_v2)
  // Unfused attention: Megatron's fused scale-mask-softmax kernel takes the shape (see
  // fused_softmax_available); else PyTorch's softmax runs, in fp32 with casts around it.
  bool fused_softmax = true;
  // fp16: Megatron scales the query-key products by the layer number before the softmax
  // (apply_query_key_layer_scaling, on for fp16); PyTorch's softmax path multiplies by it
  // in a kernel of its own each way, the fused kernel takes it as an argument.
  bool qk_layer_scaling = false;
  bool loss_scale = false;  // fp16 with dynamic loss scaling: the loss is multiplied by the scale
  bool dropout = true;      // model.dropout > 0 (GPT's default; LLaMA trains without)
  // fp8 (Transformer Engine): the linear layers' GEMMs in FP8; current scaling adds an amax
  // pass before each cast.
  bool fp8 = false;
  bool fp8_current = false;
  bool biases = true;       // GPT's linear layers have biases (GeLU MLP); LLaMA's none
  // Mixture of experts: the local experts (experts / ep) and the busiest rank's load.
  int ep = 1;
  double expert_load = 1.0;
  // A generic model's BatchNorm: the ranks whose statistics are merged (SyncBN: dp; else 1).
  int bn_members = 1;
};

KernelPlan kernel_plan(const scenario::Scenario& s);
// The memory kernels a framework runs per micro-batch, per weight-gradient value, to
// accumulate it when its wgrad GEMM does not (name, bytes per value), from its source:
//   megatron-deepspeed  DeepSpeed's pipeline engine around each micro-batch's backward
//                       (deepspeed/runtime/pipe/engine.py, _exec_backward_pass): the BF16
//                       optimizer's clear_lp_grads() zeroes the 16-bit grads (e bytes),
//                       autograd's AccumulateGrad adds the new gradient in place (2e read,
//                       e written), update_hp_grads() casts it to fp32 (e read, 4 written)
//                       and adds that into the fp32 gradient (8 read, 4 written;
//                       deepspeed/runtime/bf16_optimizer.py). With 16-bit main gradients
//                       (fp16's optimizer) only autograd's in-place add.
//   pytorch-fsdp,       each micro-batch's gradient is reduce-scattered as it is (FSDP's
//   torchtitan          post-backward hook) and what accumulates is the rank's 1/dp shard:
//                       nothing here (the sync's kernels hold it).
//   megatron-*          fused: nothing.
std::vector<std::pair<std::string_view, double>> accumulate_bytes(const KernelPlan& p);
// The same plan for layers built from `spec` (ModelSpec::layer_spec: a mixture of experts'
// dense first layers): its model and routing load.
KernelPlan layer_kernel_plan(const KernelPlan& p, const scenario::ModelSpec& spec);
// Megatron's FusedScaleMaskSoftmax.is_kernel_available for a causal mask: 16-bit input,
// 16 < s <= 16384, s % 4 == 0, and b·heads/tp a multiple of 4 and of the kernel's batches
// per block (4 for s > 128: 128 threads, one warp per row; 8 at or below). Elsewhere (fp32
// too, which Megatron never fuses) the model keeps one fused kernel, as parasim's executor
// runs it.
bool fused_softmax_available(int element_bytes, int seq_len, long long attention_batches);

enum class LayerPart : std::uint8_t { whole, attention, mlp, attention_core };
// The kernels of one pass over a layer part; `backward` false is the forward (and a
// recompute). attention_core is what selective recompute runs again (forward only): the
// attention core (Megatron's --recompute-granularity selective), or under TorchTitan
// op_level_recompute_kernels.
std::vector<Kernel> layer_kernels(const KernelPlan& p, LayerPart part, bool backward);
// TorchTitan's selective activation checkpointing (its default for Llama, [activation_
// checkpoint] mode "selective", selective_ac_option "op"): the layer reruns its forward in
// backward, but torch.utils.checkpoint's policy keeps the outputs of the ops in its save
// list (mm, the SDPA / flash kernels, reduce-scatter) except every second mm
// (torchtitan/models/llama3/infra/parallelize.py, _apply_ac_to_transformer_block's
// _custom_policy: `func == torch.ops.aten.mm.default and meta[mm_count_key] % 2 == 0`
// recomputes). So the recompute is every element-wise kernel of the layer (norms, rotary,
// SwiGLU, residual adds) and its even-numbered GEMMs: wk, wo and w3 under SwiGLU. Dense
// layers only (not MoE or MLA, whose op order differs): elsewhere Megatron's core.
bool op_level_recompute(const KernelPlan& p);
std::vector<Kernel> op_level_recompute_kernels(const KernelPlan& p);
// A layer half (attention or MLP) split for tensor-parallel communication overlap
// (ParallelPlan::tp_comm_overlap) as Transformer Engine's defaults run it: the all-gathers
// as ring exchanges (forward before QKV and MLP-up; backward before the projection's and
// MLP-down's data gradients), the forward reduce-scatters pipelined over `splits` blocks of
// the projection and MLP-down GEMMs, the backward ones in bulk under the weight gradients.
//   prepare    before the ring: the layer norm of this rank's rows forward; the dropout's
//              and bias's backward on them
//   column     one ring block (1/tp of the tokens) of the GEMM the ring feeds
//   middle     between: the attention core or the activation; backward also the
//              row-parallel layer's weight and bias gradients
//   row        forward one of the `splits` blocks of the projection or MLP-down GEMM;
//              backward the QKV's or MLP-up's whole data gradient
//   row_last   forward the last block, with what follows the sum (the residual add)
//   wgrad      backward, under the reduce-scatter: the QKV's or MLP-up's weight and bias
//              gradients, then what follows the sum (the layer norm's backward)
struct OverlapKernels {
  std::vector<Kernel> prepare, column, middle, row, row_last, wgrad;
};
OverlapKernels overlap_kernels(const KernelPlan& p, LayerPart half, bool backward, int splits);
// Transformer Engine's pipelined reduce-scatter splits (4), fewer where they would not
// divide a rank's b·s/tp rows evenly.
int overlap_splits(const KernelPlan& p);
// The attention half under context parallelism (ParallelPlan::cp > 1, FlashAttention) split
// around its ring (Transformer Engine's ring attention with load-balanced causal chunks):
//   prepare  forward everything before the attention core (layer norm, QKV GEMM, rotary);
//            backward everything after it in forward order, then FlashAttention's dO·O
//            row sums
//   first    ring step 0: this rank's queries against its own keys, the causal diagonal
//            (b·s/cp queries and keys, causal)
//   block    each later step: a half of one side against the other whole (b·s/cp queries
//            against s/2cp keys, or half the queries against all; no mask), the same work
//   merge    backward after each later block: the key and value gradients received added
//            to this rank's share
//   finish   forward the projection and residual; backward dQ's conversion, rotary and
//            the QKV GEMM's gradients, the layer norm's backward
struct ContextKernels {
  std::vector<Kernel> prepare, first, block, merge, finish;
};
ContextKernels context_kernels(const KernelPlan& p, bool backward);
// fp8: the layer part's linear weights cast to FP8 (both layouts), which Transformer Engine
// does in a step's first micro-batch and caches for the others; empty in other precisions.
std::vector<Kernel> weight_cast_kernels(const KernelPlan& p, LayerPart part);
// The MLP half of a mixture-of-experts layer (Megatron-Core's MoE layer with its all-to-all
// token dispatcher) split around its two all-to-alls. With R = ceil(ep·T·top_k·load/E)
// tokens per local expert and E/ep local experts:
//   prepare  forward: the layer norm, the router GEMM (T', E, h: T' = T/tp under sequence
//            parallelism, which tp needs here), its softmax and top-k (fp32), the
//            permutation of the T' tokens into T'·top_k·load copies in expert order;
//            backward: the residual's gradient and the output gradient's
//            permutation into expert order with the router probabilities' gradient (a dot
//            product per copy with the expert's output)
//   experts  the local experts' grouped GEMMs, each over R tokens (up / gate-up, the
//            activation, down; backward their data and weight gradients)
//   finish   forward: the weighted sum of each token's copies back in token order, the
//            residual add; backward: the copies' gradients summed back into token order,
//            the router's softmax, data and weight gradients, the layer norm's backward
// Without expert parallelism the three run as one op (layer_kernels' MLP).
struct MoeKernels {
  std::vector<Kernel> prepare, experts, finish;
  // With tp > 1 the shared experts' MLP, a piece of its own between its all-gather and
  // reduce-scatter over tp (in prepare otherwise).
  std::vector<Kernel> shared;
};
MoeKernels moe_kernels(const KernelPlan& p, bool backward);
// A generic layer as its GEMM equivalent (accounting.hpp): the GEMM and its activations
// written; backward, the data and weight gradients and the activations' gradient. With
// BatchNorm (GenericLayer::batch_norm: n layers of C channels normalising V values per
// sample, each its V/n), per BN layer and micro-batch of b samples, e bytes per value, what
// PyTorch's CUDA BatchNorm (and SyncBatchNorm) launches:
//   forward   statistics (reads b·V/n·e: each channel's mean and variance); the
//             normalisation (reads and writes b·V/n·e)
//   backward  the reduction (reads dy and x: Σdy, Σdy·x̂, the scale's and shift's
//             gradients); the input gradient (reads dy and x, writes dx)
// SyncBatchNorm adds its small kernels: forward the statistics and count packed into one
// buffer before the all-gather, after it the empty members' statistics masked out (a
// host synchronisation, see compile_layers.cpp) and the merge
// (batch_norm_gather_stats_with_counts); backward the two sums packed before the
// all-reduce.
// The GEMM comes first forward (its gradients last backward), the rest of the layer's
// element-wise work (`activations` values) after the BatchNorms.
//
// `piece`: whole_layer; recompute_layer (a recompute's forward, normalising with the
// statistics its forward kept: no statistics kernels); or under SyncBN
// (KernelPlan::bn_members > 1) piece k of the n + 1 the collectives split a pass into:
//   forward  k: [k = 0: the GEMM] [k > 0: BN k-1's merge and normalisation]
//               [k < n: BN k's statistics] [k = n: the element-wise rest]
//   backward k: [k = n: the element-wise rest's gradient] [k < n: BN k's input gradient]
//               [k > 0: BN k-1's reduction] [k = 0: the GEMM's gradients]
// between piece k and k + 1 forward BN k's statistics are gathered over the dp replicas,
// between piece k and k - 1 backward BN k-1's sums are summed (run in order n, ..., 0).
inline constexpr int whole_layer = -1;
inline constexpr int recompute_layer = -2;
std::vector<Kernel> generic_layer_kernels(const KernelPlan& p, const scenario::GenericLayer& layer, bool backward,
                                          int piece = whole_layer);
// Word (and learned position) embedding lookup, its dropout; backward: the embedding's
// gradient, accumulated into the main gradient.
std::vector<Kernel> embedding_kernels(const KernelPlan& p, bool backward);
// Final layer norm, LM head GEMM and the vocabulary-parallel cross-entropy (fp32).
std::vector<Kernel> head_kernels(const KernelPlan& p, bool backward);
// Megatron's optimizer step over `params` parameters held by the rank (its ZeRO shard):
// main gradients to fp32 (when they are 16-bit), unscale and overflow check (fp16),
// gradient norm, AdamW (or SGD with momentum), new 16-bit weights, zeroed gradients.
std::vector<Kernel> optimizer_kernels(const scenario::Scenario& s, double params);

}  // namespace parasim::workload
