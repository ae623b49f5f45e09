#include "planner/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scenario/load.hpp"
#include "workload/memory.hpp"
#include "report/metrics.hpp"
#include "report/run_model.hpp"
#include "sim/simulate.hpp"

namespace parasim::planner {

SweepAxis parse_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument(fmt::format("--vary '{}': expected KEY=V1,V2,... (e.g. plan.dp=1,2,4,8)", text));
  }
  SweepAxis a;
  a.key = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  // Values that hold commas themselves (a placement) are separated by semicolons.
  const char sep = rest.find(';') != std::string::npos ? ';' : ',';
  std::size_t start = 0;
  while (true) {
    const auto comma = rest.find(sep, start);
    std::string v = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (v.empty()) throw std::invalid_argument(fmt::format("--vary '{}': an empty value", text));
    a.values.push_back(std::move(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return a;
}

namespace {

std::string set_value(const std::vector<std::string>& sets, const std::string& key) {
  std::string v;
  for (const std::string& s : sets) {
    if (s.rfind(key + "=", 0) == 0) v = s.substr(key.size() + 1);
  }
  return v;
}

int int_or(const std::string& text, int fallback) {
  if (text.empty()) return fallback;
  try {
    std::size_t used = 0;
    const int v = std::stoi(text, &used);
    return used == text.size() ? v : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

std::vector<SweepPoint> sweep(const std::string& path, const std::vector<std::string>& overrides,
                              const std::vector<SweepAxis>& axes, const SweepOptions& options) {
  const scenario::Scenario base = scenario::load(path, overrides);
  // A key no scenario has (plan.tpp) is a mistake in the command, not a point that fails.
  for (const SweepAxis& a : axes) {
    std::vector<std::string> probe = overrides;
    probe.push_back(a.key + "=" + a.values.front());
    try {
      (void)scenario::load(path, probe);
    } catch (const scenario::ScenarioError& e) {
      if (e.message().starts_with("unknown key")) throw;
    }
  }
  std::vector<SweepPoint> out;
  std::size_t total = 1;
  for (const SweepAxis& a : axes) total *= a.values.size();
  for (std::size_t k = 0; k < total; ++k) {
    std::vector<std::size_t> at(axes.size(), 0);  // the last axis varies fastest
    for (std::size_t i = axes.size(), rest = k; i-- > 0;) {
      at[i] = rest % axes[i].values.size();
      rest /= axes[i].values.size();
    }
    SweepPoint p;
    std::vector<std::string> point;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      p.values.push_back(axes[i].values[at[i]]);
      point.push_back(axes[i].key + "=" + axes[i].values[at[i]]);
    }
    // The plan's size at this point, from its own values or the base scenario's.
    std::vector<std::string> all = overrides;
    all.insert(all.end(), point.begin(), point.end());
    const int dp = int_or(set_value(point, "plan.dp"), base.plan.dp);
    const int tp = int_or(set_value(point, "plan.tp"), base.plan.tp);
    const int pp = int_or(set_value(point, "plan.pp"), base.plan.pp);
    if (options.per_replica_batch && set_value(point, "training.global_batch").empty() && dp != base.plan.dp) {
      all.push_back(fmt::format("training.global_batch={}", base.training.global_batch / base.plan.dp * dp));
    }
    if (options.grow_nodes && set_value(point, "cluster.nodes").empty() && set_value(point, "cluster.gpus_per_node").empty()) {
      const int per_node = base.cluster.gpus_per_node;
      const int nodes = std::max(1, (dp * tp * pp + per_node - 1) / per_node);
      if (nodes != base.cluster.nodes) all.push_back(fmt::format("cluster.nodes={}", nodes));
    }
    p.overrides = all;
    try {
      const scenario::Scenario s = scenario::load(path, all);
      const sim::Prediction pred = sim::predict(s);
      const report::StepFigures f = report::step_figures(s, pred.trace, topology::Cluster(s.cluster));
      p.gpus = s.plan.world();
      p.step_time = f.step_time;
      p.tokens_per_s = f.tokens_per_s;
      p.mfu = f.mfu;
      p.fits = workload::memory_per_rank(s).fits();
      p.bottleneck = f.bottleneck;
      if (s.training.total_steps > 0) {
        const report::RunEstimate r = report::estimate_run(s, pred.trace);
        p.has_run = true;
        p.time_to_train = r.expected;
        p.goodput = r.goodput;
        p.interruptions = r.interruptions;
        p.energy = r.energy;
        p.device_hours = r.device_hours;
      }
    } catch (const std::exception& e) {
      p.error = e.what();
    }
    out.push_back(std::move(p));
    if (options.progress) options.progress(out.size(), total);
  }
  if (std::all_of(out.begin(), out.end(), [](const SweepPoint& p) { return !p.error.empty(); })) {
    throw std::invalid_argument(fmt::format("no point of the sweep could be predicted; the first: {}", out.front().error));
  }
  const SweepPoint* smallest = nullptr;
  for (const SweepPoint& p : out) {
    if (p.error.empty() && (smallest == nullptr || p.gpus < smallest->gpus)) smallest = &p;
  }
  // Scaling efficiency and the ideal line only where the grid changes the GPU count.
  const bool scaling = std::any_of(out.begin(), out.end(), [&](const SweepPoint& p) {
    return p.error.empty() && smallest != nullptr && p.gpus != smallest->gpus;
  });
  if (scaling) {
    const double per_gpu = smallest->tokens_per_s / smallest->gpus;
    for (SweepPoint& p : out) {
      if (!p.error.empty()) continue;
      p.scaling = true;
      p.ideal = per_gpu * p.gpus;
      p.efficiency = p.ideal > 0 ? p.tokens_per_s / p.ideal : 0.0;
    }
  }
  return out;
}

}  // namespace parasim::planner
