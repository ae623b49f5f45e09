#include "sim/planner.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "plan/memory.hpp"
#include "report/metrics.hpp"
#include "sim/estimate.hpp"
#include "sim/simulate.hpp"

namespace parasim::sim {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string memory_reason(const plan::Scenario& s) {
  const plan::MemoryReport r = plan::memory_per_rank(s);
  if (r.fits()) return {};
  const plan::MemoryBreakdown& b = r.peak();
  const double state = b.weights + b.gradients + b.master + b.optimizer + b.workspace;
  return state > r.capacity ? "model state exceeds memory" : "activations exceed memory";
}

void score_range(const plan::Scenario& base, const std::vector<plan::Candidate>& all, std::size_t begin,
                 std::size_t end, std::vector<PlanScore>& fits, std::map<std::string, std::size_t>& rejected) {
  Estimator estimator(base);
  for (std::size_t i = begin; i < end; ++i) {
    const plan::Scenario s = plan::with_candidate(base, all[i]);
    const plan::MemoryReport mem = plan::memory_per_rank(s);
    if (!mem.fits()) {
      ++rejected[memory_reason(s)];
      continue;
    }
    const StepEstimate e = estimator.estimate(s);
    PlanScore p;
    p.index = i;
    p.candidate = all[i];
    p.step_time = e.step_time;
    p.estimate = e.step_time;
    p.tokens_per_s = e.tokens_per_s;
    p.mfu = e.mfu;
    p.memory = mem.peak().total();
    p.bottleneck = e.bottleneck;
    fits.push_back(std::move(p));
  }
}

void rank(std::vector<PlanScore>& scores) {
  std::sort(scores.begin(), scores.end(), [](const PlanScore& a, const PlanScore& b) {
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    return a.index < b.index;
  });
}

void resimulate(const plan::Scenario& base, std::vector<PlanScore>& ranked, int count) {
  const std::size_t n = std::min(ranked.size(), static_cast<std::size_t>(std::max(0, count)));
  for (std::size_t i = 0; i < n; ++i) {
    PlanScore& p = ranked[i];
    const plan::Scenario s = plan::with_candidate(base, p.candidate);
    const Prediction pred = predict(s);
    const report::StepFigures f = report::step_figures(s, pred.trace, topology::Cluster(s.cluster));
    p.step_time = f.step_time;
    p.tokens_per_s = f.tokens_per_s;
    p.mfu = f.mfu;
    p.bottleneck = f.bottleneck;
    p.simulated = true;
  }
  // The simulated plans first, ranked among themselves; then the estimated ones.
  std::stable_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n), [](const PlanScore& a, const PlanScore& b) {
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    return a.index < b.index;
  });
}

PlanReport plan_search(const plan::Scenario& scenario, const PlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const plan::Scenario base = plan::on_devices(scenario, options.devices);
  PlanReport report;
  report.devices = options.devices > 0 ? options.devices : base.cluster.total_gpus();
  report.capacity = base.cluster.device.memory_bytes;
  const std::vector<plan::Candidate> all = plan::enumerate_plans(base, report.devices);
  report.candidates = all.size();
  unsigned threads = options.threads > 0 ? static_cast<unsigned>(options.threads) : std::thread::hardware_concurrency();
  threads = std::max(1U, std::min<unsigned>(threads, static_cast<unsigned>(all.size() / 64 + 1)));
  std::vector<std::vector<PlanScore>> fits(threads);
  std::vector<std::map<std::string, std::size_t>> rejected(threads);
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < threads; ++w) {
    const std::size_t begin = all.size() * w / threads;
    const std::size_t end = all.size() * (w + 1) / threads;
    workers.emplace_back([&, w, begin, end] { score_range(base, all, begin, end, fits[w], rejected[w]); });
  }
  for (std::thread& t : workers) t.join();
  for (unsigned w = 0; w < threads; ++w) {
    report.ranked.insert(report.ranked.end(), fits[w].begin(), fits[w].end());
    for (const auto& [reason, n] : rejected[w]) report.rejected[reason] += n;
  }
  rank(report.ranked);
  report.score_seconds = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  resimulate(base, report.ranked, options.resimulate);
  report.resimulate_seconds = seconds_since(t1);
  return report;
}

}  // namespace parasim::sim
