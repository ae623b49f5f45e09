#include "exec/cpu/cpu_device.hpp"
#include "exec/model/adam8bit.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "exec/model/fp8.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/rounding.hpp"

namespace parasim::exec {

namespace {

using rounding::round_bf16;
using rounding::round_fp16;

// The two bytes of a bf16 / fp16 value: x rounded to nearest even, then its bits (NaN stays
// a quiet NaN of x's sign).
std::uint16_t bf16_bits(float x) {
  if (std::isnan(x)) return static_cast<std::uint16_t>(std::signbit(x) ? 0xffc0U : 0x7fc0U);
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(round_bf16(x)) >> 16);
}

float from_bf16_bits(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t fp16_bits(float x) {
#ifdef __FLT16_MAX__
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
#else
  const auto sign = static_cast<std::uint16_t>(std::signbit(x) ? 0x8000U : 0U);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7e00U);
  const float a = std::fabs(round_fp16(x));
  if (std::isinf(a)) return static_cast<std::uint16_t>(sign | 0x7c00U);
  if (a < 0x1p-14F) {  // subnormal: a multiple of 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::ldexp(a, 24)));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): exponent field e - 1 + 15
  const auto mantissa = static_cast<std::uint32_t>(std::ldexp(m, 11)) - 1024U;
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(e + 14) << 10 | mantissa);
#endif
}

float from_fp16_bits(std::uint16_t h) {
#ifdef __FLT16_MAX__
  return static_cast<float>(std::bit_cast<_Float16>(h));
#else
  const float sign = (h & 0x8000U) != 0 ? -1.0F : 1.0F;
  const unsigned e = (h >> 10) & 0x1fU;
  const unsigned m = h & 0x3ffU;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return m == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  return sign * std::ldexp(static_cast<float>(1024U + m), static_cast<int>(e) - 25);
#endif
}

}  // namespace

CpuDevice::CpuDevice(std::size_t capacity_bytes) { capacity_ = capacity_bytes; }

CpuDevice::~CpuDevice() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) std::free(p);
  }
}

// Released blocks are kept by size and handed out again, as a GPU caching allocator does:
// a step allocates the same activation sizes every micro-batch, and going back to the
// system each time cost page faults on every large block.
void* CpuDevice::raw_allocate(std::size_t bytes) {
  const std::size_t size = block_size(bytes);
  void* p = nullptr;
  if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = std::aligned_alloc(64, size);
    if (p == nullptr) throw std::bad_alloc();
  }
  // Not zeroed (callers that need zeros ask for them); filled with NaN under
  // PARASIM_POISON_MEMORY=1, so that a read of memory never written shows in the tests.
  if (poison_memory()) std::memset(p, 0xff, bytes);
  return p;
}

void CpuDevice::raw_release(void* p, std::size_t bytes) { cache_[block_size(bytes)].push_back(p); }

void CpuDevice::upload(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuDevice::download(void* dst, const void* src, std::size_t bytes) {
  ++downloads_;
  std::memcpy(dst, src, bytes);
}

// --- GEMM ------------------------------------------------------------------------------------

void CpuDevice::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc) {
  progress();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
  count_flops(2.0 * m * n * static_cast<double>(k));
}

void CpuDevice::gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                             std::int64_t stride_a, const float* b, int ldb, std::int64_t stride_b, float beta,
                             float* c, int ldc, std::int64_t stride_c, int batch) {
  for (int i = 0; i < batch; ++i) {
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
  }
}

// --- element-wise --------------------------------------------------------------------------

void CpuDevice::layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                   const float* beta, int n, int c) {
  progress();
  kernels::layer_norm_forward(y, mean, rstd, x, gamma, beta, n, c);
}

void CpuDevice::layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                    const float* mean, const float* rstd, const float* gamma, int n, int c) {
  progress();
  kernels::layer_norm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c);
}

void CpuDevice::gelu_forward(float* y, const float* x, std::int64_t count) { progress(); kernels::gelu_forward(y, x, count); }
// The four passes over blocks of rows that stay in cache (about 64 KiB each): the same
// operations in the same order as the unfused calls, so the same values.
void CpuDevice::bias_gelu_forward(float* pre, float* act, const float* bias, int n, int c, scenario::Dtype dtype) {
  const int rows = std::max(1, 16384 / std::max(c, 1));
  for (int r0 = 0; r0 < n; r0 += rows) {
    const int r = std::min(rows, n - r0);
    const std::size_t at = static_cast<std::size_t>(r0) * c;
    const std::int64_t count = static_cast<std::int64_t>(r) * c;
    add_bias(pre + at, bias, r, c);
    round_to(dtype, pre + at, count);
    gelu_forward(act + at, pre + at, count);
    round_to(dtype, act + at, count);
  }
}

void CpuDevice::gelu_backward(float* dx, const float* x, const float* dy, std::int64_t count) {
  progress();
  kernels::gelu_backward(dx, x, dy, count);
}

void CpuDevice::causal_softmax_forward(float* p, const float* s, int batch, int t, float scale) {
  progress();
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(batch) * t; ++row) {
    const auto i = static_cast<int>(row % t);
    const float* in = s + row * t;
    float* out = p + row * t;
    // scale > 0, so the largest scaled score is scale times the largest score.
    const float maxv = kernels::lane_max(in, i + 1) * scale;
    for (int j = 0; j <= i; ++j) out[j] = kernels::fast_exp_nonpositive(in[j] * scale - maxv);
    const float inv = 1.0F / kernels::lane_sum(out, i + 1);
    for (int j = 0; j <= i; ++j) out[j] *= inv;
    for (int j = i + 1; j < t; ++j) out[j] = 0.0F;
  }
}

void CpuDevice::causal_softmax_backward(float* ds, const float* p, const float* dp, int batch, int t, float scale) {
  progress();
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(batch) * t; ++row) {
    const float* pr = p + row * t;
    const float* dr = dp + row * t;
    float* out = ds + row * t;
    float dot = 0.0F;
    for (int j = 0; j < t; ++j) dot += pr[j] * dr[j];
    for (int j = 0; j < t; ++j) out[j] = scale * pr[j] * (dr[j] - dot);
  }
}

void CpuDevice::add_bias(float* out, const float* bias, int n, int c) {
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<std::size_t>(i) * c;
    for (int j = 0; j < c; ++j) row[j] += bias[j];
  }
}

void CpuDevice::bias_backward(float* dbias, const float* dout, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const float* row = dout + static_cast<std::size_t>(i) * c;
    for (int j = 0; j < c; ++j) dbias[j] += row[j];
  }
}

void CpuDevice::add(float* y, const float* a, const float* b, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}
void CpuDevice::accumulate(float* y, const float* x, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) y[i] += x[i];
}
void CpuDevice::zero(float* y, std::int64_t count) { std::fill(y, y + count, 0.0F); }
void CpuDevice::scale(float* y, float alpha, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) y[i] *= alpha;
}
void CpuDevice::copy(float* y, const float* x, std::int64_t count) { std::copy(x, x + count, y); }

void CpuDevice::embedding_forward(float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b,
                                  int t, int c, int v0, int vn) {
  progress();
  for (int row = 0; row < b * t; ++row) {
    float* out = x + static_cast<std::size_t>(row) * c;
    const int tok = tokens[row] - v0;
    if (tok >= 0 && tok < vn) {
      std::copy(wte + static_cast<std::size_t>(tok) * c, wte + static_cast<std::size_t>(tok + 1) * c, out);
    } else {
      std::fill(out, out + c, 0.0F);
    }
    if (wpe != nullptr) {
      const float* pe = wpe + static_cast<std::size_t>(row % t) * c;
      for (int j = 0; j < c; ++j) out[j] += pe[j];
    }
  }
}

void CpuDevice::embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b, int t,
                                   int c, int v0, int vn) {
  progress();
  for (int row = 0; row < b * t; ++row) {
    const float* g = dx + static_cast<std::size_t>(row) * c;
    const int tok = tokens[row] - v0;
    if (dwte != nullptr && tok >= 0 && tok < vn) {
      float* te = dwte + static_cast<std::size_t>(tok) * c;
      for (int j = 0; j < c; ++j) te[j] += g[j];
    }
    if (dwpe != nullptr) {
      float* pe = dwpe + static_cast<std::size_t>(row % t) * c;
      for (int j = 0; j < c; ++j) pe[j] += g[j];
    }
  }
}

void CpuDevice::cross_entropy_stats(float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                                    int v0) {
  progress();
  for (int i = 0; i < n; ++i) {
    const float* l = logits + static_cast<std::size_t>(i) * vn;
    const float maxv = kernels::lane_max(l, vn);
    const float sum = kernels::lane_sum(l, vn, [maxv](float v) { return kernels::fast_exp_nonpositive(v - maxv); });
    const int tgt = targets[i] - v0;
    stats[3 * i] = maxv;
    stats[3 * i + 1] = sum;
    stats[3 * i + 2] = tgt >= 0 && tgt < vn ? l[tgt] : 0.0F;
  }
}

void CpuDevice::cross_entropy_backward(float* dlogits, float* loss, const float* logits, const float* all_stats,
                                       int parts, const std::int32_t* targets, int n, int vn, int v0, float scale) {
  progress();
  for (int i = 0; i < n; ++i) {
    float maxv = -std::numeric_limits<float>::infinity();
    float target = 0.0F;
    for (int p = 0; p < parts; ++p) {
      const float* st = all_stats + (static_cast<std::size_t>(p) * n + i) * 3;
      maxv = std::max(maxv, st[0]);
      target += st[2];
    }
    float sum = 0.0F;
    for (int p = 0; p < parts; ++p) {
      const float* st = all_stats + (static_cast<std::size_t>(p) * n + i) * 3;
      sum += st[1] * std::exp(st[0] - maxv);
    }
    loss[i] = std::log(sum) + maxv - target;
    const float* l = logits + static_cast<std::size_t>(i) * vn;
    float* dl = dlogits + static_cast<std::size_t>(i) * vn;
    const float factor = scale / sum;
    for (int j = 0; j < vn; ++j) dl[j] = factor * kernels::fast_exp_nonpositive(l[j] - maxv);
    const int tgt = targets[i] - v0;
    if (tgt >= 0 && tgt < vn) dl[tgt] -= scale;
  }
}

void CpuDevice::resample_forward(float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) {
  progress();
  kernels::resample_forward(y, ny, x, nx, relu);
}

void CpuDevice::resample_backward(float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                                  const float* relu_input) {
  progress();
  kernels::resample_backward(dx, nx, dy, ny, relu_input);
}

void CpuDevice::add_cyclic(float* y, std::int64_t count, const float* bias, std::int64_t nb) {
  progress();
  kernels::add_cyclic(y, count, bias, nb);
}

void CpuDevice::bn_stats(float* stats, const float* x, const BnShape& s) {
  progress();
  kernels::bn_stats(stats, x, s);
}

void CpuDevice::bn_merge(float* mean_invstd, const float* gathered, int members, const BnShape& s) {
  progress();
  kernels::bn_merge(mean_invstd, gathered, members, s);
}

void CpuDevice::bn_normalize(float* y, const float* x, const float* mean_invstd, const float* gamma, const float* beta,
                             const BnShape& s) {
  progress();
  kernels::bn_normalize(y, x, mean_invstd, gamma, beta, s);
}

void CpuDevice::bn_backward_reduce(float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                                   const float* mean_invstd, const BnShape& s) {
  progress();
  kernels::bn_backward_reduce(sums, dgamma, dbeta, dy, x, mean_invstd, s);
}

void CpuDevice::bn_backward_input(float* dx, const float* dy, const float* x, const float* mean_invstd,
                                  const float* gamma, const float* sums, double total_samples, const BnShape& s) {
  progress();
  kernels::bn_backward_input(dx, dy, x, mean_invstd, gamma, sums, total_samples, s);
}

void CpuDevice::moe_permute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) {
  progress();
  kernels::moe_permute(y, x, pos, scale, n, k, c);
}

void CpuDevice::moe_unpermute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                              bool accumulate) {
  progress();
  kernels::moe_unpermute(y, x, pos, scale, n, k, c, accumulate);
}

void CpuDevice::cyclic_backward(float* dbias, std::int64_t nb, const float* dy, std::int64_t count) {
  progress();
  kernels::cyclic_backward(dbias, nb, dy, count);
}

void CpuDevice::adamw(float* param, const float* grad, float* m, float* v, std::int64_t count, double lr, double beta1,
                      double beta2, double eps, double weight_decay, int step) {
  progress();
  kernels::adamw(param, grad, m, v, count, kernels::AdamW{lr, beta1, beta2, eps, weight_decay}, step);
  count_flops(12.0 * static_cast<double>(count));
}

void CpuDevice::adamw8bit(float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max,
                          float* v_max, std::int64_t count, double lr, double beta1, double beta2, double eps,
                          double weight_decay, int step) {
  progress();
  adam8bit::adamw(param, grad, m, v, m_max, v_max, count, lr, beta1, beta2, eps, weight_decay, step);
  count_flops(12.0 * static_cast<double>(count));
}

void CpuDevice::round_to(scenario::Dtype dtype, float* y, std::int64_t count) {
  if (dtype == scenario::Dtype::bf16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = round_bf16(y[i]);
  } else if (dtype == scenario::Dtype::fp16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = round_fp16(y[i]);
  }
}

void CpuDevice::pack_16(scenario::Dtype dtype, std::uint16_t* y, const float* x, std::int64_t count) {
  progress();
  if (dtype == scenario::Dtype::bf16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = bf16_bits(x[i]);
  } else if (dtype == scenario::Dtype::fp16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = fp16_bits(x[i]);
  } else {
    throw std::invalid_argument("pack_16: bf16 or fp16 only");
  }
}

void CpuDevice::unpack_16(scenario::Dtype dtype, float* y, const std::uint16_t* x, std::int64_t count) {
  progress();
  if (dtype == scenario::Dtype::bf16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = from_bf16_bits(x[i]);
  } else if (dtype == scenario::Dtype::fp16) {
    for (std::int64_t i = 0; i < count; ++i) y[i] = from_fp16_bits(x[i]);
  } else {
    throw std::invalid_argument("unpack_16: bf16 or fp16 only");
  }
}

void CpuDevice::fake_quantize_fp8(float* y, const float* x, std::int64_t count, bool e5m2) {
  progress();
  const fp8::Format f = e5m2 ? fp8::e5m2 : fp8::e4m3;
  float amax = 0.0F;
  for (std::int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = fp8::scale_for(amax, f);
  for (std::int64_t i = 0; i < count; ++i) y[i] = fp8::fake_quantize(x[i], scale, f);
}

void CpuDevice::fake_quantize_fp8_scaled(float* y, const float* x, std::int64_t count, bool e5m2, float scale,
                                         float* amax) {
  progress();
  const fp8::Format f = e5m2 ? fp8::e5m2 : fp8::e4m3;
  float top = *amax;
  for (std::int64_t i = 0; i < count; ++i) top = std::max(top, std::fabs(x[i]));
  *amax = top;
  for (std::int64_t i = 0; i < count; ++i) y[i] = fp8::fake_quantize(x[i], scale, f);
}

std::int64_t CpuDevice::count_nonfinite(const float* x, std::int64_t count) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < count; ++i) n += std::isfinite(x[i]) ? 0 : 1;
  return n;
}

double CpuDevice::sum_squares(const float* x, std::int64_t count) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < count; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// --- communication -----------------------------------------------------------------------------

Comm CpuDevice::comm_create(std::span<const int> ranks, int key) {
  comms_.push_back(job_.group(ranks, key));
  return static_cast<Comm>(comms_.size()) - 1;
}

Request CpuDevice::post(Pending p) {
  p.active = true;
  ++in_flight_;
  if (!free_.empty()) {
    const Request r = free_.back();
    free_.pop_back();
    pending_[static_cast<std::size_t>(r)] = std::move(p);
    return r;
  }
  pending_.push_back(std::move(p));
  return static_cast<Request>(pending_.size()) - 1;
}

Request CpuDevice::send(const float* data, std::int64_t count, int peer, int tag) {
  Pending p;
  check_mpi(MPI_Isend(data, mpi_count(count), MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &p.request), "send");
  return post(std::move(p));
}

Request CpuDevice::recv(float* data, std::int64_t count, int peer, int tag) {
  Pending p;
  check_mpi(MPI_Irecv(data, mpi_count(count), MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &p.request), "recv");
  return post(std::move(p));
}

Request CpuDevice::all_reduce(float* data, std::int64_t count, Comm comm) {
  Pending p;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_FLOAT, MPI_SUM, mpi_comm(comm), &p.request),
            "all-reduce");
  return post(std::move(p));
}

Request CpuDevice::reduce_scatter(float* data, std::span<const std::int64_t> counts, Comm comm) {
  Pending p;
  int me = 0;
  MPI_Comm_rank(mpi_comm(comm), &me);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    p.counts.push_back(mpi_count(counts[i]));
    if (static_cast<int>(i) < me) offset += counts[i];
  }
  const int mine = p.counts[static_cast<std::size_t>(me)];
  p.scratch = std::make_unique<float[]>(static_cast<std::size_t>(std::max(mine, 1)));
  float* result = p.scratch.get();
  float* place = data + offset;
  p.finish = [result, place, mine] { std::copy(result, result + mine, place); };
  check_mpi(MPI_Ireduce_scatter(data, result, p.counts.data(), MPI_FLOAT, MPI_SUM, mpi_comm(comm), &p.request),
            "reduce-scatter");
  return post(std::move(p));
}

Request CpuDevice::all_gather(float* data, std::span<const std::int64_t> counts, Comm comm) {
  Pending p;
  int displ = 0;
  for (std::int64_t c : counts) {
    p.counts.push_back(mpi_count(c));
    p.displs.push_back(displ);
    displ += mpi_count(c);
  }
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, p.counts.data(), p.displs.data(), MPI_FLOAT,
                            mpi_comm(comm), &p.request),
            "all-gather");
  return post(std::move(p));
}

Request CpuDevice::all_to_all(const float* send, std::span<const std::int64_t> send_counts, float* recv,
                              std::span<const std::int64_t> recv_counts, Comm comm) {
  Pending p;
  auto lay_out = [](std::span<const std::int64_t> in, std::vector<int>& counts, std::vector<int>& displs) {
    std::int64_t at = 0;
    for (std::int64_t c : in) {
      counts.push_back(mpi_count(c));
      displs.push_back(mpi_count(at));  // MPI's displacements are ints too
      at += c;
    }
  };
  lay_out(send_counts, p.counts, p.displs);
  lay_out(recv_counts, p.recv_counts, p.recv_displs);
  check_mpi(MPI_Ialltoallv(send, p.counts.data(), p.displs.data(), MPI_FLOAT, recv, p.recv_counts.data(),
                           p.recv_displs.data(), MPI_FLOAT, mpi_comm(comm), &p.request),
            "all-to-all");
  return post(std::move(p));
}

void CpuDevice::complete(Pending& p) {
  if (p.finish) p.finish();
  p = Pending{};
  --in_flight_;
}

// MPI moves a message only inside MPI calls; a long compute op between the runner's polls
// would hold a transfer (and the rank waiting for it) for the whole op. So the kernels
// call this first: it tests what is in flight and notes when each completed.
void CpuDevice::progress() {
  if (in_flight_ == 0) return;
  for (Pending& p : pending_) {
    if (p.active) poll(p);
  }
}

bool CpuDevice::poll(Pending& p) {
  if (p.done_ns != 0) return true;
  int flag = 0;
  check_mpi(MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE), "test");
  if (flag == 0) return false;
  p.done_ns = now_ns();
  return true;
}

bool CpuDevice::test(Request r, std::int64_t* completed_ns) {
  Pending& p = pending_[static_cast<std::size_t>(r)];
  if (!p.active) return true;
  if (!poll(p)) return false;
  if (completed_ns != nullptr) *completed_ns = p.done_ns;
  complete(p);
  free_.push_back(r);
  return true;
}

void CpuDevice::wait(Request r) {
  Pending& p = pending_[static_cast<std::size_t>(r)];
  if (!p.active) return;
  check_mpi(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "wait");
  complete(p);
  free_.push_back(r);
}

void CpuDevice::barrier() { job_.barrier(); }
void CpuDevice::sum_to_all(std::span<double> values) { job_.sum_to_all(values); }
void CpuDevice::max_to_all(std::span<double> values) { job_.max_to_all(values); }
std::vector<char> CpuDevice::gather_to_root(std::span<const char> mine) { return job_.gather_to_root(mine); }
void CpuDevice::abort_all(int code) { job_.abort_all(code); }

// --- events and clock ----------------------------------------------------------------------------

std::int64_t CpuDevice::now_ns() { return job_.now_ns(); }

void CpuDevice::align_clock() { job_.align_clock(); }

}  // namespace parasim::exec
