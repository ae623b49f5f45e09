// The CUDA backend: device memory through a caching allocator that counts what is in use
// and its high-water mark, cuBLAS GEMMs, the kernels of kernels.hpp, one CUDA stream per
// Program stream, CUDA events for ordering and timing, and NCCL for communication: one
// communicator per Program group (bootstrapped over MPI: the group's first rank makes the
// unique id and broadcasts it) and a world communicator for pipeline sends and receives.
//
// Requests are CUDA events recorded after the NCCL call on its stream; test() queries the
// event and, while a request is in flight, the communicators' asynchronous errors, so a
// failed peer aborts every communicator and the job instead of hanging. Pipeline sends and
// receives each go on a stream of their own (from a small pool), so transfers in both
// directions between two stages progress at once; NCCL matches them in the order each
// rank issues them, which is the Program's order on both sides (tested in compile_test).
//
// One rank per GPU: rank r uses device (local rank mod device count).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "exec/device.hpp"
#include "exec/model/fp8.hpp"
#include "exec/mpi_job.hpp"

namespace parasim::exec {

// cuBLAS is column-major; a row-major C[m x n] = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T. The arguments of that call.
struct ColumnMajorGemm {
  bool trans_first = false;   // op of the first operand (B)
  bool trans_second = false;  // op of the second operand (A)
  int rows = 0, cols = 0, inner = 0;  // cuBLAS m, n, k
  bool swap_operands = true;          // B is passed first, A second
};
ColumnMajorGemm column_major(bool trans_a, bool trans_b, int m, int n, int k);

// The cuBLAS compute type of a GEMM in `precision` on fp32 operands: fp32 exact, or fp32
// accumulation with the operands down-converted to tf32 / bf16 / fp16 for tensor cores.
cublasComputeType_t gemm_compute_type(scenario::Dtype precision);

class CudaDevice final : public Device {
 public:
  // capacity_bytes: 0 for the device's own memory.
  explicit CudaDevice(std::size_t capacity_bytes = 0);
  ~CudaDevice() override;

  [[nodiscard]] std::string name() const override { return "cuda"; }
  [[nodiscard]] int rank() const override { return job_.rank(); }
  [[nodiscard]] int world() const override { return job_.world(); }
  [[nodiscard]] int multiprocessors() const override { return sms_; }
  // Whether the GPU has FP8 tensor cores, the GEMMs that ran on them (fp8_gemm.cpp), and
  // those of two FP8 operands that fell back to bf16 (a shape or type cuBLASLt refused).
  [[nodiscard]] bool fp8_tensor_cores() const { return fp8_tensor_cores_; }
  [[nodiscard]] std::int64_t fp8_gemms() const { return fp8_gemms_; }
  [[nodiscard]] std::int64_t fp8_fallbacks() const { return fp8_fallbacks_; }
  // The fused attention's calls on tensor cores (attention_tc.cu) and on CUDA cores.
  [[nodiscard]] std::int64_t attention_tensor_cores() const { return attention_tensor_cores_; }
  [[nodiscard]] std::int64_t attention_cuda_cores() const { return attention_cuda_cores_; }
  [[nodiscard]] std::string kernel_paths() const override;
  [[nodiscard]] bool wants_pair_comms() const override { return true; }
  void pair_with(int peer, Comm comm) override { pair_comm_[peer] = comm; }

  void upload(void* dst, const void* src, std::size_t bytes) override;
  void download(void* dst, const void* src, std::size_t bytes) override;

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) override;
  void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    std::int64_t stride_a, const float* b, int ldb, std::int64_t stride_b, float beta, float* c, int ldc,
                    std::int64_t stride_c, int batch) override;

  void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                          int n, int c) override;
  void layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* mean,
                           const float* rstd, const float* gamma, int n, int c) override;
  void gelu_forward(float* y, const float* x, std::int64_t count) override;
  void bias_gelu_forward(float* pre, float* act, const float* bias, int n, int c, scenario::Dtype dtype) override;
  void gelu_backward(float* dx, const float* x, const float* dy, std::int64_t count) override;
  void causal_softmax_forward(float* p, const float* s, int batch, int t, float scale) override;
  void flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int heads, int d) override;
  void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv, const float* lse,
                                int b, int t, int heads, int d) override;
  void causal_softmax_backward(float* ds, const float* p, const float* dp, int batch, int t, float scale) override;
  void add_bias(float* out, const float* bias, int n, int c) override;
  void bias_backward(float* dbias, const float* dout, int n, int c) override;
  void add(float* y, const float* a, const float* b, std::int64_t count) override;
  void accumulate(float* y, const float* x, std::int64_t count) override;
  void zero(float* y, std::int64_t count) override;
  void scale(float* y, float alpha, std::int64_t count) override;
  void copy(float* y, const float* x, std::int64_t count) override;
  void embedding_forward(float* x, const std::int32_t* tokens, const float* wte, const float* wpe, int b, int t, int c,
                         int v0, int vn) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dx, const std::int32_t* tokens, int b, int t, int c,
                          int v0, int vn) override;
  void cross_entropy_stats(float* stats, const float* logits, const std::int32_t* targets, int n, int vn,
                           int v0) override;
  void cross_entropy_backward(float* dlogits, float* loss, const float* logits, const float* all_stats, int parts,
                              const std::int32_t* targets, int n, int vn, int v0, float scale) override;
  void resample_forward(float* y, std::int64_t ny, const float* x, std::int64_t nx, bool relu) override;
  void resample_backward(float* dx, std::int64_t nx, const float* dy, std::int64_t ny, const float* relu_input) override;
  void add_cyclic(float* y, std::int64_t count, const float* bias, std::int64_t nb) override;
  void bn_stats(float* stats, const float* x, const BnShape& s) override;
  void bn_merge(float* mean_invstd, const float* gathered, int members, const BnShape& s) override;
  void bn_normalize(float* y, const float* x, const float* mean_invstd, const float* gamma, const float* beta,
                    const BnShape& s) override;
  void bn_backward_reduce(float* sums, float* dgamma, float* dbeta, const float* dy, const float* x,
                          const float* mean_invstd, const BnShape& s) override;
  void bn_backward_input(float* dx, const float* dy, const float* x, const float* mean_invstd, const float* gamma,
                         const float* sums, double total_samples, const BnShape& s) override;
  void moe_permute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c) override;
  void moe_unpermute(float* y, const float* x, const float* pos, const float* scale, int n, int k, int c,
                     bool accumulate) override;
  void cyclic_backward(float* dbias, std::int64_t nb, const float* dy, std::int64_t count) override;
  void adamw(float* param, const float* grad, float* m, float* v, std::int64_t count, double lr, double beta1,
             double beta2, double eps, double weight_decay, int step) override;
  void adamw8bit(float* param, const float* grad, std::uint8_t* m, std::uint8_t* v, float* m_max, float* v_max,
                 std::int64_t count, double lr, double beta1, double beta2, double eps, double weight_decay,
                 int step) override;
  void round_to(scenario::Dtype dtype, float* y, std::int64_t count) override;
  void pack_16(scenario::Dtype dtype, std::uint16_t* y, const float* x, std::int64_t count) override;
  void unpack_16(scenario::Dtype dtype, float* y, const std::uint16_t* x, std::int64_t count) override;
  void fake_quantize_fp8(float* y, const float* x, std::int64_t count, bool e5m2) override;
  void kv_pack(float* kv, const float* qkv, std::int64_t rows, int c) override;
  void kv_unpack_add(float* dqkv, const float* dkv, std::int64_t rows, int c) override;
  void ring_attention_begin(float* acc, float* m, float* l, int b, int tq, int heads, int d) override;
  void ring_attention_block(float* acc, float* m, float* l, const float* qkv, const float* kv, std::span<const int> qpos,
                            std::span<const int> kpos, int b, int heads, int d) override;
  void ring_attention_end(float* out, float* lse, const float* acc, const float* m, const float* l, int b, int tq,
                          int heads, int d) override;
  void ring_attention_block_backward(float* dqkv, float* dkv, const float* dout, const float* out, const float* qkv,
                                     const float* kv, const float* lse, std::span<const int> qpos,
                                     std::span<const int> kpos, int b, int heads, int d) override;
  void fake_quantize_fp8_scaled(float* y, const float* x, std::int64_t count, bool e5m2, float scale,
                                float* amax) override;
  std::int64_t count_nonfinite(const float* x, std::int64_t count) override;
  double sum_squares(const float* x, std::int64_t count) override;

  Comm comm_create(std::span<const int> ranks, int key) override;
  Request send(const float* data, std::int64_t count, int peer, int tag) override;
  Request recv(float* data, std::int64_t count, int peer, int tag) override;
  void group_begin() override;
  void group_end() override;
  Request all_reduce(float* data, std::int64_t count, Comm comm) override;
  Request reduce_scatter(float* data, std::span<const std::int64_t> counts, Comm comm) override;
  Request all_gather(float* data, std::span<const std::int64_t> counts, Comm comm) override;
  Request all_to_all(const float* send, std::span<const std::int64_t> send_counts, float* recv,
                     std::span<const std::int64_t> recv_counts, Comm comm) override;
  bool test(Request r, std::int64_t* completed_ns = nullptr) override;
  void wait(Request r) override;
  void barrier() override { job_.barrier(); }
  void sum_to_all(std::span<double> values) override { job_.sum_to_all(values); }
  void max_to_all(std::span<double> values) override { job_.max_to_all(values); }
  std::vector<char> gather_to_root(std::span<const char> mine) override { return job_.gather_to_root(mine); }
  [[noreturn]] void abort_all(int code) override;

  void set_stream(program::Stream s) override { current_ = streams_[static_cast<std::size_t>(s)]; }
  Event record() override;
  bool done(Event e) override;
  std::int64_t event_time_ns(Event e) override;
  void wait_event(Event e) override;
  void forget_events() override;
  void synchronize() override;
  std::int64_t now_ns() override { return job_.now_ns(); }
  void align_clock() override;

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* p, std::size_t bytes) override;

 private:
  struct Pending {
    cudaEvent_t event = nullptr;
    ncclComm_t comm = nullptr;
    bool active = false;
    std::int64_t done_ns = 0;
  };
  Request post(cudaStream_t stream, ncclComm_t comm);
  Request point_to_point(bool send, float* data, std::int64_t count, int peer);
  bool poll(Pending& p);
  void check_comm(ncclComm_t comm);
  cudaStream_t p2p_stream();
  static std::size_t block_size(std::size_t bytes) { return (bytes + 511) / 512 * 512; }

  MpiJob job_;
  std::array<cudaStream_t, program::stream_count> streams_{};
  std::vector<cudaStream_t> p2p_streams_;
  std::vector<cudaEvent_t> p2p_after_;  // per p2p stream: where it starts after the pp stream
  std::size_t next_p2p_ = 0;
  // An open group: its stream and the Requests whose events are recorded at its end.
  bool grouping_ = false;
  cudaStream_t group_stream_ = nullptr;
  std::vector<Request> group_requests_;
  unsigned long long* counter_ = nullptr;  // count_nonfinite's result
  double* sum_ = nullptr;                   // sum_squares' result
  unsigned int* amax_ = nullptr;           // fake_quantize_fp8's largest magnitude (float bits)
  // FP8 GEMMs on tensor cores (fp8_gemm.cpp). The shard hands a GEMM operands that
  // fake_quantize_fp8* wrote; each such output is tagged with its format and a slot of
  // fp8_scales_ ({scale, 1 / scale}, on the device) holding the scale it was quantized at.
  // Under fp8 precision, on a GPU with FP8 tensor cores (compute capability 8.9 and up),
  // a GEMM of two tagged operands casts them to FP8 codes and runs cuBLASLt's FP8 matmul;
  // any other GEMM, or one cuBLASLt has no algorithm for, runs as before (the values are
  // exact in bf16). A tag lasts until its buffer is quantized again or released (the shard
  // writes its FP8 scratch only by quantizing), or a batched GEMM reads it.
  // The codes of an operand are kept with the layout they were cast to, and cast again only
  // when it was quantized again or is read in another layout (calibrate's repeated GEMMs
  // cast once). A slot of fp8_scales_ is reused after fp8_slots later quantizations; the
  // shard multiplies right after quantizing, calibrate quantizes at most 512 operands.
  struct Fp8Tag {
    bool e5m2 = false;
    int slot = 0;
    std::uint64_t version = 0;
  };
  struct Fp8Codes {
    std::uint64_t version = 0;
    int rows = 0, cols = 0, ld = 0;
    bool transposed = false;
    Buffer codes;
  };
  void tag_fp8(const float* y, bool e5m2, int slot) { fp8_tags_[y] = {e5m2, slot, ++fp8_version_}; }
  int next_fp8_slot() { return fp8_next_slot_ = (fp8_next_slot_ + 1) % fp8_slots; }
  const std::uint8_t* fp8_codes(const float* src, const Fp8Tag& tag, int ld, int rows, int cols, bool transposed);
  bool gemm_fp8(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                int ldb, float beta, float* c, int ldc);
  // The tags and codes of every operand inside [p, p + bytes) (only p's when bytes is 0).
  void drop_fp8(const void* p, std::size_t bytes = 0);
  // The 16-bit format the fused attention's operands take (1 bf16, 2 fp16), 0: fp32.
  [[nodiscard]] int attention_format() const;
  std::int64_t attention_tensor_cores_ = 0, attention_cuda_cores_ = 0;
  bool fp8_tensor_cores_ = false;
  std::int64_t fp8_gemms_ = 0, fp8_fallbacks_ = 0;
  static constexpr int fp8_slots = 1024;
  float* fp8_scales_ = nullptr;  // fp8_slots x {scale, 1 / scale}
  int fp8_next_slot_ = 0;
  std::uint64_t fp8_version_ = 0;
  fp8::AddressMap<Fp8Tag> fp8_tags_;
  fp8::AddressMap<Fp8Codes> fp8_codes_;
  cublasLtHandle_t lt_ = nullptr;
  void* lt_workspace_ = nullptr;
  static constexpr std::size_t lt_workspace_bytes = std::size_t{32} << 20;
  // Ring attention's positions on the device, by their host copy (the shard keeps each
  // rank's for the run): uploaded at first use.
  const int* positions_on_device(std::span<const int> host);
  std::unordered_map<const int*, Buffer> positions_;
  cudaStream_t current_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  int sms_ = 0;
  ncclComm_t world_comm_ = nullptr;
  std::vector<ncclComm_t> comms_;
  std::unordered_map<int, Comm> pair_comm_;  // pipeline peer -> its pair's communicator
  // Released blocks by size, each with events after its last possible readers (raw_release).
  struct Cached {
    void* p = nullptr;
    cudaEvent_t compute = nullptr;  // on the compute stream at the release
    cudaEvent_t other = nullptr;    // on the tp or dp stream, when the host was issuing there
  };
  cudaEvent_t spare_event();
  void reuse(const Cached& b);  // the current stream waits for b's readers; its events go spare
  bool released_done(const Cached& b);
  std::unordered_map<std::size_t, std::vector<Cached>> cache_;
  std::vector<cudaEvent_t> spare_events_;
  std::vector<Pending> pending_;
  std::vector<Request> free_;
  // Events for record(), reused after forget_events(); their times are measured from a
  // reference event recorded (and waited for) at align_clock(), at host time origin_ns_.
  std::vector<cudaEvent_t> events_;
  std::size_t used_events_ = 0;
  cudaEvent_t origin_ = nullptr;
  std::int64_t origin_ns_ = 0;
};

}  // namespace parasim::exec
