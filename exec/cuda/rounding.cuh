// Rounding to the 16-bit formats on the device, shared by the kernels that store or
// compute in them (kernels.cu, precision.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace parasim::exec::cuda {

// Round to nearest even bf16 (NaN kept), or fp16; format 0 leaves x as it is.
__device__ inline float round_to_format(float x, int format) {
  if (format == 1) {
    if (isnan(x)) return x;
    unsigned bits = __float_as_uint(x);
    bits += 0x7fffU + ((bits >> 16) & 1U);
    return __uint_as_float(bits & 0xffff0000U);
  }
  if (format == 2) return __half2float(__float2half_rn(x));
  return x;
}

}  // namespace parasim::exec::cuda
