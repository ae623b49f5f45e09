#include "exec/cuda/cuda_device.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "exec/cuda/check.hpp"
#include "exec/cuda/kernels.hpp"

namespace parasim::exec {

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("cuBLAS {} failed: status {}", what, static_cast<int>(s)));
}

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(fmt::format("NCCL {} failed: {}", what, ncclGetErrorString(r)));
}

std::size_t nccl_count(std::int64_t v) { return static_cast<std::size_t>(v); }

}  // namespace

ColumnMajorGemm column_major(bool trans_a, bool trans_b, int m, int n, int k) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's storage read
  // column-major is B^T, so B goes first, transposed exactly when op(B) is.
  return {trans_b, trans_a, n, m, k, true};
}

CudaDevice::CudaDevice(std::size_t capacity_bytes) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    throw std::runtime_error(fmt::format("rank {}: no usable CUDA device", job_.rank()));
  }
  // One rank per GPU: the rank's index among the ranks of its node.
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, job_.rank(), MPI_INFO_NULL, &local), "split");
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  check_cuda(cudaSetDevice(local_rank % count), "set device");
  check_cuda(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, local_rank % count), "multiprocessors");
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info");
  capacity_ = capacity_bytes == 0 ? free_bytes : std::min(capacity_bytes, free_bytes);
  for (cudaStream_t& s : streams_) check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  p2p_streams_.resize(4);
  p2p_after_.resize(p2p_streams_.size());
  for (cudaStream_t& s : p2p_streams_) check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  for (cudaEvent_t& e : p2p_after_) check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  current_ = streams_[static_cast<std::size_t>(program::Stream::compute)];
  check_blas(cublasCreate(&blas_), "create");
  check_cuda(cudaEventCreate(&origin_), "event");
  check_cuda(cudaMalloc(&counter_, sizeof *counter_), "counter");
  check_cuda(cudaMalloc(&sum_, sizeof *sum_), "sum");
  check_cuda(cudaMalloc(&amax_, sizeof *amax_), "amax");
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, local_rank % count), "capability");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, local_rank % count), "capability");
  fp8_tensor_cores_ = major * 10 + minor >= 89;  // Ada and Hopper on
  if (fp8_tensor_cores_) {
    check_blas(cublasLtCreate(&lt_), "create cuBLASLt");
    check_cuda(cudaMalloc(&lt_workspace_, lt_workspace_bytes), "cuBLASLt workspace");
    check_cuda(cudaMalloc(&fp8_scales_, 2 * fp8_slots * sizeof *fp8_scales_), "fp8 scales");
  }
  // The world communicator for pipeline transfers: rank 0's id, broadcast over MPI.
  ncclUniqueId id{};
  if (job_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "unique id");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast");
  check_nccl(ncclCommInitRank(&world_comm_, job_.world(), id, job_.rank()), "init");
}

CudaDevice::~CudaDevice() {
  cudaDeviceSynchronize();
  positions_.clear();  // its buffers go back to the cache while the device is whole
  fp8_codes_.extract_all();  // released here, with the map already empty (their release calls drop_fp8)
  for (auto& [size, blocks] : cache_) {
    for (const Cached& b : blocks) {
      cudaFree(b.p);
      for (cudaEvent_t e : {b.compute, b.other}) {
        if (e != nullptr) cudaEventDestroy(e);
      }
    }
  }
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  for (ncclComm_t c : comms_) ncclCommDestroy(c);
  if (world_comm_ != nullptr) ncclCommDestroy(world_comm_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (Pending& p : pending_) {
    if (p.event != nullptr) cudaEventDestroy(p.event);
  }
  if (origin_ != nullptr) cudaEventDestroy(origin_);
  if (counter_ != nullptr) cudaFree(counter_);
  if (sum_ != nullptr) cudaFree(sum_);
  if (amax_ != nullptr) cudaFree(amax_);
  if (fp8_scales_ != nullptr) cudaFree(fp8_scales_);
  if (lt_workspace_ != nullptr) cudaFree(lt_workspace_);
  if (lt_ != nullptr) cublasLtDestroy(lt_);
  if (blas_ != nullptr) cublasDestroy(blas_);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  for (cudaStream_t s : p2p_streams_) cudaStreamDestroy(s);
  for (cudaEvent_t e : p2p_after_) cudaEventDestroy(e);
}

// --- memory ------------------------------------------------------------------------------------

// A released block may still be read by kernels queued before its release: on the compute
// stream, or on the tp / dp stream where the host was issuing (the shard lays out a
// collective's input there). Its release records an event on each such stream, and the
// stream that is handed the block again waits for them on the device (the host does not).
// Waiting is safe: the compute stream only ever waits for compute and for communication
// already complete, and the tp and dp streams run one collective at a time, issued after
// its input is laid out, so neither tail at a release waits on a peer. Buffers of
// transfers and collectives are released after their completion is seen on the host.
cudaEvent_t CudaDevice::spare_event() {
  if (spare_events_.empty()) {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
    return e;
  }
  cudaEvent_t e = spare_events_.back();
  spare_events_.pop_back();
  return e;
}

void CudaDevice::reuse(const Cached& b) {
  for (cudaEvent_t e : {b.compute, b.other}) {
    if (e == nullptr) continue;
    check_cuda(cudaStreamWaitEvent(current_, e, 0), "wait for release");
    spare_events_.push_back(e);
  }
}

bool CudaDevice::released_done(const Cached& b) {
  for (cudaEvent_t e : {b.compute, b.other}) {
    if (e == nullptr) continue;
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaErrorNotReady) return false;
    check_cuda(r, "event");
  }
  return true;
}

void* CudaDevice::raw_allocate(std::size_t bytes) {
  const std::size_t size = block_size(bytes);
  void* p = nullptr;
  if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
    const Cached b = it->second.back();
    it->second.pop_back();
    reuse(b);
    p = b.p;
  } else if (cudaMalloc(&p, size) != cudaSuccess) {
    // Give back the cached blocks whose readers are done, then try once more. (cudaFree
    // waits for the device; a rank stuck there on a peer is ended by the stall watchdog.)
    cudaGetLastError();
    for (auto& [bytes_of, blocks] : cache_) {
      std::erase_if(blocks, [&](const Cached& b) {
        if (!released_done(b)) return false;
        for (cudaEvent_t e : {b.compute, b.other}) {
          if (e != nullptr) spare_events_.push_back(e);
        }
        cudaFree(b.p);
        return true;
      });
    }
    if (cudaMalloc(&p, size) != cudaSuccess) {
      cudaGetLastError();
      throw OutOfMemory(fmt::format("rank {}: cudaMalloc of {:.1f} MiB failed ({:.1f} MiB in use)", rank(),
                                    static_cast<double>(size) / 1048576.0, static_cast<double>(in_use()) / 1048576.0));
    }
  }
  // Not zeroed; NaN under PARASIM_POISON_MEMORY=1 (Device::poison_memory), in stream order.
  if (poison_memory()) check_cuda(cudaMemsetAsync(p, 0xff, bytes, current_), "memset");
  return p;
}

void CudaDevice::raw_release(void* p, std::size_t bytes) {
  drop_fp8(p, bytes);  // the FP8 values of every operand inside it are gone with it
  Cached b{p, spare_event(), nullptr};
  const cudaStream_t compute = streams_[static_cast<std::size_t>(program::Stream::compute)];
  check_cuda(cudaEventRecord(b.compute, compute), "release");
  if (current_ != compute && current_ != streams_[static_cast<std::size_t>(program::Stream::pp)]) {
    b.other = spare_event();
    check_cuda(cudaEventRecord(b.other, current_), "release");
  }
  cache_[block_size(bytes)].push_back(b);
}

// Copies in order with the current stream's work, waiting for that stream alone: a whole-
// device wait would also wait for transfers posted ahead on the other streams, whose peers
// may be waiting for this rank.
void CudaDevice::upload(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_), "upload");
  check_cuda(cudaStreamSynchronize(current_), "upload");
}

void CudaDevice::download(void* dst, const void* src, std::size_t bytes) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_), "download");
  check_cuda(cudaStreamSynchronize(current_), "download");
}

// --- GEMM ----------------------------------------------------------------------------------------

cublasComputeType_t gemm_compute_type(scenario::Dtype precision) {
  switch (precision) {
    case scenario::Dtype::fp32: return CUBLAS_COMPUTE_32F;
    case scenario::Dtype::tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case scenario::Dtype::bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case scenario::Dtype::fp16: return CUBLAS_COMPUTE_32F_FAST_16F;
    // FP8 operands (the shard quantizes them) are exact in bf16: bf16 tensor cores.
    case scenario::Dtype::fp8: return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  return CUBLAS_COMPUTE_32F;
}

void CudaDevice::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
  // fp8: two fake-quantized operands run as FP8 on tensor cores where the GPU has them.
  if (gemm_precision() == scenario::Dtype::fp8 &&
      gemm_fp8(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) {
    return;
  }
  const ColumnMajorGemm g = column_major(trans_a, trans_b, m, n, k);
  check_blas(cublasSetStream(blas_, current_), "set stream");
  check_blas(cublasGemmEx(blas_, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
                          g.rows, g.cols, g.inner, &alpha, b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F,
                          ldc, gemm_compute_type(gemm_precision()), CUBLAS_GEMM_DEFAULT),
             "gemm");
  count_flops(2.0 * m * n * static_cast<double>(k));
}

void CudaDevice::gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                              std::int64_t stride_a, const float* b, int ldb, std::int64_t stride_b, float beta,
                              float* c, int ldc, std::int64_t stride_c, int batch) {
  drop_fp8(a);  // batched GEMMs stay on the bf16 path (fp8_gemm.cpp)
  drop_fp8(b);
  const ColumnMajorGemm g = column_major(trans_a, trans_b, m, n, k);
  check_blas(cublasSetStream(blas_, current_), "set stream");
  check_blas(cublasGemmStridedBatchedEx(blas_, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.rows, g.cols, g.inner, &alpha, b,
                                        CUDA_R_32F, ldb, stride_b, a, CUDA_R_32F, lda, stride_a, &beta, c, CUDA_R_32F,
                                        ldc, stride_c, batch, gemm_compute_type(gemm_precision()), CUBLAS_GEMM_DEFAULT),
             "gemm strided batched");
  count_flops(2.0 * m * n * static_cast<double>(k) * batch);
}

// --- communication ----------------------------------------------------------------------------------

Comm CudaDevice::comm_create(std::span<const int> ranks, int key) {
  MPI_Comm group = job_.group(ranks, key);
  int me = 0;
  MPI_Comm_rank(group, &me);
  ncclUniqueId id{};
  if (me == 0) check_nccl(ncclGetUniqueId(&id), "unique id");
  check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group), "broadcast");
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, static_cast<int>(ranks.size()), id, me), "init");
  comms_.push_back(comm);
  return static_cast<Comm>(comms_.size()) - 1;
}

Request CudaDevice::post(cudaStream_t stream, ncclComm_t comm) {
  Request r = 0;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
  } else {
    pending_.emplace_back();
    r = static_cast<Request>(pending_.size()) - 1;
    check_cuda(cudaEventCreateWithFlags(&pending_.back().event, cudaEventDefault), "event");
  }
  Pending& p = pending_[static_cast<std::size_t>(r)];
  if (stream != nullptr) check_cuda(cudaEventRecord(p.event, stream), "record");  // else at group_end()
  p.comm = comm;
  p.active = true;
  p.done_ns = 0;
  return r;
}

// The next stream of the pool; inside a group, the group's (its first call's).
cudaStream_t CudaDevice::p2p_stream() {
  const std::size_t i = next_p2p_;
  cudaStream_t s = group_stream_;
  if (s == nullptr) {
    s = p2p_streams_[i];
    next_p2p_ = (next_p2p_ + 1) % p2p_streams_.size();
    if (grouping_) group_stream_ = s;
  }
  // In order after what the pp stream was told to wait for (wait_event) and the data's
  // producer. Re-recording the event is safe: the wait captures its state at this call.
  check_cuda(cudaEventRecord(p2p_after_[i], current_), "record");
  check_cuda(cudaStreamWaitEvent(s, p2p_after_[i], 0), "wait");
  return s;
}

// Inside a group every call goes on the group's stream and its event is recorded once the
// group is issued (NCCL enqueues a group's work only at ncclGroupEnd).
// A pipeline pair's own communicator when the runner made one (ranks: lower, higher), else
// the world's.
Request CudaDevice::point_to_point(bool send, float* data, std::int64_t count, int peer) {
  cudaStream_t s = p2p_stream();
  ncclComm_t comm = world_comm_;
  int to = peer;
  if (auto it = pair_comm_.find(peer); it != pair_comm_.end()) {
    comm = comms_[static_cast<std::size_t>(it->second)];
    to = peer < rank() ? 0 : 1;
  }
  if (send) {
    check_nccl(ncclSend(data, nccl_count(count), ncclFloat, to, comm, s), "send");
  } else {
    check_nccl(ncclRecv(data, nccl_count(count), ncclFloat, to, comm, s), "recv");
  }
  if (!grouping_) return post(s, comm);
  const Request r = post(nullptr, comm);
  group_requests_.push_back(r);
  return r;
}

Request CudaDevice::send(const float* data, std::int64_t count, int peer, int) {
  return point_to_point(true, const_cast<float*>(data), count, peer);
}

Request CudaDevice::recv(float* data, std::int64_t count, int peer, int) {
  return point_to_point(false, data, count, peer);
}

void CudaDevice::group_begin() {
  check_nccl(ncclGroupStart(), "group");
  grouping_ = true;
  group_stream_ = nullptr;
  group_requests_.clear();
}

void CudaDevice::group_end() {
  check_nccl(ncclGroupEnd(), "group");
  for (Request r : group_requests_) {
    check_cuda(cudaEventRecord(pending_[static_cast<std::size_t>(r)].event, group_stream_), "record");
  }
  grouping_ = false;
  group_stream_ = nullptr;
  group_requests_.clear();
}

Request CudaDevice::all_reduce(float* data, std::int64_t count, Comm comm) {
  ncclComm_t c = comms_[static_cast<std::size_t>(comm)];
  check_nccl(ncclAllReduce(data, data, nccl_count(count), ncclFloat, ncclSum, c, current_), "all-reduce");
  return post(current_, c);
}

// Blocks of equal size use NCCL's in-place reduce-scatter / all-gather; unequal ones (a
// bucket that does not divide) a reduce or broadcast per block, grouped.
Request CudaDevice::reduce_scatter(float* data, std::span<const std::int64_t> counts, Comm comm) {
  ncclComm_t c = comms_[static_cast<std::size_t>(comm)];
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](std::int64_t n) { return n == counts.front(); });
  int me = 0;
  check_nccl(ncclCommUserRank(c, &me), "rank");
  if (equal) {
    check_nccl(ncclReduceScatter(data, data + counts.front() * me, nccl_count(counts.front()), ncclFloat, ncclSum, c,
                                 current_),
               "reduce-scatter");
  } else {
    check_nccl(ncclGroupStart(), "group");
    std::int64_t at = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      check_nccl(ncclReduce(data + at, data + at, nccl_count(counts[i]), ncclFloat, ncclSum, static_cast<int>(i), c,
                            current_),
                 "reduce");
      at += counts[i];
    }
    check_nccl(ncclGroupEnd(), "group");
  }
  return post(current_, c);
}

Request CudaDevice::all_gather(float* data, std::span<const std::int64_t> counts, Comm comm) {
  ncclComm_t c = comms_[static_cast<std::size_t>(comm)];
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](std::int64_t n) { return n == counts.front(); });
  int me = 0;
  check_nccl(ncclCommUserRank(c, &me), "rank");
  if (equal) {
    check_nccl(ncclAllGather(data + counts.front() * me, data, nccl_count(counts.front()), ncclFloat, c, current_),
               "all-gather");
  } else {
    check_nccl(ncclGroupStart(), "group");
    std::int64_t at = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      check_nccl(ncclBroadcast(data + at, data + at, nccl_count(counts[i]), ncclFloat, static_cast<int>(i), c, current_),
                 "broadcast");
      at += counts[i];
    }
    check_nccl(ncclGroupEnd(), "group");
  }
  return post(current_, c);
}

// A send and a receive per other member in one group; this member's own block is a copy.
Request CudaDevice::all_to_all(const float* send, std::span<const std::int64_t> send_counts, float* recv,
                               std::span<const std::int64_t> recv_counts, Comm comm) {
  ncclComm_t c = comms_[static_cast<std::size_t>(comm)];
  int me = 0;
  check_nccl(ncclCommUserRank(c, &me), "rank");
  std::int64_t from = 0, to = 0;
  check_nccl(ncclGroupStart(), "group");
  for (std::size_t i = 0; i < send_counts.size(); ++i) {
    const auto peer = static_cast<int>(i);
    if (peer == me) {
      if (send_counts[i] > 0) {
        check_cuda(cudaMemcpyAsync(recv + to, send + from, static_cast<std::size_t>(send_counts[i]) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, current_),
                   "copy");
      }
    } else {
      if (send_counts[i] > 0) {
        check_nccl(ncclSend(send + from, nccl_count(send_counts[i]), ncclFloat, peer, c, current_), "send");
      }
      if (recv_counts[i] > 0) {
        check_nccl(ncclRecv(recv + to, nccl_count(recv_counts[i]), ncclFloat, peer, c, current_), "recv");
      }
    }
    from += send_counts[i];
    to += recv_counts[i];
  }
  check_nccl(ncclGroupEnd(), "group");
  return post(current_, c);
}

// A failed peer leaves NCCL waiting; its communicators report the error asynchronously.
// Then every communicator is aborted and the job ended, naming the rank.
void CudaDevice::check_comm(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess || async == ncclInProgress) return;
  std::fprintf(stderr, "error: rank %d: NCCL: %s\n", rank(), ncclGetErrorString(async));
  for (ncclComm_t c : comms_) ncclCommAbort(c);
  ncclCommAbort(world_comm_);
  abort_all(1);
}

bool CudaDevice::poll(Pending& p) {
  if (p.done_ns != 0) return true;
  const cudaError_t e = cudaEventQuery(p.event);
  if (e == cudaErrorNotReady) {
    check_comm(p.comm);
    return false;
  }
  check_cuda(e, "communication");
  // When the device ended it, not when the host noticed.
  float ms = 0.0F;
  if (cudaEventElapsedTime(&ms, origin_, p.event) == cudaSuccess) {
    p.done_ns = origin_ns_ + static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  } else {
    cudaGetLastError();
    p.done_ns = now_ns();
  }
  return true;
}

bool CudaDevice::test(Request r, std::int64_t* completed_ns) {
  Pending& p = pending_[static_cast<std::size_t>(r)];
  if (!p.active) return true;
  if (!poll(p)) return false;
  if (completed_ns != nullptr) *completed_ns = p.done_ns;
  p.active = false;
  free_.push_back(r);
  return true;
}

void CudaDevice::wait(Request r) {
  while (!test(r)) {
  }
}

void CudaDevice::abort_all(int code) { job_.abort_all(code); }

// --- events and clock --------------------------------------------------------------------------

Event CudaDevice::record() {
  if (used_events_ == events_.size()) {
    events_.emplace_back();
    check_cuda(cudaEventCreate(&events_.back()), "event");
  }
  const std::size_t i = used_events_++;
  check_cuda(cudaEventRecord(events_[i], current_), "record");
  return static_cast<Event>(i);
}

bool CudaDevice::done(Event e) {
  const cudaError_t r = cudaEventQuery(events_[static_cast<std::size_t>(e)]);
  if (r == cudaErrorNotReady) return false;
  check_cuda(r, "event");
  return true;
}

std::int64_t CudaDevice::event_time_ns(Event e) {
  float ms = 0.0F;
  check_cuda(cudaEventElapsedTime(&ms, origin_, events_[static_cast<std::size_t>(e)]), "event time");
  return origin_ns_ + static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
}

// Also re-anchors the events' clock on the idle stream: cudaEventElapsedTime gives float
// milliseconds, which lose resolution far from the reference (about 8 us at 100 s).
void CudaDevice::forget_events() {
  used_events_ = 0;
  check_cuda(cudaEventRecord(origin_, current_), "record");
  check_cuda(cudaEventSynchronize(origin_), "synchronize");
  origin_ns_ = now_ns();
}

void CudaDevice::wait_event(Event e) {
  check_cuda(cudaStreamWaitEvent(current_, events_[static_cast<std::size_t>(e)], 0), "wait event");
}

void CudaDevice::synchronize() { check_cuda(cudaDeviceSynchronize(), "synchronize"); }

void CudaDevice::align_clock() {
  synchronize();
  job_.align_clock();
  // The reference event, on an idle device, at a known host time.
  check_cuda(cudaEventRecord(origin_, current_), "record");
  check_cuda(cudaEventSynchronize(origin_), "synchronize");
  origin_ns_ = now_ns();
  used_events_ = 0;
}

}  // namespace parasim::exec
