#include "planner/planner.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenario/limits.hpp"
#include "workload/memory.hpp"
#include "planner/search.hpp"
#include "planner/workers.hpp"
#include "report/metrics.hpp"
#include "planner/estimate.hpp"
#include "sim/simulate.hpp"

namespace parasim::planner {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best first: by tokens/s, then by enumeration order.
bool better(const PlanScore& a, const PlanScore& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  return a.index < b.index;
}

}  // namespace

std::string reason_id(std::string_view reason) {
  std::string id;
  bool gap = false;
  for (char ch : reason) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0) {
      if (gap && !id.empty()) id += '_';
      id += static_cast<char>(std::tolower(c));
      gap = false;
    } else {
      gap = true;
    }
  }
  return id;
}

std::string memory_reason(const workload::MemoryReport& r) {
  if (r.fits()) return {};
  const workload::MemoryBreakdown& b = r.peak();
  const double state = b.weights + b.gradients + b.master + b.optimizer + b.workspace + b.communicators;
  return state > r.usable() ? "model state exceeds memory" : "activations exceed memory";
}

namespace {

// A phase's progress shared by its workers: each adds what it finished and reports the
// total; a set cancel flag ends the work.
struct Watch {
  const PlanOptions* options = nullptr;
  std::string_view phase;
  std::size_t total = 0;
  std::atomic<std::size_t> done{0};
  void poll() const {
    if (options == nullptr) return;
    if (options->cancel != nullptr && options->cancel->load(std::memory_order_relaxed)) throw Cancelled();
    if (options->deadline && std::chrono::steady_clock::now() > *options->deadline) throw Cancelled();
  }
  void add(std::size_t n) {
    if (options == nullptr) return;
    poll();
    const std::size_t now = done.fetch_add(n) + n;
    if (options->progress) options->progress(phase, now, total);
  }
};

void score_slice(const scenario::Scenario& base, const std::vector<planner::Candidate>& all, std::size_t begin,
                 std::size_t end, std::vector<PlanScore>& fits, std::map<std::string, std::size_t>& rejected,
                 Watch& watch) {
  Estimator estimator(base);
  constexpr std::size_t batch = 256;  // candidates between progress reports
  for (std::size_t i = begin; i < end; ++i) {
    if ((i - begin) % batch == batch - 1) watch.add(batch);
    watch.poll();  // each plan: the first ones on a large cluster cost milliseconds (routes not yet cached)
    const scenario::Scenario s = planner::with_candidate(base, all[i]);
    const workload::MemoryReport mem = workload::memory_per_rank(s);
    if (!mem.fits()) {
      ++rejected[memory_reason(mem)];
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
    p.compute = std::max(0.0, e.pipeline * (1.0 - e.bubble)) + e.optimizer;
    p.communication = e.tp_exposed + e.dp_exposed + e.cp_exposed + e.ep_exposed + e.offload_exposed + e.syncbn_exposed;
    fits.push_back(std::move(p));
  }
  watch.add((end - begin) % batch);
}

}  // namespace

void score_range(const scenario::Scenario& base, const std::vector<planner::Candidate>& all, std::size_t begin,
                 std::size_t end, std::vector<PlanScore>& fits, std::map<std::string, std::size_t>& rejected,
                 int threads, const PlanOptions* options) {
  const std::size_t n = end - begin;
  Watch watch;
  watch.options = options;
  watch.phase = "scoring plans";
  watch.total = n;
  unsigned t = threads > 0 ? static_cast<unsigned>(threads) : std::thread::hardware_concurrency();
  t = std::max(1U, std::min<unsigned>(t, static_cast<unsigned>(n / 64 + 1)));
  std::vector<std::vector<PlanScore>> part(t);
  std::vector<std::map<std::string, std::size_t>> reasons(t);
  run_workers(t, [&](unsigned w) {
    score_slice(base, all, begin + n * w / t, begin + n * (w + 1) / t, part[w], reasons[w], watch);
  });
  for (unsigned w = 0; w < t; ++w) {
    fits.insert(fits.end(), part[w].begin(), part[w].end());
    for (const auto& [reason, count] : reasons[w]) rejected[reason] += count;
  }
}

void rank(std::vector<PlanScore>& scores) { std::sort(scores.begin(), scores.end(), better); }

namespace {

// Simulates rows [begin, end) of `ranked` on `threads` threads, each taking every t-th.
void simulate_rows(const scenario::Scenario& base, std::vector<PlanScore>& ranked, std::size_t begin, std::size_t end,
                   unsigned threads, Watch& watch) {
  const unsigned t = std::max(1U, std::min<unsigned>(threads, static_cast<unsigned>(end - begin)));
  run_workers(t, [&](unsigned w) {
      for (std::size_t i = begin + w; i < end; i += t) {
        watch.poll();  // a cancel stops before the next simulation
        PlanScore& p = ranked[i];
        const scenario::Scenario s = planner::with_candidate(base, p.candidate);
        std::optional<sim::Prediction> simulated;
        try {
          simulated = sim::predict(s);
        } catch (const program::ProgramTooLarge&) {
          watch.add(1);  // past the simulator's op limit: the plan keeps its estimate
          continue;
        }
        const sim::Prediction& pred = *simulated;
        const report::StepFigures f = report::step_figures(s, pred.trace, topology::Cluster(s.cluster));
        p.step_time = f.step_time;
        p.tokens_per_s = f.tokens_per_s;
        p.mfu = f.mfu;
        p.bottleneck = f.bottleneck;
        const report::StepEnergy energy = report::step_energy(s, pred.trace);
        p.compute = energy.compute;
        p.communication = energy.communication;
        p.simulated = true;
        watch.add(1);
      }
  });
}

}  // namespace

std::size_t resimulate(const scenario::Scenario& base, std::vector<PlanScore>& ranked, int count, int threads,
                       const PlanOptions* options) {
  const std::size_t want = std::min(ranked.size(), static_cast<std::size_t>(std::max(0, count)));
  if (want == 0) return 0;
  const unsigned t = threads > 0 ? static_cast<unsigned>(threads) : std::max(1U, std::thread::hardware_concurrency());
  Watch watch;
  watch.options = options;
  watch.phase = "simulating the best plans";
  watch.total = want;  // more may follow, while their estimates beat the simulated
  simulate_rows(base, ranked, 0, want, t, watch);
  // Then, while the next plan's estimate still beats the best simulated throughput, it
  // could be the best: simulate it too (a batch per round, up to 4 x count in all).
  std::size_t done = want;
  const std::size_t cap = std::min(ranked.size(), 4 * want);
  while (done < cap) {
    double best = 0.0;
    for (std::size_t i = 0; i < done; ++i) best = std::max(best, ranked[i].tokens_per_s);
    std::size_t end = done;
    while (end < cap && end < done + t && ranked[end].tokens_per_s > best) ++end;
    if (end == done) break;
    watch.total = end;
    simulate_rows(base, ranked, done, end, t, watch);
    done = end;
  }
  // The simulated plans first, ranked among themselves; then the estimated ones.
  std::sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(done), better);
  return done;
}

namespace {

// The search's setting: the scenario on its devices and every candidate, in order.
struct Search {
  scenario::Scenario base;
  int devices = 0;
  std::vector<planner::Candidate> all;
};

Search prepare(const scenario::Scenario& scenario, const PlanOptions& options) {
  Search s;
  s.base = planner::on_devices(scenario, options.devices);
  s.devices = options.devices > 0 ? options.devices : s.base.cluster.total_gpus();
  // Enumerating checks every candidate (about 20 us each: 3.5 s for 165,000 on 8,192
  // GPUs): a cancel or deadline stops it too.
  Watch watch;
  watch.options = &options;
  s.all = planner::enumerate_plans(s.base, s.devices, [&watch] { watch.poll(); });
  return s;
}

PlanReport finish(const Search& search, const PlanOptions& options, std::vector<PlanScore> fits,
                  std::map<std::string, std::size_t> rejected, std::chrono::steady_clock::time_point t0) {
  PlanReport report;
  report.devices = search.devices;
  report.capacity = search.base.cluster.device.memory_bytes;
  report.candidates = search.all.size();
  report.ranked = std::move(fits);
  report.rejected = std::move(rejected);
  rank(report.ranked);
  report.score_seconds = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  report.simulated = resimulate(search.base, report.ranked, options.resimulate, options.threads, &options);
  report.resimulate_seconds = seconds_since(t1);
  return report;
}

std::uint64_t bits(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double from_bits(std::uint64_t b) {
  double v = 0.0;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

}  // namespace

int smallest_fitting_devices(const scenario::Scenario& s, int devices, bool offload) {
  std::vector<long long> sizes;
  for (long long p = 1; p <= scenario::limits::gpus; p *= 2) {
    for (long long d : {p, 3 * p}) {
      if (d > devices && d <= scenario::limits::gpus) sizes.push_back(d);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (long long d : sizes) {
    const scenario::Scenario grown = planner::on_devices(s, static_cast<int>(d));
    for (const planner::Candidate& c : planner::enumerate_plans(grown, static_cast<int>(d))) {
      if (!offload && c.plan.offloads()) continue;
      if (workload::memory_per_rank(planner::with_candidate(grown, c)).fits()) return static_cast<int>(d);
    }
  }
  return 0;
}

PlanReport plan_search(const scenario::Scenario& scenario, const PlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const Search search = prepare(scenario, options);
  std::vector<PlanScore> fits;
  std::map<std::string, std::size_t> rejected;
  score_range(search.base, search.all, 0, search.all.size(), fits, rejected, options.threads, &options);
  return finish(search, options, std::move(fits), std::move(rejected), t0);
}

std::string score_part(const scenario::Scenario& scenario, const PlanOptions& options, int part, int parts) {
  const Search search = prepare(scenario, options);
  const std::size_t n = search.all.size();
  const std::size_t begin = n * static_cast<std::size_t>(part) / static_cast<std::size_t>(parts);
  const std::size_t end = n * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(parts);
  std::vector<PlanScore> fits;
  std::map<std::string, std::size_t> rejected;
  score_range(search.base, search.all, begin, end, fits, rejected, options.threads);
  // Figures as their bits, so the merged ranking is the single process's exactly.
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanScore& p : fits) {
    rows.push_back({p.index, bits(p.step_time), bits(p.tokens_per_s), bits(p.mfu), bits(p.memory), p.bottleneck,
                    bits(p.compute), bits(p.communication)});
  }
  return nlohmann::json{{"rejected", rejected}, {"fits", rows}}.dump();
}

PlanReport merge_parts(const scenario::Scenario& scenario, const PlanOptions& options,
                       const std::vector<std::string>& parts) {
  const auto t0 = std::chrono::steady_clock::now();
  const Search search = prepare(scenario, options);
  std::vector<PlanScore> fits;
  std::map<std::string, std::size_t> rejected;
  for (const std::string& text : parts) {
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const auto& [reason, n] : j.at("rejected").items()) rejected[reason] += n.get<std::size_t>();
    for (const auto& row : j.at("fits")) {
      PlanScore p;
      p.index = row.at(0).get<std::size_t>();
      p.candidate = search.all.at(p.index);
      p.step_time = from_bits(row.at(1).get<std::uint64_t>());
      p.estimate = p.step_time;
      p.tokens_per_s = from_bits(row.at(2).get<std::uint64_t>());
      p.mfu = from_bits(row.at(3).get<std::uint64_t>());
      p.memory = from_bits(row.at(4).get<std::uint64_t>());
      p.bottleneck = row.at(5).get<std::string>();
      p.compute = from_bits(row.at(6).get<std::uint64_t>());
      p.communication = from_bits(row.at(7).get<std::uint64_t>());
      fits.push_back(std::move(p));
    }
  }
  return finish(search, options, std::move(fits), std::move(rejected), t0);
}

std::string_view to_string(Objective o) {
  switch (o) {
    case Objective::step: return "step";
    case Objective::time_to_train: return "time-to-train";
    case Objective::cost: return "cost";
    case Objective::energy: return "energy";
  }
  return "step";
}

double objective_value(const PlanScore& p, Objective o) {
  if (o == Objective::step || !p.run) return p.step_time;
  switch (o) {
    case Objective::time_to_train: return p.run->expected;
    case Objective::cost: return p.run->cost > 0.0 ? p.run->cost : p.run->device_hours;
    case Objective::energy: return p.run->energy;
    case Objective::step: break;
  }
  return p.step_time;
}

void rank_by(const scenario::Scenario& scenario, PlanReport& report, Objective o) {
  if (o == Objective::step) return;
  if (scenario.training.total_steps <= 0) {
    throw std::invalid_argument(fmt::format("ranking by {} needs the run's length: set training.tokens or training.steps",
                                            to_string(o)));
  }
  if (o == Objective::energy && !scenario.job.has_power()) {
    throw std::invalid_argument(
        "ranking by energy needs the device's power: the device states no TDP; set job.power.busy");
  }
  const scenario::Scenario base = planner::on_devices(scenario, report.devices);
  for (PlanScore& p : report.ranked) {
    const scenario::Scenario s = planner::with_candidate(base, p.candidate);
    p.run = report::estimate_run(s, p.step_time, report::step_energy(s, p.step_time, p.compute, p.communication));
  }
  std::stable_sort(report.ranked.begin(), report.ranked.end(), [o](const PlanScore& a, const PlanScore& b) {
    const double x = objective_value(a, o), y = objective_value(b, o);
    if (x != y) return x < y;
    return better(a, b);
  });
}

int half_cluster(int devices, int per_node) {
  const int half = devices / 2;
  if (half < 1 || (devices > per_node && half % std::max(1, per_node) != 0)) return 0;
  return half;
}

std::vector<SizeResult> plan_sizes(const scenario::Scenario& s, const PlanOptions& options, Objective o, int halvings) {
  std::vector<SizeResult> out;
  const int per_node = std::max(1, s.cluster.gpus_per_node);
  int devices = options.devices > 0 ? options.devices : s.cluster.total_gpus();
  for (int i = 0; i <= halvings && devices >= 1; ++i) {
    PlanOptions one = options;
    one.devices = devices;
    PlanReport r = plan_search(s, one);
    if (!r.ranked.empty()) {
      rank_by(s, r, o);
      out.push_back({devices, std::move(r)});
    }
    devices = half_cluster(devices, per_node);
    if (devices == 0) break;
  }
  return out;
}

}  // namespace parasim::planner
