// FP8 GEMMs on tensor cores: cuBLASLt's FP8 matmul for the GEMMs whose operands the shard
// fake-quantized (cuda_device.hpp, Fp8Tag). The operands hold FP8 values over their scale;
// cast back to codes at that scale they are exactly the FP8 tensors Transformer Engine
// would multiply, and cuBLASLt's A and B scale pointers take 1 / scale back out.
//
// cuBLASLt runs FP8 only as "TN" and never with two E5M2 operands; exec/model/fp8.hpp
// (tn_first, tn_second, gather_index) maps the row-major GEMM onto it, which the host
// tests check against the GEMM itself, and fp8_cast_gather writes both operands so.
// Forward GEMMs (two E4M3 operands) use fast accumulation, the gradients' GEMMs the split
// accumulator, as Transformer Engine does.
#include <cublasLt.h>

#include <stdexcept>
#include <string>

#include "exec/cuda/check.hpp"
#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/kernels.hpp"
#include "exec/model/fp8.hpp"

namespace parasim::exec {

namespace {

// cuBLASLt's descriptors, destroyed with the call.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtCall() = default;
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;
  ~LtCall() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

}  // namespace

void CudaDevice::drop_fp8(const void* p, std::size_t bytes) {
  fp8_tags_.extract_range(p, bytes);
  // The codes' buffers are released once the map is whole (their release drops their range).
  std::vector<Fp8Codes> codes = fp8_codes_.extract_range(p, bytes);
}

const std::uint8_t* CudaDevice::fp8_codes(const float* src, const Fp8Tag& tag, int ld, int rows, int cols,
                                          bool transposed) {
  Fp8Codes& c = fp8_codes_[src];
  if (!c.codes.empty() && c.version == tag.version && c.ld == ld && c.rows == rows && c.cols == cols &&
      c.transposed == transposed) {
    return c.codes.u8();
  }
  const std::size_t bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (c.codes.bytes() < bytes) {
    c.codes = Buffer();  // (its release drops nothing of this map: codes are no keys)
    c.codes = allocate(bytes);
  }
  cuda::fp8_cast_gather(current_, c.codes.u8(), src, ld, rows, cols, transposed, fp8_scales_ + 2 * tag.slot, tag.e5m2);
  c.version = tag.version;
  c.rows = rows;
  c.cols = cols;
  c.ld = ld;
  c.transposed = transposed;
  return c.codes.u8();
}

bool CudaDevice::gemm_fp8(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                          const float* b, int ldb, float beta, float* c, int ldc) {
  if (!fp8_tensor_cores_) return false;
  const Fp8Tag* ta = fp8_tags_.find(a);
  const Fp8Tag* tb = fp8_tags_.find(b);
  if (ta == nullptr || tb == nullptr) return false;
  const Fp8Tag first = *tb;   // cuBLASLt's A: op(B)^T
  const Fp8Tag second = *ta;  // cuBLASLt's B: op(A)
  // FP8 needs 16-byte aligned rows (K a multiple of 16; the fp32 output's rows 16 bytes
  // apart) and at least one E4M3 operand.
  if (k % 16 != 0 || n % 16 != 0 || ldc % 4 != 0 || (first.e5m2 && second.e5m2)) {
    ++fp8_fallbacks_;
    return false;
  }

  const float* scale_first = fp8_scales_ + 2 * first.slot;
  const float* scale_second = fp8_scales_ + 2 * second.slot;
  const fp8::TnOperand lay_first = fp8::tn_first(trans_b, n, k), lay_second = fp8::tn_second(trans_a, m, k);
  const std::uint8_t* qa = fp8_codes(b, first, ldb, lay_first.rows, lay_first.cols, lay_first.transposed);
  const std::uint8_t* qb = fp8_codes(a, second, lda, lay_second.rows, lay_second.cols, lay_second.transposed);

  // Any setup or call cuBLASLt refuses (a type, layout or alignment this version or GPU
  // lacks) leaves the GEMM to the bf16 path, which multiplies the same values: counted in
  // fp8_fallbacks() and reported with the run, never the end of it. The heuristic is told
  // each matrix's real alignment (the output may start inside a buffer).
  LtCall call;
  const auto ok = [](cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; };
  const cublasOperation_t transpose = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  const float* descale_first = scale_first + 1;
  const float* descale_second = scale_second + 1;
  const std::int8_t fast = first.e5m2 || second.e5m2 ? 0 : 1;
  const auto type = [](bool e5m2) { return e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; };
  const auto u64 = [](int v) { return static_cast<std::uint64_t>(v); };
  const std::size_t workspace = lt_workspace_bytes;
  const std::uint32_t align_a = fp8::buffer_alignment(qa, static_cast<std::size_t>(k));
  const std::uint32_t align_b = fp8::buffer_alignment(qb, static_cast<std::size_t>(k));
  const std::uint32_t align_c = fp8::buffer_alignment(c, static_cast<std::size_t>(ldc) * sizeof(float));
  const auto prefer = [&](cublasLtMatmulPreferenceAttributes_t what, const void* value, std::size_t size) {
    return ok(cublasLtMatmulPreferenceSetAttribute(call.pref, what, value, size));
  };
  if (!ok(cublasLtMatmulDescCreate(&call.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &descale_first,
                                         sizeof descale_first)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &descale_second,
                                         sizeof descale_second)) ||
      !ok(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast)) ||
      !ok(cublasLtMatrixLayoutCreate(&call.a, type(first.e5m2), u64(k), u64(n), k)) ||
      !ok(cublasLtMatrixLayoutCreate(&call.b, type(second.e5m2), u64(k), u64(m), k)) ||
      !ok(cublasLtMatrixLayoutCreate(&call.c, CUDA_R_32F, u64(n), u64(m), ldc)) ||
      !ok(cublasLtMatmulPreferenceCreate(&call.pref)) ||
      !prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace) ||
      !prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a) ||
      !prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b) ||
      !prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c) ||
      !prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c)) {
    ++fp8_fallbacks_;
    return false;
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt_, call.desc, call.a, call.b, call.c, call.c, call.pref, 1, &heuristic, &found) !=
          CUBLAS_STATUS_SUCCESS ||
      found == 0) {
    ++fp8_fallbacks_;  // no FP8 algorithm for this shape
    return false;
  }
  if (cublasLtMatmul(lt_, call.desc, &alpha, qa, call.a, qb, call.b, &beta, c, call.c, c, call.c, &heuristic.algo,
                     lt_workspace_, lt_workspace_bytes, current_) != CUBLAS_STATUS_SUCCESS) {
    cudaGetLastError();  // a refused launch leaves c untouched: the bf16 path computes it
    ++fp8_fallbacks_;
    return false;
  }
  count_flops(2.0 * m * n * static_cast<double>(k));
  ++fp8_gemms_;
  return true;
}

}  // namespace parasim::exec
