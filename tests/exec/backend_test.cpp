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
