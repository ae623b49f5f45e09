// CPU backend probe: MPI library version (callable before MPI_Init) and a 2x2 SGEMM
// through CBLAS checked against the product worked by hand.
#include <cblas.h>
#include <mpi.h>

#include <array>
#include <fmt/format.h>

#include "exec/backend.hpp"

namespace parasim::exec {

BackendStatus cpu_status() {
  BackendStatus s{"cpu", true, false, {}};
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> version{};
  int len = 0;
  MPI_Get_library_version(version.data(), &len);
  std::string mpi(version.data(), static_cast<std::size_t>(len));
  if (auto nl = mpi.find_first_of(",\n"); nl != std::string::npos) mpi.resize(nl);

  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
  const std::array<float, 4> a{1, 2, 3, 4};
  const std::array<float, 4> b{5, 6, 7, 8};
  std::array<float, 4> c{};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0F, a.data(), 2, b.data(), 2, 0.0F, c.data(), 2);
  const bool gemm_ok = c == std::array<float, 4>{19, 22, 43, 50};
  s.usable = gemm_ok;
  s.detail = fmt::format("{}; BLAS sgemm check {}", mpi, gemm_ok ? "passed" : "FAILED");
  return s;
}

}  // namespace parasim::exec
