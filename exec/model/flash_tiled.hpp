// FlashAttention-2's tiled algorithm (Dao, "FlashAttention-2", 2023, Algorithms 1 and 2) as
// the CUDA backend's tensor-core kernels run it (exec/cuda/attention_tc.cu): the host model
// those kernels are checked against, and that is itself checked against the untiled
// reference (kernels::flash_attention_*).
//
// Causal attention over qkv [b, t, 3, h, d] (fp32 storage), out [b, t, h, d], lse [b, h, t],
// scale 1 / sqrt(d). Queries go in tiles of tile_q rows, keys in tiles of tile_k; a query
// tile visits only the key tiles at or before its diagonal (the others are all masked).
//
// Forward, per query tile: for each key tile S = Q K^T (fp32 accumulation), the running
// row maximum m and sum l over exp(scale S - m), the output rescaled by exp(m_old - m_new)
// and P V added; at the end O / l and lse = m + log l.
// Backward, deterministic: P = exp(scale Q K^T - lse) recomputed, dP = dO V^T,
// dS = P (dP - D) with D_i = dO_i . O_i; dV = P^T dO and dK = scale dS^T Q accumulated per
// key tile over its query tiles, dQ = scale dS K per query tile over its key tiles (two
// passes, so that no value is summed by two thread blocks at once).
//
// Tensor cores multiply 16-bit operands with fp32 accumulation, so with format 1 (bf16) or
// 2 (fp16) every GEMM operand is rounded to that format first: Q, K, V, dO as loaded, P
// before P V and P^T dO, dS before dS K and dS^T Q. The row sums l and D stay fp32, as in
// FlashAttention-2. Format 0 rounds nothing: the same values as the untiled reference to
// fp32's rounding, which is what tests the tiling (online softmax across tiles, causal
// skipping, partial tiles). Only the order of the sums inside a tensor-core GEMM differs
// between this model and the kernels.
#pragma once

namespace parasim::exec::flash_tiled {

inline constexpr int tile_q = 64;
inline constexpr int tile_k = 64;

void forward(float* out, float* lse, const float* qkv, int b, int t, int h, int d, int format);
// Writes every entry of dqkv.
void backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse, int b, int t, int h,
              int d, int format);

}  // namespace parasim::exec::flash_tiled
