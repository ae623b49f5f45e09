// Golden outputs for every seed scenario: tests/golden/<scenario>.txt holds each one's
// predicted figures rounded to four significant digits; any change in a prediction shows
// in review as a diff. Run the tests with PARASIM_UPDATE_GOLDEN=1 to rewrite them after an
// intended change.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/planner/golden.hpp"
#include "tests/planner/outcome.hpp"

using namespace parasim;
using parasim::test::exposed;
using parasim::test::golden_text;
using parasim::test::memory;
using parasim::test::Outcome;
using parasim::test::root;
using parasim::test::run;
namespace fs = std::filesystem;

TEST_CASE("every scenario's prediction matches its golden output", "[scenarios][golden]") {
  const std::vector<fs::path> files = test::seed_scenarios();
  REQUIRE_FALSE(files.empty());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string()) {
      test::check_golden(file.stem().string() + ".txt", golden_text(run(file.filename().string())));
    }
  }
}

TEST_CASE("a DeepSeek-V3-shaped run on 256 H100s: dense first layers, uneven stages, the all-to-all over InfiniBand",
          "[scenarios][moe][large]") {
  // scenarios/large: a seed too large to simulate in every golden run (1.8 minutes at its
  // 64 micro-batches a pipeline); here at 16.
  const std::string file = "large/moe-deepseek-v3.yaml";
  const workload::MemoryReport mem = memory(file);
  CHECK(mem.fits());
  // 61 layers over 16 stages: 4 on each of the first 13, 3 on the last 3; stage 0's first
  // 3 are the dense ones. A layer: latent attention 187,107,328 and norms 28,672; a dense
  // MLP of 18,432 (396,361,728), or 16 of the 256 experts, the shared one and the router.
  const scenario::Scenario s = scenario::load((root / "scenarios" / file).string());
  const double moe_layer = scenario::layer_params_on_rank(s.model, 10, 1, 16);
  const double dense_layer = scenario::layer_params_on_rank(s.model, 0, 1, 16);
  const double expert = 3.0 * 7168 * 2048;
  CHECK(dense_layer == Approx(187107328.0 + 28672 + 396361728.0));
  CHECK(moe_layer == Approx(187107328.0 + 28672 + 17 * expert + 256 * 7168));
  CHECK(mem.stages[1].parameters == Approx(4 * moe_layer));
  CHECK(mem.stages[13].parameters == Approx(3 * moe_layer));
  CHECK(mem.stages[0].parameters ==
        Approx(3 * dense_layer + moe_layer + static_cast<double>(s.model.vocab) * s.model.hidden));
  const Outcome o = run(file, {"training.global_batch=256"});
  test::check_golden("large/moe-deepseek-v3.txt", golden_text(o));
  // Without tensor parallelism the token all-to-alls are the communication that shows.
  for (report::Dimension d : {report::Dimension::tp, report::Dimension::pp, report::Dimension::dp}) {
    CHECK(exposed(o, d) < exposed(o, report::Dimension::ep));
  }
}
