// Memory per rank for one training step, and whether it fits.
//
// Per parameter held by a rank (P_r = its stage's layers / tp, plus the embedding on the
// first stage and the LM head on the last):
//   weights      2 bytes (bf16/fp16) or 4 (fp32/tf32)
//   gradients    the main gradients in training.grad_dtype: 4 bytes under bf16 (Megatron-LM's
//                fp32 main gradients), else the weights' size (2 or 4)
//   master       4 bytes of fp32 master weights when training in 16 bits, else none
//   optimizer    AdamW 8 bytes (two fp32 moments); SGD 4 (fp32 momentum); AdamW8bit 2 (two
//                byte codes) and two fp32 block maxima per 2048
// ZeRO-1 divides master weights and optimizer state over the dp ranks; ZeRO-2 also the
// gradients, plus two units whole (workload/buckets.hpp's sources: a layer, the embedding or
// the LM head; the largest counted), one being computed and one in its reduce-scatter;
// ZeRO-3 also the weights, plus two units whole (the one computing and the one prefetched).
// Mixed-precision
// AdamW is then 2 + 2 + 4 + 8 = 16 bytes per parameter without ZeRO with 16-bit gradients
// (fp16), 2 + 4 + 4 + 8 = 18 with fp32 ones (bf16).
//
// Offloading (plan.offload_optimizer): master weights, optimizer state and the gradients
// accumulated in fp32 move to host memory (`host`, per rank, against the rank's share of its
// node's host memory); the device keeps two units' gradients whole in the weights' type (the
// one computing and the one being copied out). offload_params moves the weights too, the device keeping two
// units whole (the one computing and the one being copied in). offload_activations moves
// the activations the stage holds at its peak to host memory but two layers' (the one
// computing and the one in transit).
//
// Activations: the bytes one micro-batch leaves in a model chunk (accounting.hpp, per
// layer, times the chunk's layers; the largest chunk's) for each chunk the stage holds,
// and on the last stage the fp32 logits (sharded over tp) of each micro-batch between its
// LM head's forward and backward. Both are counted by walking the stage's own schedule
// order, and the peak of their sum is reported: under 1F1B the last stage holds one
// micro-batch's logits, under GPipe all m. At that peak a layer's backward also holds its
// transients, counted with the activations: the gradient in and out (T·h each, T·h/tp
// under sequence parallelism) and the MLP's two intermediate gradients (T·f/tp each), and
// under full recompute the layer's recomputed activations. Layer-norm weights are counted as
// sharded with their layer (h of 12h² per layer).
//
// Beside the tensors, what the runtime holds: the workspace (the device's `workspace`: CUDA
// context, the libraries' kernels, cuBLAS's workspaces) and NCCL's buffers (`communicators`,
// nccl_buffer_bytes). A plan fits when the total is within the memory less the device's
// headroom (default 5 %), the share left for the caching allocator's fragmentation and what
// nothing here counts.
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.hpp"

namespace parasim::workload {

struct MemoryBreakdown {
  int stage = 0;
  double parameters = 0.0;  // held by one rank of the stage
  double weights = 0.0;
  double gradients = 0.0;
  double master = 0.0;
  double optimizer = 0.0;
  double activations = 0.0;
  double logits = 0.0;
  double workspace = 0.0;
  double communicators = 0.0;  // NCCL's buffers, per communicator the rank is in
  double host = 0.0;           // in host memory (offloading), not part of total()
  int in_flight = 0;           // (micro-batch, chunk) activations held at the stage's peak
  int logits_in_flight = 0;    // micro-batches whose logits are held then (last stage)

  [[nodiscard]] double total() const { return tensors() + workspace + communicators; }
  // What the framework's tensors hold at the peak: what PyTorch's caching allocator has
  // allocated (its reserved bytes add its fragmentation).
  [[nodiscard]] double tensors() const { return weights + gradients + master + optimizer + activations + logits; }
};

struct MemoryReport {
  std::vector<MemoryBreakdown> stages;  // one per pipeline stage (tp and dp ranks alike)
  double capacity = 0.0;
  double headroom = 0.0;       // the share of capacity a plan leaves free (DeviceSpec::headroom)
  double host_capacity = 0.0;  // a rank's share of its node's host memory; 0: nothing offloaded
  [[nodiscard]] const MemoryBreakdown& peak() const&;
  // On a temporary report (`memory_per_rank(s).peak()`) a copy, never a dangling reference.
  [[nodiscard]] MemoryBreakdown peak() const&& { return static_cast<const MemoryReport&>(*this).peak(); }
  // The stage holding the most in host memory.
  [[nodiscard]] const MemoryBreakdown& host_peak() const&;
  [[nodiscard]] MemoryBreakdown host_peak() const&& { return static_cast<const MemoryReport&>(*this).host_peak(); }
  [[nodiscard]] bool host_fits() const { return host_capacity <= 0.0 || host_peak().host <= host_capacity; }
  // The memory a plan may use: the capacity less the headroom.
  [[nodiscard]] double usable() const { return capacity * (1.0 - headroom); }
  // The usable memory the peak stage leaves free, as a share of the capacity (negative: past it).
  [[nodiscard]] double margin() const { return (usable() - peak().total()) / capacity; }
  [[nodiscard]] bool fits() const { return peak().total() <= usable() && host_fits(); }
};

MemoryReport memory_per_rank(const scenario::Scenario& s);
// "stage 0 needs 93.1 GiB of 80 GiB: weights 7.0 GiB, gradients ..., activations ..."
std::string describe_memory(const MemoryReport& r);

// NCCL's buffers on one rank: per communicator of more than one rank that the plan's
// parallelism creates, one receive connection per channel (the device's collective_sms
// channels) holding each protocol's buffer, SIMPLE 4 MiB, LL128 4,915,200 bytes and LL
// 512 KiB (nccl src/init.cc, DEFAULT_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, DEFAULT_LL_BUFFSIZE);
// pipeline parallelism's send / receive pairs, two channels per peer of SIMPLE buffers
// (NCCL_NCHANNELS_PER_NET_PEER's default 2). 0 on a device with no collective channels.
double nccl_buffer_bytes(const scenario::Scenario& s);

}  // namespace parasim::workload
