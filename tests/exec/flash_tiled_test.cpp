// FlashAttention-2's tiled algorithm on the host (exec/model/flash_tiled.hpp), the model the
// tensor-core kernels are tested against, against the untiled attention.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "exec/model/flash_tiled.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/random.hpp"

TEST_CASE("FlashAttention-2's tiles, as the tensor-core kernels run them, equal the untiled attention",
          "[exec][model]") {
  // 2 sequences, 2 heads; 77 positions (a full tile of 64 and a partial one) and 130 (three
  // tiles, the last of 2 rows); head sizes 16 and 64. Without rounding (format 0) the tiled
  // online softmax, the causal skipping of tiles and the two-pass backward give the
  // untiled reference's values to fp32's rounding; with the GEMM operands rounded to bf16
  // or fp16 (what tensor cores multiply) they stay within a few of the format's ulps of it
  // (bf16 keeps 8 significant bits, fp16 11: bounds about 3x the errors measured), and
  // really differ from the unrounded ones.
  namespace tiled = parasim::exec::flash_tiled;
  for (const int t : {77, 130}) {
    for (const int d : {16, 64}) {
      INFO("t " << t << ", d " << d);
      const int b = 2, h = 2, c = h * d;
      std::uint64_t state = static_cast<std::uint64_t>(t * 1000 + d);
      std::vector<float> qkv(static_cast<std::size_t>(b) * t * 3 * c), dout(static_cast<std::size_t>(b) * t * c);
      for (float& v : qkv) v = static_cast<float>(parasim::exec::normal(state));
      for (float& v : dout) v = static_cast<float>(parasim::exec::normal(state));
      const auto worst = [](const std::vector<float>& got, const std::vector<float>& want) {
        double diff = 0.0, scale = 1e-30;
        for (std::size_t i = 0; i < got.size(); ++i) {
          diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
          scale = std::max(scale, static_cast<double>(std::abs(want[i])));
        }
        return diff / scale;
      };
      std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(b) * h * t), dqkv(qkv.size());
      parasim::exec::kernels::flash_attention_forward(out.data(), lse.data(), qkv.data(), b, t, h, d);
      parasim::exec::kernels::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(), b,
                                                       t, h, d);
      std::vector<float> plain_out;
      for (const int format : {0, 1, 2}) {
        INFO("format " << format);
        std::vector<float> tout(out.size(), 7.0F), tlse(lse.size(), 7.0F), tdqkv(qkv.size(), 7.0F);
        tiled::forward(tout.data(), tlse.data(), qkv.data(), b, t, h, d, format);
        tiled::backward(tdqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(), b, t, h, d, format);
        // Measured: bf16 at most 3.9e-3 (out), 1.1e-3 (lse), 8.2e-3 (dqkv); fp16 4.8e-4,
        // 1.3e-4, 7.0e-4; unrounded 2.5e-7, 1.6e-7, 0.
        const double bound = format == 0 ? 1e-6 : format == 1 ? 1.2e-2 : 1.5e-3;
        CHECK(worst(tout, out) < bound);
        CHECK(worst(tlse, lse) < bound / 3);
        CHECK(worst(tdqkv, dqkv) < bound * 2);  // every entry written: no 7 left
        if (format == 0) plain_out = tout;
        if (format != 0) CHECK(worst(tout, plain_out) > 1e-4);
      }
    }
  }
}
