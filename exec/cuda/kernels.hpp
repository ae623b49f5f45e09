// The CUDA backend's kernels: the host kernels' operations (model/kernels.hpp, the CPU
// backend's) on device memory, each enqueued on a stream. Row-major, fp32. Backward
// kernels add into gradients where the Device interface says so (device.hpp). This header
// is plain C++17 so both nvcc and the C++20 backend include it.
//
// Reductions over rows (layer norm, softmax, cross-entropy) run one block per row; the
// column sums (layer norm's dgamma / dbeta, bias gradients, the position embedding's
// gradient, the cyclic bias's) one thread per column walking the rows in order, so they
// are deterministic. The token embedding's gradient adds rows of repeated tokens with
// atomics: its last bits depend on their order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/model/batch_norm.hpp"

namespace parasim::exec::cuda {

void layer_norm_forward(cudaStream_t s, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                        const float* beta, int n, int c);
void layer_norm_backward(cudaStream_t s, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                         const float* mean, const float* rstd, const float* gamma, int n, int c);
void gelu_forward(cudaStream_t s, float* y, const float* x, std::int64_t count);
void gelu_backward(cudaStream_t s, float* dx, const float* x, const float* dy, std::int64_t count);
void causal_softmax_forward(cudaStream_t s, float* p, const float* in, int batch, int t, float scale);
// pre = round(pre + bias[column]), act = round(gelu(pre)) in one pass; format 0: no
// rounding, 1: bf16, 2: fp16 (as round_bf16 / round_fp16).
void bias_gelu_forward(cudaStream_t s, float* pre, float* act, const float* bias, int n, int c, int format);
void causal_softmax_backward(cudaStream_t s, float* ds, const float* p, const float* dp, int batch, int t, float scale);
// FlashAttention's algorithm (kernels::flash_attention_*): a warp per query row (forward,
// dq) or key row (dk, dv), the other side's rows walked in order; head size at most 256.
void flash_attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h, int d);
void flash_attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* out, const float* qkv,
                              const float* lse, int b, int t, int h, int d);
// The same on tensor cores (attention_tc.cu; exec/model/flash_tiled.hpp's algorithm and
// roundings), operands rounded to bf16 (format 1) or fp16 (2). Whether this GPU takes the
// head size and format; the calls return false (and launch nothing) where it does not.
// `delta` is scratch of b x h x t floats.
bool flash_attention_tc_supported(int d, int format);
bool flash_attention_tc_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int b, int t, int h, int d,
                                int format);
bool flash_attention_tc_backward(cudaStream_t s, float* dqkv, float* delta, const float* dout, const float* out,
                                 const float* qkv, const float* lse, int b, int t, int h, int d, int format);
void add_bias(cudaStream_t s, float* out, const float* bias, int n, int c);
void bias_backward(cudaStream_t s, float* dbias, const float* dout, int n, int c);
void add(cudaStream_t s, float* y, const float* a, const float* b, std::int64_t count);
void accumulate(cudaStream_t s, float* y, const float* x, std::int64_t count);
void scale(cudaStream_t s, float* y, float alpha, std::int64_t count);
void embedding_forward(cudaStream_t s, float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b,
                       int t, int c, int v0, int vn);
void embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b,
                        int t, int c, int v0, int vn);
void cross_entropy_stats(cudaStream_t s, float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                         int v0);
void cross_entropy_backward(cudaStream_t s, float* dlogits, float* loss, const float* logits, const float* all_stats,
                            int parts, const std::int32_t* targets, int n, int vn, int v0, float scale);
void resample_forward(cudaStream_t s, float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu);
void resample_backward(cudaStream_t s, float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                       const float* relu_input);
void add_cyclic(cudaStream_t s, float* y, std::int64_t count, const float* bias, std::int64_t nb);
void moe_permute(cudaStream_t s, float* y, const float* x, const float* pos, const float* scale, int n, int k, int c);
void moe_unpermute(cudaStream_t s, float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                   bool accumulate);
void cyclic_backward(cudaStream_t s, float* dbias, std::int64_t nb, const float* dy, std::int64_t count);
// BatchNorm (model/batch_norm.hpp, kernels::bn_*) over a BnShape's values. The per-channel
// reductions run one block per channel, its threads' partial sums (in double) combined in a
// fixed tree: deterministic.
void bn_stats(cudaStream_t s, float* stats, const float* x, const BnShape& g);
void bn_merge(cudaStream_t s, float* mean_invstd, const float* gathered, int members, const BnShape& g, double eps);
void bn_normalize(cudaStream_t s, float* y, const float* x, const float* mean_invstd, const float* gamma,
                  const float* beta, const BnShape& g);
void bn_backward_reduce(cudaStream_t s, float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* mean_invstd, const BnShape& g);
void bn_backward_input(cudaStream_t s, float* dx, const float* dy, const float* x, const float* mean_invstd,
                       const float* gamma, const float* sums, double total_samples, const BnShape& g);
// One AdamW step (bias-corrected, decoupled weight decay; `step` from 1), in fp32.
void adamw(cudaStream_t s, float* param, const float* grad, float* m, float* v, std::int64_t count, float lr,
           float beta1, float beta2, float eps, float weight_decay, int step);
// The same with 8-bit moments (exec/model/adam8bit.hpp): one CUDA block per block of 2048.
void adamw8bit(cudaStream_t s, float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max,
               float* v_max, std::int64_t count, float lr, float beta1, float beta2, float eps, float weight_decay,
               int step);
// Rounds to the nearest bf16 / fp16 value (ties to even), kept in fp32.
void round_bf16(cudaStream_t s, float* y, std::int64_t count);
void round_fp16(cudaStream_t s, float* y, std::int64_t count);
// 16-bit storage (Device::pack_16): format 1 bf16, 2 fp16; rounded to nearest even.
void pack_16(cudaStream_t s, std::uint16_t* y, const float* x, std::int64_t count, int format);
void unpack_16(cudaStream_t s, float* y, const std::uint16_t* x, std::int64_t count, int format);
// Device::fake_quantize_fp8: the largest magnitude into *amax (as float bits), then the
// quantization; `amax` is device scratch of one word.
void fake_quantize_fp8(cudaStream_t s, unsigned int* amax, float* y, const float* x, std::int64_t count, bool e5m2);
// FP8 GEMMs on tensor cores (fp8_gemm.cpp): scales = {scale, 1 / scale}, from a tensor's
// largest magnitude (float bits, as fake_quantize_fp8 leaves it) or given; and an operand
// cast to FP8 codes at scales[0], rows x cols from src (row r at src + r * ld, or column r
// when `transposed`) into out, row-major and contiguous.
void fp8_scales_from_amax(cudaStream_t s, float* scales, const unsigned int* amax, bool e5m2);
void fp8_set_scales(cudaStream_t s, float* scales, float scale);
void fp8_cast_gather(cudaStream_t s, std::uint8_t* out, const float* src, int ld, int rows, int cols, bool transposed,
                     const float* scales, bool e5m2);
// Device::fake_quantize_fp8_scaled: at a given scale; x's largest magnitude max-ed into
// *amax (float bits: non-negative floats order as their bits).
void fake_quantize_fp8_scaled(cudaStream_t s, unsigned int* amax, float* y, const float* x, std::int64_t count,
                              bool e5m2, float scale);
// Ring attention (exec/model/ring_attention.hpp's layouts; cuda/ring_attention.cu), the
// positions qpos [tq] and kpos [tk] in device memory.
void kv_pack(cudaStream_t s, float* kv, const float* qkv, std::int64_t rows, int c);
void kv_unpack_add(cudaStream_t s, float* dqkv, const float* dkv, std::int64_t rows, int c);
void ring_attention_begin(cudaStream_t s, float* acc, float* m, float* l, int b, int tq, int h, int d);
void ring_attention_block(cudaStream_t s, float* acc, float* m, float* l, const float* qkv, const float* kv,
                          const int* qpos, const int* kpos, int b, int tq, int tk, int h, int d);
void ring_attention_end(cudaStream_t s, float* out, float* lse, const float* acc, const float* m, const float* l, int b,
                        int tq, int h, int d);
void ring_attention_block_backward(cudaStream_t s, float* dqkv, float* dkv, const float* dout, const float* out,
                                   const float* qkv, const float* kv, const float* lse, const int* qpos,
                                   const int* kpos, int b, int tq, int tk, int h, int d);
// *counter = how many of x[0, count) are infinite or NaN (counter in device memory).
void count_nonfinite(cudaStream_t s, unsigned long long* counter, const float* x, std::int64_t count);
// *sum = the sum of x[i]^2 in double (each warp's part added atomically).
void sum_squares(cudaStream_t s, double* sum, const float* x, std::int64_t count);

}  // namespace parasim::exec::cuda
