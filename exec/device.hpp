// The interface every executor backend implements: memory, GEMMs, the element-wise kernels
// of the GPT decoder, point-to-point and collective communication, streams and events,
// and a clock. The runner (runner.hpp) and the sharded model (shard.hpp) are written
// against it only; `cpu/` implements it with BLAS and MPI, `cuda/` with cuBLAS and NCCL.
//
// Conventions:
//   * tensors are fp32, row-major, in the device's memory (Buffer); mixed precision rounds
//     them to bf16 / fp16 values where the plan stores 16-bit tensors (round_to()), and
//     what rests between passes (the weights' copy, a layer's stored activations) is
//     packed into two bytes a value (pack_16()) and unpacked when it is used;
//   * kernels are enqueued on the current stream (set_stream) and run in order on it; an
//     Event recorded on a stream completes when everything enqueued before it has; another
//     stream can wait for it (wait_event) without the host waiting;
//   * communication is non-blocking: each call posts and returns a Request that test()
//     polls (which also drives progress); a collective is called by every member of its
//     communicator in the same order;
//   * every GEMM adds 2·m·n·k to flops() and every optimizer update 12 per parameter (the
//     Program's convention), so a step's count can be checked against the Program's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/model/batch_norm.hpp"
#include "program/program.hpp"
#include "scenario/scenario.hpp"

namespace parasim::exec {

class Device;

// Device memory, released when the Buffer goes; the device counts what is in use and its
// high-water mark.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device* owner, void* data, std::size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  [[nodiscard]] float* f() const { return static_cast<float*>(data_); }
  [[nodiscard]] std::int32_t* i32() const { return static_cast<std::int32_t*>(data_); }
  [[nodiscard]] std::uint16_t* u16() const { return static_cast<std::uint16_t*>(data_); }
  [[nodiscard]] std::uint8_t* u8() const { return static_cast<std::uint8_t*>(data_); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  [[nodiscard]] std::size_t floats() const { return bytes_ / sizeof(float); }
  [[nodiscard]] bool empty() const { return data_ == nullptr; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
  }
  Device* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A communicator over a set of world ranks (a Program group, or the pipeline pair).
using Comm = int;
// A posted communication; test() says when it is done.
using Request = std::int64_t;
// A point in a stream's order; done() says when the stream has passed it.
using Event = std::int64_t;

struct CommStats {
  double bytes = 0.0;  // payload posted by this rank
  std::int64_t calls = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int world() const = 0;
  // Streaming multiprocessors of a device that queues kernels and runs them apart from the
  // host (a GPU); 0 where the calling thread runs each kernel to its end (CPU ranks).
  [[nodiscard]] virtual int multiprocessors() const { return 0; }
  // Which kernels ran where a backend chooses between paths (tensor cores or not, a library's
  // refusal and its fallback), counted since the device was made, for the run's report;
  // "" where it has no choice.
  [[nodiscard]] virtual std::string kernel_paths() const { return ""; }

  // --- memory ---------------------------------------------------------------------------
  // Zero-filled. Throws OutOfMemory past the device's capacity.
  Buffer allocate(std::size_t bytes);
  // Not zeroed: what a buffer holds before it is written is undefined (NaN under
  // PARASIM_POISON_MEMORY=1, which the tests set); zeroed_floats() when zeros are wanted.
  Buffer allocate_floats(std::size_t count) { return allocate(count * sizeof(float)); }
  Buffer zeroed_floats(std::size_t count) {
    Buffer b = allocate_floats(count);
    zero(b.f(), static_cast<std::int64_t>(count));
    return b;
  }
  // Whether fresh allocations are filled with NaN (PARASIM_POISON_MEMORY=1).
  [[nodiscard]] static bool poison_memory();
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  [[nodiscard]] std::size_t in_use() const { return in_use_; }
  [[nodiscard]] std::size_t peak() const { return peak_; }
  void reset_peak() { peak_ = in_use_; }

  // --- GEMM -----------------------------------------------------------------------------
  // The precision GEMMs compute in from now on: operands in fp32 storage, products in
  // fp32 (default), tf32, bf16 or fp16, accumulated in fp32. The CUDA backend lets cuBLAS
  // down-convert the operands for tensor cores; the CPU backend computes in fp32 (the
  // shard has already rounded 16-bit operands, so the products are exact there too).
  void set_gemm_precision(scenario::Dtype d) { gemm_precision_ = d; }
  [[nodiscard]] scenario::Dtype gemm_precision() const { return gemm_precision_; }
  // C = alpha op(A) op(B) + beta C with leading dimensions (row-major).
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) = 0;
  // `batch` GEMMs, the i-th on a + i·stride_a, b + i·stride_b, c + i·stride_c.
  virtual void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                            std::int64_t stride_a, const float* b, int ldb, std::int64_t stride_b, float beta, float* c,
                            int ldc, std::int64_t stride_c, int batch) = 0;

  // --- element-wise kernels (as kernels.hpp; backward kernels add into gradients) ------------
  virtual void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                  const float* beta, int n, int c) = 0;
  virtual void layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                   const float* mean, const float* rstd, const float* gamma, int n, int c) = 0;
  virtual void gelu_forward(float* y, const float* x, std::int64_t count) = 0;
  // The MLP's chain in one pass over n x c values: pre = round(pre + bias per column), then
  // act = round(gelu(pre)), rounding to `dtype` (bf16, fp16; none for fp32 and tf32). The
  // same values as add_bias, round_to, gelu_forward, round_to one after another.
  virtual void bias_gelu_forward(float* pre, float* act, const float* bias, int n, int c, scenario::Dtype dtype) = 0;
  virtual void gelu_backward(float* dx, const float* x, const float* dy, std::int64_t count) = 0;
  // rows x t scores per batch entry, `batch` of them, each row i of a t x t block masked
  // above the diagonal: p = softmax(scale · s) in place of p (s and p may alias).
  virtual void causal_softmax_forward(float* p, const float* s, int batch, int t, float scale) = 0;
  // ds = scale · p ⊙ (dp − rowsum(p ⊙ dp)) (writes).
  // FlashAttention (training.attention: flash): causal attention over qkv [b, t, 3, heads, d]
  // into out [b, t, heads, d] keeping only lse [b, heads, t], each row's log-sum-exp, not the
  // t x t probabilities; the backward writes every entry of dqkv from dout, out, qkv and lse
  // (kernels::flash_attention_*, whose algorithm the backends follow).
  virtual void flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int heads, int d) = 0;
  virtual void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv,
                                        const float* lse, int b, int t, int heads, int d) = 0;
  virtual void causal_softmax_backward(float* ds, const float* p, const float* dp, int batch, int t, float scale) = 0;
  // Ring attention (context parallelism): exec/model/ring_attention.hpp, whose algorithm and
  // layouts these follow (positions on the host). Only the CPU backend has them so far; the
  // others throw, and the executor refuses plan.cp > 1 on them before it starts
  // (unsupported_reason).
  virtual void kv_pack(float* kv, const float* qkv, std::int64_t rows, int c);
  virtual void kv_unpack_add(float* dqkv, const float* dkv, std::int64_t rows, int c);
  virtual void ring_attention_begin(float* acc, float* m, float* l, int b, int tq, int heads, int d);
  virtual void ring_attention_block(float* acc, float* m, float* l, const float* qkv, const float* kv,
                                    std::span<const int> qpos, std::span<const int> kpos, int b, int heads, int d);
  virtual void ring_attention_end(float* out, float* lse, const float* acc, const float* m, const float* l, int b,
                                  int tq, int heads, int d);
  virtual void ring_attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* out,
                                             const float* qkv, const float* kv, const float* lse,
                                             std::span<const int> qpos, std::span<const int> kpos, int b, int heads,
                                             int d);
  // out[n x c] += bias (per column); dbias += column sums of dout.
  virtual void add_bias(float* out, const float* bias, int n, int c) = 0;
  virtual void bias_backward(float* dbias, const float* dout, int n, int c) = 0;
  // y = a + b (y may alias a), y += x, y = 0, y *= alpha, y = x.
  virtual void add(float* y, const float* a, const float* b, std::int64_t count) = 0;
  virtual void accumulate(float* y, const float* x, std::int64_t count) = 0;
  virtual void zero(float* y, std::int64_t count) = 0;
  virtual void scale(float* y, float alpha, std::int64_t count) = 0;
  virtual void copy(float* y, const float* x, std::int64_t count) = 0;
  // Vocabulary slice [v0, v0 + vn) of the token embedding: x[N x c] = wte[token - v0] for
  // tokens in the slice, 0 otherwise, plus wpe[position] when wpe is given.
  virtual void embedding_forward(float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b,
                                 int t, int c, int v0, int vn) = 0;
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b,
                                  int t, int c, int v0, int vn) = 0;
  // Vocabulary-parallel cross-entropy. stats[N x 3] = (row max, sum of exp(logit - max),
  // the target's logit or 0 when the target is outside the slice) of logits [N x vn].
  virtual void cross_entropy_stats(float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                                   int v0) = 0;
  // From every slice's stats (parts x N x 3): writes dlogits = scale · (softmax − onehot)
  // for this slice and loss[N] = logsumexp − target logit.
  virtual void cross_entropy_backward(float* dlogits, float* loss, const float* logits, const float* all_stats,
                                      int parts, const std::int32_t* targets, int n, int vn, int v0, float scale) = 0;
  // The generic models' GEMM-equivalent layers (kernels.hpp): a nearest-neighbour
  // stretch of nx values to ny, optionally through a ReLU, and its adjoint (writes), a bias
  // added cyclically and its gradient (adds).
  virtual void resample_forward(float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) = 0;
  virtual void resample_backward(float* dx, std::int64_t nx, const float* dy, std::int64_t ny,
                                 const float* relu_input) = 0;
  virtual void add_cyclic(float* y, std::int64_t count, const float* bias, std::int64_t nb) = 0;
  // A BatchNorm layer over a stretch of a generic layer's values (model/batch_norm.hpp,
  // kernels::bn_*): this micro-batch's statistics, several members' merged, the
  // normalisation, the backward's per-channel sums (adding the scale's and shift's
  // gradients) and the input gradient from the group's sums.
  virtual void bn_stats(float* stats, const float* x, const BnShape& s) = 0;
  virtual void bn_merge(float* mean_invstd, const float* gathered, int members, const BnShape& s) = 0;
  virtual void bn_normalize(float* y, const float* x, const float* mean_invstd, const float* gamma, const float* beta,
                            const BnShape& s) = 0;
  virtual void bn_backward_reduce(float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                                  const float* mean_invstd, const BnShape& s) = 0;
  virtual void bn_backward_input(float* dx, const float* dy, const float* x, const float* mean_invstd,
                                 const float* gamma, const float* sums, double total_samples, const BnShape& s) = 0;
  // A mixture of experts' token permutation over n tokens of c values, k copies each:
  // copy q = i·k + j goes to row pos[q] (a whole number, held as a float) of the expert
  // rows. moe_permute: y[pos[q]] = scale[q] · x[q / k] (scale null: 1). moe_unpermute:
  // y[i] (+)= sum over j of scale[i·k + j] · x[pos[i·k + j]], each token's copies in order
  // (no atomics: the same sums on every backend and every run).
  virtual void moe_permute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) = 0;
  virtual void moe_unpermute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                             bool accumulate) = 0;
  virtual void cyclic_backward(float* dbias, std::int64_t nb, const float* dy, std::int64_t count) = 0;
  virtual void adamw(float* param, const float* grad, float* m, float* v, std::int64_t count,
                     double lr, double beta1, double beta2, double eps, double weight_decay, int step) = 0;
  // The same step with 8-bit moments (exec/model/adam8bit.hpp): codes m, v and their
  // blocks' maxima m_max, v_max (one per 2048 values).
  virtual void adamw8bit(float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max,
                         float* v_max, std::int64_t count, double lr, double beta1, double beta2, double eps,
                         double weight_decay, int step) = 0;
  // How many of x[0, count) are infinite or NaN (blocking: waits for the current stream).
  virtual std::int64_t count_nonfinite(const float* x, std::int64_t count) = 0;
  // The sum of x[i]^2 over [0, count), in double (blocking: waits for the current stream);
  // a non-finite x makes it non-finite.
  virtual double sum_squares(const float* x, std::int64_t count) = 0;
  // Rounds fp32 values to the nearest bf16 / fp16 value (round to nearest even); no-op for
  // fp32 and tf32 (TF32 rounding happens inside GEMMs on devices that have it).
  virtual void round_to(scenario::Dtype dtype, float* y, std::int64_t count) = 0;
  // 16-bit storage (bf16 / fp16): y[i] = x[i] rounded as round_to() does, in the format's
  // two bytes; and back, exactly. What the shard keeps in 16 bits between a pass and the
  // next (activations from the forward to the backward) lives in such buffers.
  virtual void pack_16(scenario::Dtype dtype, std::uint16_t* y, const float* x, std::int64_t count) = 0;
  virtual void unpack_16(scenario::Dtype dtype, float* y, const std::uint16_t* x, std::int64_t count) = 0;
  // fp8 training's GEMM operands: y = x scaled by the FP8 format's largest value over x's
  // largest magnitude, rounded to the format, scaled back (exec/model/fp8.hpp; E5M2 for
  // gradients, E4M3 otherwise). y may be x.
  virtual void fake_quantize_fp8(float* y, const float* x, std::int64_t count, bool e5m2) = 0;
  // Delayed scaling's cast: y = x at the given scale, rounded to the format, scaled back;
  // *amax (on the device) = max(*amax, x's largest magnitude).
  virtual void fake_quantize_fp8_scaled(float* y, const float* x, std::int64_t count, bool e5m2, float scale,
                                        float* amax) = 0;

  // --- communication --------------------------------------------------------------------------
  // A communicator over `ranks` (world ranks, in order); every listed rank calls it with
  // the same list and key, a number no other group being created at the same time uses.
  virtual Comm comm_create(std::span<const int> ranks, int key) = 0;
  // A backend whose communicator orders every transfer on it (NCCL) carries the transfers
  // with `peer` over `comm`, a communicator of the two ranks, lower rank first, instead of
  // one shared by all: transfers to different peers then never wait on each other.
  [[nodiscard]] virtual bool wants_pair_comms() const { return false; }
  virtual void pair_with(int /*peer*/, Comm /*comm*/) {}
  virtual Request send(const float* data, std::int64_t count, int peer, int tag) = 0;
  virtual Request recv(float* data, std::int64_t count, int peer, int tag) = 0;
  // Point-to-point calls between group_begin() and group_end() are issued as one (an NCCL
  // group), so that a send and a receive posted together progress together; their
  // Requests may be tested once group_end() has returned. No-ops on the CPU backend.
  virtual void group_begin() {}
  virtual void group_end() {}
  virtual Request all_reduce(float* data, std::int64_t count, Comm comm) = 0;  // sum, in place
  // Member i receives the sum of block i (counts[i] floats, blocks back to back in data) in
  // place at its block; all_gather fills every member's block from its owner.
  virtual Request reduce_scatter(float* data, std::span<const std::int64_t> counts, Comm comm) = 0;
  virtual Request all_gather(float* data, std::span<const std::int64_t> counts, Comm comm) = 0;
  // Member i receives send's block i (send_counts[i] floats, blocks back to back) as its
  // block for this member in recv (recv_counts[j] floats from member j, back to back): an
  // all-to-all of varying sizes (MPI_Alltoallv; NCCL's grouped sends and receives, as
  // Megatron-Core's token dispatcher runs it). send and recv do not overlap.
  virtual Request all_to_all(const float* send, std::span<const std::int64_t> send_counts, float* recv,
                             std::span<const std::int64_t> recv_counts, Comm comm) = 0;
  // True once `r` is done (and then forgets it); `completed_ns`, when given, receives when
  // it completed in now_ns()'s time base, which may be before this call noticed.
  virtual bool test(Request r, std::int64_t* completed_ns = nullptr) = 0;
  virtual void wait(Request r) = 0;
  // Blocking, for setup and results: a barrier and a sum of doubles over every rank.
  virtual void barrier() = 0;
  virtual void sum_to_all(std::span<double> values) = 0;
  virtual void max_to_all(std::span<double> values) = 0;
  // Every rank's bytes, concatenated in rank order, on rank 0 (empty elsewhere).
  virtual std::vector<char> gather_to_root(std::span<const char> mine) = 0;
  // Ends every rank of the job now (a fault on this one), with `code`.
  [[noreturn]] virtual void abort_all(int code) = 0;

  // --- streams, events, clock ------------------------------------------------------------------
  virtual void set_stream(program::Stream s) = 0;
  virtual Event record() = 0;
  virtual bool done(Event e) = 0;
  // When the event completed, in now()'s time base (valid once done()).
  virtual std::int64_t event_time_ns(Event e) = 0;
  // The current stream waits for `e` before what is enqueued next (the host does not).
  virtual void wait_event(Event e) = 0;
  // Every Event recorded so far may be reused: none is queried again.
  virtual void forget_events() = 0;
  virtual void synchronize() = 0;
  // Nanoseconds on a clock aligned across ranks (align_clock()).
  [[nodiscard]] virtual std::int64_t now_ns() = 0;
  virtual void align_clock() = 0;

  // --- counters ---------------------------------------------------------------------------------
  [[nodiscard]] double flops() const { return flops_; }
  void reset_flops() { flops_ = 0.0; }

 protected:
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_release(void* p, std::size_t bytes) = 0;
  void count_flops(double f) { flops_ += f; }
  // The fused attention's FLOPs counted as the unfused attention's GEMMs (the Program's
  // count): Q·Kᵀ and P·V forward, four such products backward, 2·t²·d per sequence and head.
  void count_attention_flops(int b, int t, int heads, int d, bool backward) { count_attention_flops(b, t, t, heads, d, backward); }
  // tq queries against tk keys (a ring attention block).
  void count_attention_flops(int b, int tq, int tk, int heads, int d, bool backward) {
    count_flops((backward ? 4.0 : 2.0) * 2.0 * b * heads * static_cast<double>(tq) * tk * d);
  }
  std::size_t capacity_ = 0;  // 0: unlimited
  scenario::Dtype gemm_precision_ = scenario::Dtype::fp32;

 private:
  friend class Buffer;
  void release(void* p, std::size_t bytes) {
    raw_release(p, bytes);
    in_use_ -= bytes;
  }
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
  double flops_ = 0.0;
};

// Thrown by Device::allocate past the device's capacity.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace parasim::exec
