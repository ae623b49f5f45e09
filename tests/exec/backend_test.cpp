#include <catch2/catch.hpp>

#include "exec/backend.hpp"
#include "parasim/config.hpp"

using namespace parasim::exec;
using Catch::Matchers::Contains;

TEST_CASE("the CPU backend is built exactly when MPI and BLAS were found", "[exec][backend]") {
  const BackendStatus s = cpu_status();
  CHECK(s.name == "cpu");
  CHECK(s.built == parasim::config::with_mpi);
  if (s.built) {
    // The probe multiplies a 2x2 matrix through BLAS and compares with the hand result.
    CHECK(s.usable);
    CHECK_THAT(s.detail, Contains("sgemm check passed"));
  } else {
    CHECK_FALSE(s.usable);
    CHECK_THAT(s.detail, Contains("not built"));
  }
}

TEST_CASE("the CUDA backend reports why it cannot run rather than crashing", "[exec][backend]") {
  const BackendStatus s = cuda_status();
  CHECK(s.built == parasim::config::with_cuda);
  if (!s.built) CHECK_THAT(s.detail, Contains("not built"));
  if (s.built && !s.usable) CHECK_THAT(s.detail, Contains("NCCL"));  // versions are known even without a GPU
}

TEST_CASE("backends are found by their scenario name", "[exec][backend]") {
  CHECK(backend_status("cpu").name == "cpu");
  CHECK(backend_status("cuda").name == "cuda");
  const BackendStatus unknown = backend_status("rocm");
  CHECK_FALSE(unknown.built);
  CHECK_THAT(unknown.detail, Contains("expected cpu or cuda"));
}

#ifdef PARASIM_HAVE_CUDA_DEVICE
#include <random>

#include <cuda_runtime_api.h>

#include "exec/cuda/cuda_device.hpp"
#include "exec/model/kernels.hpp"

TEST_CASE("without a usable GPU the CUDA device refuses to start, naming the rank", "[exec][backend][cuda]") {
  int count = 0;
  const bool gpu = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  if (gpu) {
    parasim::exec::CudaDevice dev;  // on a GPU host it starts, alone in its job
    CHECK(dev.world() == 1);
    CHECK(dev.name() == "cuda");
  } else {
    CHECK_THROWS_WITH(parasim::exec::CudaDevice(), Catch::Contains("rank 0: no usable CUDA device"));
  }
}

TEST_CASE("a row-major GEMM maps onto cuBLAS's column-major call", "[exec][backend][cuda]") {
  // A column-major GEMM as cuBLAS defines it (C = op(X) op(Y), leading dimensions), run on
  // the host with the arguments column_major() gives, must equal the row-major product.
  auto column_gemm = [](bool tx, bool ty, int m, int n, int k, const float* x, int ldx, const float* y, int ldy,
                        float* c, int ldc) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        float s = 0.0F;
        for (int p = 0; p < k; ++p) {
          const float xv = tx ? x[p + static_cast<std::size_t>(i) * ldx] : x[i + static_cast<std::size_t>(p) * ldx];
          const float yv = ty ? y[j + static_cast<std::size_t>(p) * ldy] : y[p + static_cast<std::size_t>(j) * ldy];
          s += xv * yv;
        }
        c[i + static_cast<std::size_t>(j) * ldc] = s;
      }
    }
  };
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> d(-1.0F, 1.0F);
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
      for (float& v : a) v = d(gen);
      for (float& v : b) v = d(gen);
      const int lda = ta ? m : k;  // row-major leading dimensions of the stored matrices
      const int ldb = tb ? k : n;
      std::vector<float> want(static_cast<std::size_t>(m) * n), got(want.size());
      parasim::exec::kernels::gemm<float>(ta, tb, m, n, k, 1.0F, a.data(), b.data(), 0.0F, want.data());
      const parasim::exec::ColumnMajorGemm g = parasim::exec::column_major(ta, tb, m, n, k);
      REQUIRE(g.swap_operands);
      column_gemm(g.trans_first, g.trans_second, g.rows, g.cols, g.inner, b.data(), ldb, a.data(), lda, got.data(), n);
      INFO("trans_a " << ta << ", trans_b " << tb);
      for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5));
    }
  }
}
#endif
