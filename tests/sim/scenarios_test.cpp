// The outcomes the scenarios in scenarios/ demonstrate, and golden outputs for every one.
//
// Goldens: tests/golden/<scenario>.txt holds each scenario's predicted figures rounded to
// four significant digits; any change in a prediction shows in review as a diff. Run the
// tests with PARASIM_UPDATE_GOLDEN=1 to rewrite them after an intended change.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "plan/load.hpp"
#include "plan/memory.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"

using namespace parasim;
namespace fs = std::filesystem;

namespace {

const fs::path root = PARASIM_SOURCE_DIR;

struct Outcome {
  plan::Scenario scenario;
  report::StepFigures figures;
  sim::SimStats stats;
};

Outcome run(const std::string& file, const std::vector<std::string>& sets = {}) {
  Outcome o{plan::load((root / "scenarios" / file).string(), sets), {}, {}};
  const plan::Program prog = plan::compile(o.scenario);
  const report::Trace t = sim::simulate(o.scenario, prog, &o.stats);
  o.figures = report::step_figures(o.scenario, t, topology::Cluster(o.scenario.cluster));
  return o;
}

std::string golden_text(const Outcome& o) {
  const auto& f = o.figures;
  const plan::MemoryReport mem = plan::memory_per_rank(o.scenario);
  std::string s = fmt::format("scenario {}\n", o.scenario.name);
  s += fmt::format("step_time_s {:.4g}\nsamples_per_s {:.4g}\ntokens_per_s {:.4g}\nmfu {:.4g}\nbubble {:.4g}\n",
                   f.step_time, f.samples_per_s, f.tokens_per_s, f.mfu, f.bubble_fraction);
  for (int d = 0; d < 3; ++d) {
    s += fmt::format("{}_comm_s {:.4g} exposed_s {:.4g}\n", report::dimension_names[static_cast<std::size_t>(d)],
                     f.comm_mean[static_cast<std::size_t>(d)], f.exposed_mean[static_cast<std::size_t>(d)]);
  }
  for (const auto& b : mem.stages) s += fmt::format("memory_stage{} {:.4g} GiB\n", b.stage, b.total() / (1ULL << 30));
  s += fmt::format("fits {}\nbottleneck {}\n", mem.fits() ? "yes" : "no", f.bottleneck);
  s += fmt::format("ops {} events {} flows {}\ncollectives", o.stats.ops, o.stats.events, o.stats.flows);
  for (const auto& [algorithm, n] : o.stats.algorithms) s += fmt::format(" {} {}", algorithm, n);
  s += "\n";
  return s;
}

}  // namespace

TEST_CASE("scenario 1: data parallel scales on one node, not over a slow network", "[scenarios]") {
  // One GPU runs the same per-GPU work (micro-batch 4, one micro-batch per step).
  const Outcome one = run("dp-one-node.yaml", {"cluster.gpus_per_node=1", "plan.dp=1", "training.global_batch=4"});
  const Outcome eight = run("dp-one-node.yaml");
  const Outcome sixteen = run("dp-two-nodes.yaml");
  const double s8 = eight.figures.samples_per_s / one.figures.samples_per_s;
  const double s16 = sixteen.figures.samples_per_s / one.figures.samples_per_s;
  CHECK(s8 > 7.6);  // near 8x: the all-reduce hides behind backward on NVSwitch
  CHECK(s16 > 8.0);
  CHECK(s16 < 12.0);  // far from 16x: about 10x
  CHECK_THAT(sixteen.figures.bottleneck, Catch::Matchers::Contains("exposed data-parallel gradient synchronisation") &&
                                             Catch::Matchers::Contains("inter-node"));
  CHECK_THAT(eight.figures.bottleneck, Catch::Matchers::Contains("compute-bound"));
}

TEST_CASE("scenario 2: LeNet gains almost nothing from data parallelism, ResNet-18 scales", "[scenarios]") {
  // Fixed global batch of 256: dp GPUs each take 256 / dp images in one micro-batch.
  auto speedup = [](const std::string& file, int dp) {
    const auto at = [&](int n) {
      return run(file, {fmt::format("plan.dp={}", n), fmt::format("training.micro_batch={}", 256 / n)})
          .figures.samples_per_s;
    };
    return at(dp) / at(1);
  };
  const double lenet4 = speedup("cnn-lenet.yaml", 4);
  const double resnet2 = speedup("cnn-resnet18.yaml", 2);
  const double resnet4 = speedup("cnn-resnet18.yaml", 4);
  CHECK(lenet4 < 2.0);    // 4 GPUs, not even twice as fast
  CHECK(resnet2 > 1.9);
  CHECK(resnet4 > 3.6);   // nearly linear
  CHECK(resnet4 > 2 * lenet4);
}

TEST_CASE("every scenario's prediction matches its golden output", "[scenarios][golden]") {
  const bool update = std::getenv("PARASIM_UPDATE_GOLDEN") != nullptr;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(root / "scenarios")) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string()) {
      const std::string actual = golden_text(run(file.filename().string()));
      const fs::path golden = root / "tests" / "golden" / (file.stem().string() + ".txt");
      if (update) {
        fs::create_directories(golden.parent_path());
        std::ofstream(golden) << actual;
      }
      std::ifstream in(golden);
      INFO("golden file " << golden.string() << " (set PARASIM_UPDATE_GOLDEN=1 to write it)");
      REQUIRE(in.good());
      std::stringstream expected;
      expected << in.rdbuf();
      CHECK(actual == expected.str());
    }
  }
}
