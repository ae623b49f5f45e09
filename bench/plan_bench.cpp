// Planner speed: every valid plan of GPT-3 175B (global batch 1536, bf16) on N DGX H100
// GPUs scored by the analytical tier, then the best R re-simulated by the event simulator.
// Targets (docs/performance.md): 1,024 GPUs scored in under 10 s on one core, the top 20
// re-simulated in under 30 s.
//
//   parasim_plan_bench [--gpus N] [--threads T] [--resimulate R] [--json]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "planner/planner.hpp"

using namespace parasim;

int main(int argc, char** argv) {
  int gpus = 1024;
  int threads = 1;
  int resimulate = 20;
  bool json = false;
  std::string model = "gpt3-175b";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
      gpus = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--resimulate") == 0 && i + 1 < argc) {
      resimulate = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      model = argv[++i];
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--gpus N] [--threads T] [--resimulate R] [--model PRESET] [--json]   (N a multiple of 64)\n", argv[0]);
      return 2;
    }
  }
  if (gpus < 64 || gpus % 64 != 0) {
    std::fprintf(stderr, "--gpus must be a multiple of 64, got %d\n", gpus);
    return 2;
  }
  // Any valid plan to start from: the planner replaces it.
  const std::string text = fmt::format(R"(name: {3}-{0}
cluster: {{preset: dgx-h100, nodes: {1}}}
model: {3}
training: {{global_batch: 1536, micro_batch: 1, precision: bf16}}
plan: {{tp: 8, pp: 2, dp: {2}}}
)",
                                       gpus, gpus / 8, gpus / 16, model);
  const scenario::Scenario s = scenario::load_text(text, "bench.yaml");
  planner::PlanOptions o;
  o.threads = threads;
  o.resimulate = resimulate;
  const planner::PlanReport r = planner::plan_search(s, o);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double rss = static_cast<double>(u.ru_maxrss) / 1024.0;
  std::size_t rejected = 0;
  for (const auto& [reason, n] : r.rejected) rejected += n;
  const planner::PlanScore& best = r.ranked.front();
  if (json) {
    fmt::print(
        R"({{"gpus": {}, "threads": {}, "valid_plans": {}, "fit": {}, "rejected": {}, "score_s": {:.3f}, )"
        R"("plans_per_s": {:.0f}, "resimulated": {}, "resimulate_s": {:.3f}, "peak_rss_mib": {:.0f}, "best": "{}", )"
        R"("best_step_time_s": {:.4f}}})"
        "\n",
        gpus, threads, r.candidates, r.ranked.size(), rejected, r.score_seconds,
        static_cast<double>(r.candidates) / r.score_seconds, r.simulated, r.resimulate_seconds, rss,
        planner::describe(best.candidate), best.step_time);
  } else {
    fmt::print("{} on {} GPUs, {} thread(s)\n", model, gpus, threads);
    fmt::print("valid plans        {} ({} fit, {} rejected)\n", r.candidates, r.ranked.size(), rejected);
    fmt::print("analytical tier    {:.2f} s ({:.0f} plans/s)\n", r.score_seconds, static_cast<double>(r.candidates) / r.score_seconds);
    fmt::print("re-simulated       {} (the best {} and any whose estimate beat them) in {:.2f} s\n", r.simulated, resimulate,
               r.resimulate_seconds);
    fmt::print("peak memory        {:.0f} MiB\n", rss);
    fmt::print("best plan          {} ({:.3f} s per step, {})\n", planner::describe(best.candidate), best.step_time,
               best.simulated ? "simulated" : "estimate");
  }
  return 0;
}
