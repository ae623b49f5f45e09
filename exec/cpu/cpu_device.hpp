// The CPU backend: host memory, OpenBLAS GEMMs, the host kernels and non-blocking MPI.
// One rank per core; its "streams" are ordering domains only, since kernels run at once on
// the calling thread (an Event is complete when recorded). Communication progresses inside
// test(), which the runner calls between operations, and at the start of every kernel
// (progress()), which also notes when each request completed.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "exec/device.hpp"
#include "exec/mpi_job.hpp"

namespace parasim::exec {

class CpuDevice final : public Device {
 public:
  // capacity_bytes: 0 for no limit beyond the machine's.
  explicit CpuDevice(std::size_t capacity_bytes = 0);
  ~CpuDevice() override;

  [[nodiscard]] std::string name() const override { return "cpu"; }
  [[nodiscard]] int rank() const override { return job_.rank(); }
  [[nodiscard]] int world() const override { return job_.world(); }

  void upload(void* dst, const void* src, std::size_t bytes) override;
  void download(void* dst, const void* src, std::size_t bytes) override;
  // The downloads so far: on a GPU each stops the host until the device has caught up, so
  // the tests count where the executor asks for one.
  [[nodiscard]] std::int64_t downloads() const { return downloads_; }

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
  void fake_quantize_fp8_scaled(float* y, const float* x, std::int64_t count, bool e5m2, float scale,
                                float* amax) override;
  std::int64_t count_nonfinite(const float* x, std::int64_t count) override;
  double sum_squares(const float* x, std::int64_t count) override;

  Comm comm_create(std::span<const int> ranks, int key) override;
  Request send(const float* data, std::int64_t count, int peer, int tag) override;
  Request recv(float* data, std::int64_t count, int peer, int tag) override;
  Request all_reduce(float* data, std::int64_t count, Comm comm) override;
  Request reduce_scatter(float* data, std::span<const std::int64_t> counts, Comm comm) override;
  Request all_gather(float* data, std::span<const std::int64_t> counts, Comm comm) override;
  Request all_to_all(const float* send, std::span<const std::int64_t> send_counts, float* recv,
                     std::span<const std::int64_t> recv_counts, Comm comm) override;
  bool test(Request r, std::int64_t* completed_ns = nullptr) override;
  void wait(Request r) override;
  void barrier() override;
  void sum_to_all(std::span<double> values) override;
  void max_to_all(std::span<double> values) override;
  std::vector<char> gather_to_root(std::span<const char> mine) override;
  [[noreturn]] void abort_all(int code) override;

  // Kernels run as they are called: an event is its recording time, complete at once.
  void set_stream(program::Stream) override {}
  Event record() override { return now_ns(); }
  bool done(Event) override { return true; }
  std::int64_t event_time_ns(Event e) override { return e; }
  void wait_event(Event) override {}
  void forget_events() override {}
  void synchronize() override {}
  std::int64_t now_ns() override;
  void align_clock() override;

  // Communicator of a Comm handle (for tests and calibration).
  [[nodiscard]] MPI_Comm mpi_comm(Comm c) const { return comms_[static_cast<std::size_t>(c)]; }

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* p, std::size_t bytes) override;

 private:
  std::int64_t downloads_ = 0;
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    bool active = false;
    std::vector<int> counts, displs;   // kept alive for the v-collectives
    std::vector<int> recv_counts, recv_displs;  // and the all-to-all's receiving side
    std::unique_ptr<float[]> scratch;  // reduce-scatter's result before it goes in place
    std::function<void()> finish;      // run once on completion
    std::int64_t done_ns = 0;          // when progress() or test() saw it complete
  };
  void progress();
  bool poll(Pending& p);  // tests p unless already seen done; notes when it completed
  static std::size_t block_size(std::size_t bytes) { return (bytes + 63) / 64 * 64; }  // 64-byte aligned
  int in_flight_ = 0;
  Request post(Pending p);
  void complete(Pending& p);

  MpiJob job_;
  std::vector<MPI_Comm> comms_;  // by Comm handle; owned by job_
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // released blocks by size
  std::vector<Pending> pending_;
  std::vector<Request> free_;
  std::vector<float> scores_, grads_, deltas_;  // attention's tiles (cpu/attention.cpp)
  std::vector<float> row_max_, row_sum_;        // flash forward's running maximum and sum per row
};

}  // namespace parasim::exec
