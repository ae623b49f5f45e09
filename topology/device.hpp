// A compute device as the cost models see it: peak dense FLOP rate per data type, memory
// capacity and memory bandwidth. Figures for the presets are the vendors' datasheet values
// (dense, no sparsity); a measured profile from `parasim calibrate` refines them later.
#pragma once

#include <cmath>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace parasim::topology {

// fp8, as a training precision, is Transformer Engine's FP8 training: the linear layers'
// GEMMs in FP8 (E4M3 forward, E5M2 for gradients), everything else, and what is stored,
// in bf16 (storage_dtype).
enum class Dtype { fp32, tf32, bf16, fp16, fp8 };
inline constexpr std::array<Dtype, 5> all_dtypes{Dtype::fp32, Dtype::tf32, Dtype::bf16, Dtype::fp16, Dtype::fp8};
inline constexpr std::size_t dtype_count = all_dtypes.size();

std::string_view to_string(Dtype d);
std::optional<Dtype> dtype_from_string(std::string_view s);
// Bytes of one element stored in this type (tf32 is stored as fp32, fp8 in one byte).
int dtype_bytes(Dtype d);
// The type a training precision keeps its weights, activations and element-wise work in:
// bf16 under fp8, else the precision itself.
Dtype storage_dtype(Dtype precision);

// How the device runs kernels, for the kernel-level compute model (sim/compute_model.hpp).
// sms = 0 means no such model (a CPU core): ops are then timed from their GEMMs and bytes.
struct KernelSpec {
  int sms = 0;                     // streaming multiprocessors: GEMM tiles run in waves of this many
  double gemm_efficiency = 0.0;    // fraction of the peak a large tile's main loop sustains
  double l2_bandwidth = 0.0;       // bytes/s the tiles load operands at (smaller tiles need more per FLOP)
  double memory_efficiency = 0.0;  // fraction of memory_bandwidth a streaming kernel reaches
  double launch = 0.0;             // GPU seconds per kernel besides its work (launch, ramp, tail)
  double flash_forward = 0.0;      // FlashAttention-2's fraction of the peak, forward
  double flash_backward = 0.0;     // and backward
  double flash_v2_forward = 0.0;   // FlashAttention-2's (flash-attn 2.x, PyTorch SDPA's flash backend), forward
  double flash_v2_backward = 0.0;  // and backward
  double flash_v1_forward = 0.0;   // FlashAttention-1's (flash-attn 1.x, its Triton port), forward
  double flash_v1_backward = 0.0;  // and backward
  // SMs a running NCCL collective holds: each of its channels is one thread block resident on
  // an SM for the collective's whole length, so compute beside it runs on the rest
  // (sim/simulate.cpp). 0: collectives take nothing from compute.
  int collective_sms = 0;

  [[nodiscard]] bool present() const { return sms > 0; }
};

// The host and framework that drive the device (PyTorch in eager mode under Megatron-LM):
// seconds of host time to issue each kernel or communication call. The device waits when
// its kernels are shorter than the host takes to issue them.
struct HostSpec {
  double forward = 0.0;        // per kernel of a forward (or recompute) pass, issued from Python
  double backward = 0.0;       // per kernel of a backward pass, issued by autograd
  double communication = 0.0;  // per collective or point-to-point call (torch.distributed)
};

struct DeviceSpec {
  std::string name;
  std::array<double, dtype_count> peak_flops{};  // FLOP/s per Dtype; 0 = not supported
  double memory_bytes = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s
  // Memory the runtime takes before the model: the CUDA context with the libraries' kernels
  // and cuBLAS's workspaces (NCCL's buffers are counted per communicator,
  // workload/memory.hpp).
  double workspace_bytes = 1024.0 * 1024 * 1024;
  // The share of the memory a plan must leave free: the caching allocator's fragmentation
  // (reserved over allocated) and what no model counts; `fits` means within the rest.
  double headroom = 0.05;
  KernelSpec kernels;
  HostSpec host;
  // The board's power limit as shipped (TDP) and the one it runs under (a site may cap it:
  // `nvidia-smi -pl`); 0: not stated, never capped.
  double tdp = 0.0;          // watts
  double power_limit = 0.0;  // watts
  // The clock a compute-bound kernel sustains under the cap, over the uncapped one. A
  // kernel's dynamic power is C·V²·f and across the DVFS range the voltage follows the
  // clock, so power goes as f³: the cap allows (limit / tdp)^(1/3) of the clock. Counting
  // the whole board power as dynamic makes this the mildest slowdown the cap can cause
  // (memory and static power do not scale). The SMs and the L2 slow by it; memory bandwidth
  // keeps its own clock.
  [[nodiscard]] double clock_factor() const {
    if (tdp <= 0.0 || power_limit <= 0.0 || power_limit >= tdp) return 1.0;
    return std::cbrt(power_limit / tdp);
  }

  [[nodiscard]] double peak(Dtype d) const { return peak_flops[static_cast<std::size_t>(d)]; }
  [[nodiscard]] bool supports(Dtype d) const { return peak(d) > 0.0; }
};

}  // namespace parasim::topology
