// The precision kernels: rounding to bf16 / fp16, 16-bit storage (Device::pack_16), and
// FP8 as Transformer Engine runs it: the amax, fake quantization at that scale or a given
// one, the scales cuBLASLt takes, and the operands' codes in its TN layout (fp8_gemm.cpp).
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/cuda/rounding.cuh"
#include "exec/model/fp8.hpp"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdexcept>

namespace parasim::exec::cuda {
namespace {

__global__ void round_bf16_kernel(float* y, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) y[i] = round_to_format(y[i], 1);
}

__global__ void round_fp16_kernel(float* y, std::int64_t count) {
  PARASIM_FOR_EACH(i, count) y[i] = round_to_format(y[i], 2);
}

// 16-bit storage: the rounded value's two bytes (bf16: the top half of its fp32 bits, a
// NaN kept quiet; fp16: IEEE half), and back.
__global__ void pack_16_kernel(std::uint16_t* y, const float* x, std::int64_t count, int format) {
  PARASIM_FOR_EACH(i, count) {
    const float v = x[i];
    if (format == 1) {
      y[i] = isnan(v) ? static_cast<std::uint16_t>(signbit(v) ? 0xffc0U : 0x7fc0U)
                      : static_cast<std::uint16_t>(__float_as_uint(round_to_format(v, 1)) >> 16);
    } else {
      y[i] = __half_as_ushort(__float2half_rn(v));
    }
  }
}

__global__ void unpack_16_kernel(float* y, const std::uint16_t* x, std::int64_t count, int format) {
  PARASIM_FOR_EACH(i, count) {
    y[i] = format == 1 ? __uint_as_float(static_cast<unsigned>(x[i]) << 16) : __half2float(__ushort_as_half(x[i]));
  }
}

// Non-negative floats order as their bits do: the largest magnitude by an integer max.
__global__ void amax_kernel(unsigned int* amax, const float* x, std::int64_t count) {
  float mine = 0.0F;
  PARASIM_FOR_EACH(i, count) mine = fmaxf(mine, fabsf(x[i]));
  if (mine > 0.0F) atomicMax(amax, __float_as_uint(mine));
}

__global__ void fake_quantize_fp8_kernel(const unsigned int* amax, float* y, const float* x, std::int64_t count, bool e5m2) {
  const fp8::Format f = e5m2 ? fp8::e5m2 : fp8::e4m3;
  const float scale = fp8::scale_for(__uint_as_float(*amax), f);
  PARASIM_FOR_EACH(i, count) y[i] = fp8::fake_quantize(x[i], scale, f);
}

__global__ void fake_quantize_fp8_scaled_kernel(float* y, const float* x, std::int64_t count, bool e5m2, float scale) {
  const fp8::Format f = e5m2 ? fp8::e5m2 : fp8::e4m3;
  PARASIM_FOR_EACH(i, count) y[i] = fp8::fake_quantize(x[i], scale, f);
}

// FP8 GEMM operands for cuBLASLt (fp8_gemm.cpp): scales[0] the scale that maps values onto
// the format, scales[1] its inverse (cuBLASLt's dequantisation factor).
__global__ void fp8_scales_from_amax_kernel(float* scales, const unsigned int* amax, bool e5m2) {
  const fp8::Format f = e5m2 ? fp8::e5m2 : fp8::e4m3;
  const float scale = fp8::scale_for(__uint_as_float(*amax), f);
  scales[0] = scale;
  scales[1] = 1.0F / scale;
}

__global__ void fp8_set_scales_kernel(float* scales, float scale) {
  scales[0] = scale;
  scales[1] = 1.0F / scale;
}

// out[r * cols + c] = the FP8 code of x(r, c) * scales[0], x(r, c) = src[r * ld + c], or
// src[c * ld + r] when `transposed`. The values were fake-quantized with the same scale, so
// the product lands on (within fp32 rounding of) a code: the cast recovers it exactly.
__global__ void fp8_cast_gather_kernel(std::uint8_t* out, const float* src, int ld, int rows, int cols,
                                       bool transposed, const float* scales, bool e5m2) {
  const std::int64_t count = static_cast<std::int64_t>(rows) * cols;
  const float scale = scales[0];
  PARASIM_FOR_EACH(i, count) {
    const float x = src[fp8::gather_index(i / cols, i % cols, ld, transposed)];
    out[i] = __nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
  }
}

}  // namespace

void round_bf16(cudaStream_t s, float* y, std::int64_t count) {
  round_bf16_kernel<<<blocks_for(count), threads, 0, s>>>(y, count);
  check_launch("round_bf16");
}

void round_fp16(cudaStream_t s, float* y, std::int64_t count) {
  round_fp16_kernel<<<blocks_for(count), threads, 0, s>>>(y, count);
  check_launch("round_fp16");
}

void pack_16(cudaStream_t s, std::uint16_t* y, const float* x, std::int64_t count, int format) {
  if (count <= 0) return;
  pack_16_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, count, format);
  check_launch("pack_16");
}

void unpack_16(cudaStream_t s, float* y, const std::uint16_t* x, std::int64_t count, int format) {
  if (count <= 0) return;
  unpack_16_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, count, format);
  check_launch("unpack_16");
}

void fake_quantize_fp8(cudaStream_t s, unsigned int* amax, float* y, const float* x, std::int64_t count, bool e5m2) {
  if (cudaMemsetAsync(amax, 0, sizeof *amax, s) != cudaSuccess) throw std::runtime_error("CUDA: memset failed");
  if (count <= 0) return;
  amax_kernel<<<blocks_for(count), threads, 0, s>>>(amax, x, count);
  check_launch("amax");
  fake_quantize_fp8_kernel<<<blocks_for(count), threads, 0, s>>>(amax, y, x, count, e5m2);
  check_launch("fake_quantize_fp8");
}

void fp8_scales_from_amax(cudaStream_t s, float* scales, const unsigned int* amax, bool e5m2) {
  fp8_scales_from_amax_kernel<<<1, 1, 0, s>>>(scales, amax, e5m2);
  check_launch("fp8_scales_from_amax");
}

void fp8_set_scales(cudaStream_t s, float* scales, float scale) {
  fp8_set_scales_kernel<<<1, 1, 0, s>>>(scales, scale);
  check_launch("fp8_set_scales");
}

void fp8_cast_gather(cudaStream_t s, std::uint8_t* out, const float* src, int ld, int rows, int cols, bool transposed,
                     const float* scales, bool e5m2) {
  const std::int64_t count = static_cast<std::int64_t>(rows) * cols;
  if (count <= 0) return;
  fp8_cast_gather_kernel<<<blocks_for(count), threads, 0, s>>>(out, src, ld, rows, cols, transposed, scales, e5m2);
  check_launch("fp8_cast_gather");
}

void fake_quantize_fp8_scaled(cudaStream_t s, unsigned int* amax, float* y, const float* x, std::int64_t count,
                              bool e5m2, float scale) {
  if (count <= 0) return;
  amax_kernel<<<blocks_for(count), threads, 0, s>>>(amax, x, count);
  check_launch("amax");
  fake_quantize_fp8_scaled_kernel<<<blocks_for(count), threads, 0, s>>>(y, x, count, e5m2, scale);
  check_launch("fake_quantize_fp8_scaled");
}

}  // namespace parasim::exec::cuda
