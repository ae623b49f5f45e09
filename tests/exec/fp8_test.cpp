// The host side of FP8 GEMMs on tensor cores (exec/model/fp8.hpp): the TN layout cuBLASLt
// multiplies, the alignment it is told, and the address-keyed tags and codes a released
// buffer drops.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "exec/model/fp8.hpp"

using namespace parasim::exec;

TEST_CASE("FP8 GEMMs' TN layout: the gathered operands multiplied as cuBLASLt does give the row-major GEMM",
          "[exec][model][fp8]") {
  // exec/cuda/fp8_gemm.cpp gathers op(B)^T and op(A) (fp8.hpp) and has cuBLASLt compute the
  // column-major D[n x m] = A^T B from them, with A and B stored K x n and K x m; D with
  // leading dimension ldc is then the row-major C[m x n]. Checked here on the host in every
  // transpose form, with leading dimensions wider than the operands.
  const int m = 5, n = 7, k = 4, pad = 3;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
      std::vector<float> a(static_cast<std::size_t>((ta ? k : m) * lda)),
          b(static_cast<std::size_t>((tb ? n : k) * ldb));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 11) - 5);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
      // The row-major reference, element by element.
      auto at = [](const std::vector<float>& v, int i) { return v[static_cast<std::size_t>(i)]; };
      auto op_a = [&](int i, int kk) { return ta ? at(a, kk * lda + i) : at(a, i * lda + kk); };
      auto op_b = [&](int kk, int j) { return tb ? at(b, j * ldb + kk) : at(b, kk * ldb + j); };
      // The gathered operands.
      const fp8::TnOperand first = fp8::tn_first(tb, n, k), second = fp8::tn_second(ta, m, k);
      REQUIRE(first.rows == n);
      REQUIRE(second.rows == m);
      std::vector<float> qa(static_cast<std::size_t>(n * k)), qb(static_cast<std::size_t>(m * k));
      for (int r = 0; r < first.rows; ++r) {
        for (int c = 0; c < first.cols; ++c) {
          qa[static_cast<std::size_t>(r * k + c)] =
              b[static_cast<std::size_t>(fp8::gather_index(r, c, ldb, first.transposed))];
        }
      }
      for (int r = 0; r < second.rows; ++r) {
        for (int c = 0; c < second.cols; ++c) {
          qb[static_cast<std::size_t>(r * k + c)] =
              a[static_cast<std::size_t>(fp8::gather_index(r, c, lda, second.transposed))];
        }
      }
      // cuBLASLt's TN product: A stored K x n column-major is qa, B stored K x m is qb;
      // D(row jj, column ii) at D[jj + ii * ldc].
      std::vector<float> d(static_cast<std::size_t>(m * ldc), 0.0F);
      for (int jj = 0; jj < n; ++jj) {
        for (int ii = 0; ii < m; ++ii) {
          float s = 0.0F;
          for (int kk = 0; kk < k; ++kk) s += at(qa, jj * k + kk) * at(qb, ii * k + kk);
          d[static_cast<std::size_t>(jj + ii * ldc)] = s;
        }
      }
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          float want = 0.0F;
          for (int kk = 0; kk < k; ++kk) want += op_a(i, kk) * op_b(kk, j);
          INFO("C(" << i << ", " << j << ")");
          CHECK(d[static_cast<std::size_t>(i * ldc + j)] == want);  // small integers: exact
        }
      }
    }
  }
}

TEST_CASE("an FP8 GEMM's matrices report the alignment they really have to cuBLASLt", "[exec][fp8]") {
  // The lowest set bit of the address and of the bytes between rows, capped at 256.
  const auto at = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };
  CHECK(fp8::buffer_alignment(at(0x7f0000000000), 4096) == 256);  // a fresh block, wide rows
  CHECK(fp8::buffer_alignment(at(0x7f0000000010), 4096) == 16);   // 16 bytes into a buffer
  CHECK(fp8::buffer_alignment(at(0x7f0000000040), 4096) == 64);
  CHECK(fp8::buffer_alignment(at(0x7f0000000000), 48) == 16);   // rows of 12 floats
  CHECK(fp8::buffer_alignment(at(0x7f0000000000), 12) == 4);    // rows of 3 floats
  CHECK(fp8::buffer_alignment(at(0x7f0000000004), 4096) == 4);  // a float into a buffer
}

TEST_CASE("a released buffer drops every FP8 entry inside it, not only the one at its start", "[exec][fp8]") {
  // calibrate quantizes copies at offsets inside one buffer: the release of that buffer
  // must drop all of them (before, only the entry at its start went, and the codes of the
  // others outlived their memory).
  fp8::AddressMap<int> map;
  std::vector<float> buffer(1024), other(16);
  for (int i = 0; i < 4; ++i) map[buffer.data() + 256 * i] = i;
  map[other.data()] = 9;
  REQUIRE(map.size() == 5);
  REQUIRE(map.find(buffer.data() + 512) != nullptr);
  CHECK(*map.find(buffer.data() + 512) == 2);
  CHECK(map.find(buffer.data() + 1) == nullptr);

  // The one-entry form (a batched GEMM's operand) drops only the address itself.
  CHECK(map.extract_range(buffer.data() + 256, 0) == std::vector<int>{1});
  CHECK(map.size() == 4);
  // A release: everything inside [start, start + bytes), in address order, nothing beside it.
  CHECK(map.extract_range(buffer.data(), buffer.size() * sizeof(float)) == std::vector<int>{0, 2, 3});
  REQUIRE(map.size() == 1);
  CHECK(*map.find(other.data()) == 9);
  CHECK(map.extract_all() == std::vector<int>{9});
  CHECK(map.size() == 0);
}
