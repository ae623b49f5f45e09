// The CUDA Device's compute kernels (exec/cuda/kernels.hpp, attention.cu, ring_attention.cu),
// each launched on the current stream.
#include <cuda_runtime.h>

#include <algorithm>

#include <fmt/format.h>

#include "exec/cuda/check.hpp"
#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/kernels.hpp"

namespace parasim::exec {

// --- kernels -------------------------------------------------------------------------------------

void CudaDevice::layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                    const float* beta, int n, int c) {
  cuda::layer_norm_forward(current_, y, mean, rstd, x, gamma, beta, n, c);
}
void CudaDevice::layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                     const float* mean, const float* rstd, const float* gamma, int n, int c) {
  cuda::layer_norm_backward(current_, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c);
}
void CudaDevice::gelu_forward(float* y, const float* x, std::int64_t count) { cuda::gelu_forward(current_, y, x, count); }
void CudaDevice::gelu_backward(float* dx, const float* x, const float* dy, std::int64_t count) {
  cuda::gelu_backward(current_, dx, x, dy, count);
}
void CudaDevice::bias_gelu_forward(float* pre, float* act, const float* bias, int n, int c, scenario::Dtype dtype) {
  cuda::bias_gelu_forward(current_, pre, act, bias, n, c,
                          dtype == scenario::Dtype::bf16   ? 1
                          : dtype == scenario::Dtype::fp16 ? 2
                                                           : 0);
}
const int* CudaDevice::positions_on_device(std::span<const int> host) {
  auto [it, fresh] = positions_.try_emplace(host.data());
  if (fresh || it->second.bytes() < host.size_bytes()) {
    it->second = allocate(std::max<std::size_t>(host.size_bytes(), 1));
    upload(it->second.i32(), host.data(), host.size_bytes());
  }
  return it->second.i32();
}

void CudaDevice::kv_pack(float* kv, const float* qkv, std::int64_t rows, int c) { cuda::kv_pack(current_, kv, qkv, rows, c); }

void CudaDevice::kv_unpack_add(float* dqkv, const float* dkv, std::int64_t rows, int c) {
  cuda::kv_unpack_add(current_, dqkv, dkv, rows, c);
}

void CudaDevice::ring_attention_begin(float* acc, float* m, float* l, int b, int tq, int heads, int d) {
  cuda::ring_attention_begin(current_, acc, m, l, b, tq, heads, d);
}

void CudaDevice::ring_attention_block(float* acc, float* m, float* l, const float* qkv, const float* kv,
                                      std::span<const int> qpos, std::span<const int> kpos, int b, int heads, int d) {
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  cuda::ring_attention_block(current_, acc, m, l, qkv, kv, positions_on_device(qpos), positions_on_device(kpos), b, tq,
                             tk, heads, d);
  count_attention_flops(b, tq, tk, heads, d, false);
}

void CudaDevice::ring_attention_end(float* out, float* lse, const float* acc, const float* m, const float* l, int b,
                                    int tq, int heads, int d) {
  cuda::ring_attention_end(current_, out, lse, acc, m, l, b, tq, heads, d);
}

void CudaDevice::ring_attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* out,
                                               const float* qkv, const float* kv, const float* lse,
                                               std::span<const int> qpos, std::span<const int> kpos, int b, int heads,
                                               int d) {
  const auto tq = static_cast<int>(qpos.size());
  const auto tk = static_cast<int>(kpos.size());
  cuda::ring_attention_block_backward(current_, dqkv, dkv, dout, out, qkv, kv, lse, positions_on_device(qpos),
                                      positions_on_device(kpos), b, tq, tk, heads, d);
  count_attention_flops(b, tq, tk, heads, d, true);
}

// Tensor cores where the plan computes in 16 bits (fp8 plans run attention in bf16, as
// Transformer Engine's recipes do) and the GPU takes the head size; else the CUDA-core kernels.
int CudaDevice::attention_format() const {
  switch (gemm_precision()) {
    case scenario::Dtype::bf16:
    case scenario::Dtype::fp8: return 1;
    case scenario::Dtype::fp16: return 2;
    default: return 0;
  }
}

void CudaDevice::flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int heads, int d) {
  if (cuda::flash_attention_tc_forward(current_, out, lse, qkv, b, t, heads, d, attention_format())) {
    ++attention_tensor_cores_;
  } else {
    cuda::flash_attention_forward(current_, out, lse, qkv, b, t, heads, d);
    ++attention_cuda_cores_;
  }
  count_attention_flops(b, t, heads, d, false);
}
void CudaDevice::flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv,
                                          const float* lse, int b, int t, int heads, int d) {
  const int format = attention_format();
  if (cuda::flash_attention_tc_supported(d, format)) {
    Buffer delta = allocate_floats(static_cast<std::size_t>(b) * heads * t);  // D_i = dO_i . O_i
    cuda::flash_attention_tc_backward(current_, dqkv, delta.f(), dout, out, qkv, lse, b, t, heads, d, format);
    ++attention_tensor_cores_;
  } else {
    cuda::flash_attention_backward(current_, dqkv, dout, out, qkv, lse, b, t, heads, d);
    ++attention_cuda_cores_;
  }
  count_attention_flops(b, t, heads, d, true);
}

std::string CudaDevice::kernel_paths() const {
  std::string s;
  if (attention_tensor_cores_ + attention_cuda_cores_ > 0) {
    s += fmt::format("fused attention: {} calls on tensor cores, {} on CUDA cores", attention_tensor_cores_,
                     attention_cuda_cores_);
  }
  if (fp8_gemms_ + fp8_fallbacks_ > 0) {
    s += fmt::format("{}FP8 GEMMs: {} on FP8 tensor cores, {} on bf16 ones (a shape, alignment or call cuBLASLt refused)",
                     s.empty() ? "" : "; ", fp8_gemms_, fp8_fallbacks_);
  }
  return s;
}

void CudaDevice::causal_softmax_forward(float* p, const float* s, int batch, int t, float scale) {
  cuda::causal_softmax_forward(current_, p, s, batch, t, scale);
}
void CudaDevice::causal_softmax_backward(float* ds, const float* p, const float* dp, int batch, int t, float scale) {
  cuda::causal_softmax_backward(current_, ds, p, dp, batch, t, scale);
}
void CudaDevice::add_bias(float* out, const float* bias, int n, int c) { cuda::add_bias(current_, out, bias, n, c); }
void CudaDevice::bias_backward(float* dbias, const float* dout, int n, int c) {
  cuda::bias_backward(current_, dbias, dout, n, c);
}
void CudaDevice::add(float* y, const float* a, const float* b, std::int64_t count) { cuda::add(current_, y, a, b, count); }
void CudaDevice::accumulate(float* y, const float* x, std::int64_t count) { cuda::accumulate(current_, y, x, count); }
void CudaDevice::zero(float* y, std::int64_t count) {
  check_cuda(cudaMemsetAsync(y, 0, static_cast<std::size_t>(count) * sizeof(float), current_), "memset");
}
void CudaDevice::scale(float* y, float alpha, std::int64_t count) { cuda::scale(current_, y, alpha, count); }
void CudaDevice::copy(float* y, const float* x, std::int64_t count) {
  check_cuda(cudaMemcpyAsync(y, x, static_cast<std::size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, current_),
             "copy");
}
void CudaDevice::embedding_forward(float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b,
                                   int t, int c, int v0, int vn) {
  cuda::embedding_forward(current_, x, tokens, wte, wpe, b, t, c, v0, vn);
}
void CudaDevice::embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b, int t,
                                    int c, int v0, int vn) {
  cuda::embedding_backward(current_, dwte, dwpe, dx, tokens, b, t, c, v0, vn);
}
void CudaDevice::cross_entropy_stats(float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                                     int v0) {
  cuda::cross_entropy_stats(current_, stats, logits, targets, n, vn, v0);
}
void CudaDevice::cross_entropy_backward(float* dlogits, float* loss, const float* logits, const float* all_stats,
                                        int parts, const std::int32_t* targets, int n, int vn, int v0, float scale) {
  cuda::cross_entropy_backward(current_, dlogits, loss, logits, all_stats, parts, targets, n, vn, v0, scale);
}
void CudaDevice::resample_forward(float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) {
  cuda::resample_forward(current_, y, ny, x, nx, relu);
}
void CudaDevice::resample_backward(float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                                   const float* relu_input) {
  cuda::resample_backward(current_, dx, nx, dy, ny, relu_input);
}
void CudaDevice::add_cyclic(float* y, std::int64_t count, const float* bias, std::int64_t nb) {
  cuda::add_cyclic(current_, y, count, bias, nb);
}
void CudaDevice::moe_permute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) {
  cuda::moe_permute(current_, y, x, pos, scale, n, k, c);
}
void CudaDevice::moe_unpermute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                               bool accumulate) {
  cuda::moe_unpermute(current_, y, x, pos, scale, n, k, c, accumulate);
}
void CudaDevice::bn_stats(float* stats, const float* x, const BnShape& s) {
  cuda::bn_stats(current_, stats, x, s);
}
void CudaDevice::bn_merge(float* mean_invstd, const float* gathered, int members, const BnShape& s) {
  cuda::bn_merge(current_, mean_invstd, gathered, members,
                 s, batch_norm_eps);
}
void CudaDevice::bn_normalize(float* y, const float* x, const float* mean_invstd, const float* gamma, const float* beta,
                              const BnShape& s) {
  cuda::bn_normalize(current_, y, x, mean_invstd, gamma, beta,
                     s);
}
void CudaDevice::bn_backward_reduce(float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                                    const float* mean_invstd, const BnShape& s) {
  cuda::bn_backward_reduce(current_, sums, dgamma, dbeta, dy, x, mean_invstd,
                           s);
}
void CudaDevice::bn_backward_input(float* dx, const float* dy, const float* x, const float* mean_invstd,
                                   const float* gamma, const float* sums, double total_samples, const BnShape& s) {
  cuda::bn_backward_input(current_, dx, dy, x, mean_invstd, gamma, sums, total_samples,
                          s);
}
void CudaDevice::cyclic_backward(float* dbias, std::int64_t nb, const float* dy, std::int64_t count) {
  cuda::cyclic_backward(current_, dbias, nb, dy, count);
}
void CudaDevice::adamw(float* param, const float* grad, float* m, float* v, std::int64_t count, double lr,
                       double beta1, double beta2, double eps, double weight_decay, int step) {
  cuda::adamw(current_, param, grad, m, v, count, static_cast<float>(lr), static_cast<float>(beta1),
              static_cast<float>(beta2), static_cast<float>(eps), static_cast<float>(weight_decay), step);
  count_flops(12.0 * static_cast<double>(count));
}
void CudaDevice::adamw8bit(float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max,
                           float* v_max, std::int64_t count, double lr, double beta1, double beta2, double eps,
                           double weight_decay, int step) {
  cuda::adamw8bit(current_, param, grad, m, v, m_max, v_max, count, static_cast<float>(lr), static_cast<float>(beta1),
                  static_cast<float>(beta2), static_cast<float>(eps), static_cast<float>(weight_decay), step);
  count_flops(12.0 * static_cast<double>(count));
}
void CudaDevice::round_to(scenario::Dtype dtype, float* y, std::int64_t count) {
  if (dtype == scenario::Dtype::bf16) cuda::round_bf16(current_, y, count);
  if (dtype == scenario::Dtype::fp16) cuda::round_fp16(current_, y, count);
}
void CudaDevice::pack_16(scenario::Dtype dtype, std::uint16_t* y, const float* x, std::int64_t count) {
  if (dtype != scenario::Dtype::bf16 && dtype != scenario::Dtype::fp16) {
    throw std::invalid_argument("pack_16: bf16 or fp16 only");
  }
  cuda::pack_16(current_, y, x, count, dtype == scenario::Dtype::bf16 ? 1 : 2);
}
void CudaDevice::unpack_16(scenario::Dtype dtype, float* y, const std::uint16_t* x, std::int64_t count) {
  if (dtype != scenario::Dtype::bf16 && dtype != scenario::Dtype::fp16) {
    throw std::invalid_argument("unpack_16: bf16 or fp16 only");
  }
  cuda::unpack_16(current_, y, x, count, dtype == scenario::Dtype::bf16 ? 1 : 2);
}
void CudaDevice::fake_quantize_fp8(float* y, const float* x, std::int64_t count, bool e5m2) {
  cuda::fake_quantize_fp8(current_, amax_, y, x, count, e5m2);
  if (fp8_tensor_cores_) {  // the scale it used, for an FP8 GEMM of y (fp8_gemm.cpp)
    const int slot = next_fp8_slot();
    cuda::fp8_scales_from_amax(current_, fp8_scales_ + 2 * slot, amax_, e5m2);
    tag_fp8(y, e5m2, slot);
  }
}

void CudaDevice::fake_quantize_fp8_scaled(float* y, const float* x, std::int64_t count, bool e5m2, float scale,
                                          float* amax) {
  cuda::fake_quantize_fp8_scaled(current_, reinterpret_cast<unsigned int*>(amax), y, x, count, e5m2, scale);
  if (fp8_tensor_cores_) {
    const int slot = next_fp8_slot();
    cuda::fp8_set_scales(current_, fp8_scales_ + 2 * slot, scale);
    tag_fp8(y, e5m2, slot);
  }
}

double CudaDevice::sum_squares(const float* x, std::int64_t count) {
  cuda::sum_squares(current_, sum_, x, count);
  double sum = 0.0;
  check_cuda(cudaMemcpyAsync(&sum, sum_, sizeof sum, cudaMemcpyDeviceToHost, current_), "download");
  check_cuda(cudaStreamSynchronize(current_), "synchronize");
  return sum;
}

std::int64_t CudaDevice::count_nonfinite(const float* x, std::int64_t count) {
  cuda::count_nonfinite(current_, counter_, x, count);
  unsigned long long n = 0;
  check_cuda(cudaMemcpyAsync(&n, counter_, sizeof n, cudaMemcpyDeviceToHost, current_), "download");
  check_cuda(cudaStreamSynchronize(current_), "synchronize");
  return static_cast<std::int64_t>(n);
}

}  // namespace parasim::exec
