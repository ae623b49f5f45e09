// The optimizer's kernels: AdamW with fp32 or 8-bit moments (exec/model/adam8bit.hpp), and
// the count of non-finite gradients fp16's loss scaling checks before the step.
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/launch.hpp"
#include "exec/model/adam8bit.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace parasim::exec::cuda {
namespace {

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, std::int64_t count, float lr,
                             float beta1, float beta2, float eps, float wd, float c1, float c2) {
  PARASIM_FOR_EACH(i, count) {
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.0F - beta1) * g;
    const float vi = beta2 * v[i] + (1.0F - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * param[i]);
  }
}

// 8-bit AdamW (exec/model/adam8bit.hpp): a block of 256 threads per block of 2048 values,
// 8 each; the maps travel as a kernel argument and are read from shared memory.
struct Adam8bitMaps {
  float sm[256];
  float um[256];
};

__device__ unsigned char nearest_code(float x, const float* map) {
  int lo = 0;
  int hi = 255;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (map[mid] <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return static_cast<unsigned char>(x - map[lo] <= map[hi] - x ? lo : hi);
}

constexpr int adam8bit_threads = 256;
constexpr int adam8bit_per_thread = 8;
static_assert(adam8bit_threads * adam8bit_per_thread == adam8bit::block);

__global__ void adamw8bit_kernel(float* param, const float* grad, unsigned char* m, unsigned char* v, float* m_max,
                                 float* v_max, std::int64_t count, float lr, float beta1, float beta2, float eps,
                                 float wd, float c1, float c2, Adam8bitMaps maps) {
  __shared__ float sm[256], um[256], top_m[adam8bit_threads], top_v[adam8bit_threads];
  const int t = static_cast<int>(threadIdx.x);
  sm[t] = maps.sm[t];
  um[t] = maps.um[t];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * adam8bit::block;
  const float old_m = m_max[blockIdx.x];
  const float old_v = v_max[blockIdx.x];
  __syncthreads();
  float nm[adam8bit_per_thread], nv[adam8bit_per_thread];
  float hm = 0.0F, hv = 0.0F;
  for (int j = 0; j < adam8bit_per_thread; ++j) {
    const std::int64_t k = first + t + j * adam8bit_threads;
    nm[j] = 0.0F;
    nv[j] = 0.0F;
    if (k >= count) continue;
    const float g = grad[k];
    nm[j] = beta1 * sm[m[k]] * old_m + (1.0F - beta1) * g;
    nv[j] = beta2 * um[v[k]] * old_v + (1.0F - beta2) * g * g;
    hm = fmaxf(hm, fabsf(nm[j]));
    hv = fmaxf(hv, nv[j]);
    param[k] -= lr * ((nm[j] / c1) / (sqrtf(nv[j] / c2) + eps) + wd * param[k]);
  }
  top_m[t] = hm;
  top_v[t] = hv;
  __syncthreads();
  for (int stride = adam8bit_threads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      top_m[t] = fmaxf(top_m[t], top_m[t + stride]);
      top_v[t] = fmaxf(top_v[t], top_v[t + stride]);
    }
    __syncthreads();
  }
  const float new_m = top_m[0];
  const float new_v = top_v[0];
  if (t == 0) {
    m_max[blockIdx.x] = new_m;
    v_max[blockIdx.x] = new_v;
  }
  for (int j = 0; j < adam8bit_per_thread; ++j) {
    const std::int64_t k = first + t + j * adam8bit_threads;
    if (k >= count) continue;
    m[k] = nearest_code(new_m > 0.0F ? nm[j] / new_m : 0.0F, sm);
    v[k] = nearest_code(new_v > 0.0F ? nv[j] / new_v : 0.0F, um);
  }
}

__global__ void count_nonfinite_kernel(unsigned long long* n, const float* x, std::int64_t count) {
  unsigned long long mine = 0;
  PARASIM_FOR_EACH(i, count) mine += isfinite(x[i]) ? 0ULL : 1ULL;
  if (mine != 0) atomicAdd(n, mine);
}

__global__ void sum_squares_kernel(double* sum, const float* x, std::int64_t count) {
  double mine = 0.0;
  PARASIM_FOR_EACH(i, count) mine += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31U) == 0 && mine != 0.0) atomicAdd(sum, mine);
}

}  // namespace

void adamw(cudaStream_t s, float* param, const float* grad, float* m, float* v, std::int64_t count, float lr,
           float beta1, float beta2, float eps, float weight_decay, int step) {
  const float c1 = 1.0F - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1.0F - std::pow(beta2, static_cast<float>(step));
  adamw_kernel<<<blocks_for(count), threads, 0, s>>>(param, grad, m, v, count, lr, beta1, beta2, eps, weight_decay, c1,
                                                     c2);
  check_launch("adamw");
}

void adamw8bit(cudaStream_t s, float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max,
               float* v_max, std::int64_t count, float lr, float beta1, float beta2, float eps, float weight_decay,
               int step) {
  if (count <= 0) return;
  static const Adam8bitMaps maps = [] {
    Adam8bitMaps out{};
    std::copy(adam8bit::signed_map().begin(), adam8bit::signed_map().end(), out.sm);
    std::copy(adam8bit::unsigned_map().begin(), adam8bit::unsigned_map().end(), out.um);
    return out;
  }();
  const float c1 = 1.0F - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1.0F - std::pow(beta2, static_cast<float>(step));
  adamw8bit_kernel<<<static_cast<unsigned>(adam8bit::blocks(count)), adam8bit_threads, 0, s>>>(
      param, grad, m, v, m_max, v_max, count, lr, beta1, beta2, eps, weight_decay, c1, c2, maps);
  check_launch("adamw8bit");
}

void count_nonfinite(cudaStream_t s, unsigned long long* counter, const float* x, std::int64_t count) {
  if (cudaMemsetAsync(counter, 0, sizeof *counter, s) != cudaSuccess) throw std::runtime_error("CUDA: memset failed");
  if (count > 0) count_nonfinite_kernel<<<blocks_for(count), threads, 0, s>>>(counter, x, count);
  check_launch("count_nonfinite");
}

void sum_squares(cudaStream_t s, double* sum, const float* x, std::int64_t count) {
  if (cudaMemsetAsync(sum, 0, sizeof *sum, s) != cudaSuccess) throw std::runtime_error("CUDA: memset failed");
  if (count > 0) sum_squares_kernel<<<blocks_for(count), threads, 0, s>>>(sum, x, count);
  check_launch("sum_squares");
}

}  // namespace parasim::exec::cuda
