#include "sim/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan/load.hpp"
#include "plan/memory.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"

namespace parasim::sim {

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
  const plan::Scenario base = plan::load(path, overrides);
  // A key no scenario has (plan.tpp) is a mistake in the command, not a point that fails.
  for (const SweepAxis& a : axes) {
    std::vector<std::string> probe = overrides;
    probe.push_back(a.key + "=" + a.values.front());
    try {
      (void)plan::load(path, probe);
    } catch (const plan::ScenarioError& e) {
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
      const plan::Scenario s = plan::load(path, all);
      const Prediction pred = predict(s);
      const report::StepFigures f = report::step_figures(s, pred.trace, topology::Cluster(s.cluster));
      p.gpus = s.plan.world();
      p.step_time = f.step_time;
      p.tokens_per_s = f.tokens_per_s;
      p.mfu = f.mfu;
      p.fits = plan::memory_per_rank(s).fits();
      p.bottleneck = f.bottleneck;
    } catch (const std::exception& e) {
      p.error = e.what();
    }
    out.push_back(std::move(p));
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

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string scaling_svg(const std::vector<SweepPoint>& points, const std::string& title) {
  std::vector<const SweepPoint*> ok;
  for (const SweepPoint& p : points) {
    if (p.error.empty()) ok.push_back(&p);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const SweepPoint* a, const SweepPoint* b) { return a->gpus < b->gpus; });
  // Without a change of GPU count the points stand side by side in the grid's order,
  // labelled with their values, without the ideal line.
  const bool scaling = ok.empty() || ok.front()->scaling;
  constexpr double width = 720, height = 460, left = 90, right = 30, top = 50, bottom = 60;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      width, height, width / 2, escape(title));
  if (ok.empty()) return svg + "<text x=\"50%\" y=\"50%\" text-anchor=\"middle\">no point could be simulated</text>\n</svg>\n";
  const double g0 = std::log2(ok.front()->gpus);
  const double g1 = std::max(g0 + 1.0, std::log2(ok.back()->gpus));
  double ymax = 0.0;
  for (const SweepPoint* p : ok) ymax = std::max({ymax, p->tokens_per_s, p->ideal});
  // A round top for the axis: 1, 2 or 5 x 10^k above the largest value.
  const double decade = std::pow(10.0, std::floor(std::log10(ymax)));
  double ytop = decade;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * decade >= ymax) {
      ytop = f * decade;
      break;
    }
  }
  std::map<const SweepPoint*, std::size_t> index;
  for (std::size_t i = 0; i < ok.size(); ++i) index[ok[i]] = i;
  auto xp = [&](const SweepPoint* p) {
    if (!scaling) return left + (static_cast<double>(index[p]) + 0.5) / static_cast<double>(ok.size()) * (width - left - right);
    return left + (std::log2(p->gpus) - g0) / (g1 - g0) * (width - left - right);
  };
  auto y = [&](double v) { return height - bottom - v / ytop * (height - top - bottom); };
  // Axes, grid and labels.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left, height - bottom, width - right);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, height - bottom);
  for (int i = 0; i <= 5; ++i) {
    const double v = ytop * i / 5;
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", left, y(v), width - right);
    svg += fmt::format("<text x=\"{0}\" y=\"{1:.1f}\" text-anchor=\"end\">{2:.4g}</text>\n", left - 6, y(v) + 4, v);
  }
  for (const SweepPoint* p : ok) {
    const std::string label = scaling ? std::to_string(p->gpus) : escape(fmt::format("{}", fmt::join(p->values, ", ")));
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>\n", xp(p), height - bottom + 18, label);
  }
  svg += fmt::format("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>\n", (left + width - right) / 2,
                     height - 15, scaling ? "GPUs" : "point (its values)");
  svg += fmt::format("<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">tokens/s</text>\n",
                     (top + height - bottom) / 2);
  // Ideal (dashed) and predicted lines, points labelled with their efficiency.
  std::string ideal, pred;
  for (const SweepPoint* p : ok) {
    ideal += fmt::format("{:.1f},{:.1f} ", xp(p), y(p->ideal));
    pred += fmt::format("{:.1f},{:.1f} ", xp(p), y(p->tokens_per_s));
  }
  if (scaling) {
    svg += "<polyline fill=\"none\" stroke=\"#888\" stroke-dasharray=\"6 4\" stroke-width=\"1.5\" points=\"" + ideal + "\"/>\n";
  }
  svg += "<polyline fill=\"none\" stroke=\"#2a6fdb\" stroke-width=\"2\" points=\"" + pred + "\"/>\n";
  for (const SweepPoint* p : ok) {
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#2a6fdb\"/>\n", xp(p), y(p->tokens_per_s));
    if (!scaling) continue;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#2a6fdb\">{:.0f} %</text>\n", xp(p),
                       y(p->tokens_per_s) - 10, 100 * p->efficiency);
  }
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#2a6fdb\" stroke-width=\"2\"/>"
                     "<text x=\"{3}\" y=\"{4}\">predicted tokens/s{5}</text>\n",
                     left + 10, top + 10, left + 40, left + 46, top + 14, scaling ? " (efficiency %)" : "");
  if (!scaling) return svg + "</svg>\n";
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>"
                     "<text x=\"{3}\" y=\"{4}\">ideal: linear from the smallest point</text>\n",
                     left + 10, top + 28, left + 40, left + 46, top + 32);
  return svg + "</svg>\n";
}

}  // namespace parasim::sim
