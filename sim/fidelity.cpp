#include "sim/fidelity.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"
#include "scenario/presets.hpp"
#include "scenario/value.hpp"
#include "report/metrics.hpp"
#include "sim/collectives.hpp"
#include "sim/simulate.hpp"
#include "workload/memory.hpp"

namespace parasim::sim {

namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// The columns vTrain's file has, by the name the report groups by.
struct Required {
  const char* header;
  const char* dim;
};
constexpr Required required[] = {
    {"# GPUs", "gpus"},         {"global batch", "global batch"}, {"micro batch", "micro batch"},
    {"hidden size", "hidden"},  {"attention heads", "heads"},     {"# layers", "layers"},
    {"sequence length", "seq"}, {"tensor parallelism", "tp"},      {"data parallelism", "dp"},
    {"pipeline parallelism", "pp"},
};
constexpr const char* time_header = "iteration time (ms)";

// Optional columns with a friendly name, and the scenario key each sets.
struct Optional {
  const char* header;
  const char* key;
};
constexpr Optional optional[] = {
    {"precision", "training.precision"},
    {"recompute", "training.recompute"},
    {"attention", "training.attention"},
    {"schedule", "plan.schedule"},
    {"virtual stages", "plan.virtual_stages"},
    {"sequence parallel", "plan.sequence_parallel"},
    {"kv heads", "model.kv_heads"},
    {"ffn hidden", "model.ffn_hidden"},
    {"mlp", "model.mlp"},
};

int cluster_gpus_per_node(const std::string& cluster, const scenario::Location& where) {
  const scenario::PresetFile* preset = scenario::find_preset(scenario::PresetKind::cluster, cluster);
  if (preset == nullptr) {
    throw scenario::ScenarioError(where, "cluster", fmt::format("unknown cluster preset '{}'", cluster));
  }
  const scenario::Value v = scenario::parse_yaml(std::string(preset->text), std::string(preset->path));
  const scenario::Entry* g = v.find("gpus_per_node");
  return g != nullptr ? std::atoi(g->value.scalar.c_str()) : 8;
}

}  // namespace

std::vector<MeasuredRun> read_measured_runs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw scenario::ScenarioError(scenario::Location{path, 0, 0}, "", "cannot open the measurements");
  std::string line;
  if (!std::getline(in, line))
    throw scenario::ScenarioError(scenario::Location{path, 1, 1}, "", "empty file: expected a header row");
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a byte order mark
  const std::vector<std::string> header = split(line);
  auto column = [&](std::string_view name) -> int {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<int> req;
  for (const Required& r : required) {
    req.push_back(column(r.header));
    if (req.back() < 0) {
      throw scenario::ScenarioError(
          scenario::Location{path, 1, 1}, r.header,
          fmt::format("missing column '{}' (expected vTrain's columns: # GPUs, global batch, ...)", r.header));
    }
  }
  const int time_col = column(time_header);
  if (time_col < 0)
    throw scenario::ScenarioError(scenario::Location{path, 1, 1}, time_header, "missing column 'iteration time (ms)'");
  const int cluster_col = column("cluster");
  const int vocab_col = column("vocabulary");
  std::vector<std::pair<int, std::string>> extra;  // column, scenario key
  for (std::size_t i = 0; i < header.size(); ++i) {
    for (const Optional& o : optional) {
      if (header[i] == o.header) extra.emplace_back(static_cast<int>(i), o.key);
    }
    if (header[i].find('.') != std::string::npos) extra.emplace_back(static_cast<int>(i), header[i]);
  }

  std::vector<MeasuredRun> runs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = split(line);
    const scenario::Location where{path, number, 1};
    if (cells.size() < header.size()) {
      throw scenario::ScenarioError(where, "", fmt::format("expected {} cells, found {}", header.size(), cells.size()));
    }
    MeasuredRun r;
    r.line = number;
    for (std::size_t i = 0; i < std::size(required); ++i) {
      const std::string& c = cells[static_cast<std::size_t>(req[i])];
      char* end = nullptr;
      const long v = std::strtol(c.c_str(), &end, 10);
      if (c.empty() || *end != '\0' || v <= 0 || v > (1L << 30)) {
        throw scenario::ScenarioError(where, required[i].header,
                                      fmt::format("expected a positive whole number, got '{}'", c));
      }
      r.dims[required[i].dim] = static_cast<int>(v);
    }
    {
      const std::string& c = cells[static_cast<std::size_t>(time_col)];
      char* end = nullptr;
      const double ms = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || !(ms > 0.0) || !std::isfinite(ms)) {
        throw scenario::ScenarioError(where, time_header, fmt::format("expected a positive time in ms, got '{}'", c));
      }
      r.measured = ms * 1e-3;
    }
    r.gpus = r.dims["gpus"];
    const std::string cluster = cluster_col >= 0 && !cells[static_cast<std::size_t>(cluster_col)].empty()
                                    ? cells[static_cast<std::size_t>(cluster_col)]
                                    : "dgx-a100";
    const int per_node = std::min(r.gpus, cluster_gpus_per_node(cluster, where));
    const int nodes = (r.gpus + per_node - 1) / per_node;
    int vocab = 50257;
    if (vocab_col >= 0 && !cells[static_cast<std::size_t>(vocab_col)].empty()) {
      vocab = std::atoi(cells[static_cast<std::size_t>(vocab_col)].c_str());
      if (vocab <= 0) throw scenario::ScenarioError(where, "vocabulary", "expected a positive vocabulary size");
    }
    const int tp = r.dims["tp"];
    const int pad = 128 * tp;
    const int padded = (vocab + pad - 1) / pad * pad;
    r.yaml = fmt::format(
        "name: {}-line-{}\n"
        "cluster: {{preset: {}, nodes: {}, gpus_per_node: {}}}\n"
        "model: {{name: gpt, layers: {}, hidden: {}, heads: {}, vocab: {}, seq_len: {}}}\n"
        "training: {{global_batch: {}, micro_batch: {}, precision: fp16, recompute: full, attention: naive}}\n"
        "plan: {{tp: {}, dp: {}, pp: {}, overlap_dp: false}}\n",
        "measured", number, cluster, nodes, per_node, r.dims["layers"], r.dims["hidden"], r.dims["heads"], padded,
        r.dims["seq"], r.dims["global batch"], r.dims["micro batch"], tp, r.dims["dp"], r.dims["pp"]);
    for (const auto& [col, key] : extra) {
      const std::string& c = cells[static_cast<std::size_t>(col)];
      if (!c.empty()) r.overrides.push_back(key + "=" + c);
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

std::vector<FidelityRow> predict_runs(const std::vector<MeasuredRun>& runs, int threads) {
  std::vector<FidelityRow> rows(runs.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      FidelityRow& row = rows[i];
      row.run = &runs[i];
      try {
        const scenario::Scenario s =
            scenario::load_text(runs[i].yaml, fmt::format("line {}", runs[i].line), runs[i].overrides);
        const Prediction p = predict(s);
        const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
        row.predicted = f.step_time;
        if (runs[i].measured_memory > 0.0) {
          const workload::MemoryReport memory = workload::memory_per_rank(s);
          row.predicted_memory = memory.peak().tensors();
        }
        if (runs[i].measured_flops_rate > 0.0) row.measured_from_rate = f.model_flops / (runs[i].measured_flops_rate * runs[i].gpus);
      } catch (const std::exception& e) {
        row.error = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return rows;
}

ErrorStats error_stats(const std::vector<double>& relative_errors) {
  ErrorStats s;
  s.n = static_cast<int>(relative_errors.size());
  if (s.n == 0) return s;
  std::vector<double> a;
  for (double e : relative_errors) {
    a.push_back(std::abs(e));
    s.mean += e;
  }
  s.mean /= s.n;
  std::sort(a.begin(), a.end());
  for (double x : a) s.mean_abs += x;
  s.mean_abs /= s.n;
  auto quantile = [&](double q) {
    const double pos = q * (s.n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, a.size() - 1);
    return a[lo] + (a[hi] - a[lo]) * (pos - static_cast<double>(lo));
  };
  s.median_abs = quantile(0.5);
  s.p90_abs = quantile(0.9);
  s.max_abs = a.back();
  return s;
}

std::string fidelity_report(const std::vector<FidelityRow>& rows) {
  std::vector<double> all;
  int failed = 0;
  for (const FidelityRow& r : rows) {
    if (r.error.empty()) {
      all.push_back(r.relative_error());
    } else {
      ++failed;
    }
  }
  auto line = [](const std::string& label, const ErrorStats& s) {
    return fmt::format("{:<16} {:>5}  {:>6.1f} %  {:>+7.1f} %  {:>6.1f} %  {:>6.1f} %  {:>6.1f} %\n", label, s.n,
                       100 * s.mean_abs, 100 * s.mean, 100 * s.median_abs, 100 * s.p90_abs, 100 * s.max_abs);
  };
  std::string out = fmt::format("{:<16} {:>5}  {:>8}  {:>9}  {:>8}  {:>8}  {:>8}\n", "rows", "n", "MAE", "mean", "median",
                                "p90", "max");
  out += line("all", error_stats(all));
  for (const char* label : {"framework", "gpu", "model"}) {
    std::map<std::string, std::vector<double>> groups;
    for (const FidelityRow& r : rows) {
      const auto it = r.run->labels.find(label);
      if (r.error.empty() && it != r.run->labels.end()) groups[it->second].push_back(r.relative_error());
    }
    for (const auto& [value, errors] : groups) out += line(value.substr(0, 16), error_stats(errors));
  }
  for (const char* dim : {"tp", "pp", "dp", "micro batch", "hidden", "layers", "gpus"}) {
    std::map<int, std::vector<double>> groups;
    for (const FidelityRow& r : rows) {
      if (r.error.empty()) groups[r.run->dims.at(dim)].push_back(r.relative_error());
    }
    for (const auto& [value, errors] : groups) out += line(fmt::format("{} {}", dim, value), error_stats(errors));
  }
  // Peak memory where the runs logged it (the caching allocator's reserved bytes).
  std::vector<double> memory;
  std::vector<double> memory_ratio;
  for (const FidelityRow& r : rows) {
    if (!r.has_memory()) continue;
    memory.push_back(r.memory_error());
    memory_ratio.push_back(r.predicted_memory / r.run->measured_memory);
  }
  if (!memory.empty()) {
    std::sort(memory_ratio.begin(), memory_ratio.end());
    out += line("peak memory", error_stats(memory));
    out += fmt::format(
        "  (the allocator's peak reserved bytes, as logged; predicted over measured {:.2f} to {:.2f}, "
        "median {:.2f})\n",
        memory_ratio.front(), memory_ratio.back(), memory_ratio[memory_ratio.size() / 2]);
  }
  if (failed > 0) {
    out += fmt::format("{} row(s) not predicted:\n", failed);
    for (const FidelityRow& r : rows) {
      if (!r.error.empty()) out += fmt::format("  line {}: {}\n", r.run->line, r.error);
    }
  }
  return out;
}

std::vector<LayerSweep> layer_sweeps(const std::vector<FidelityRow>& rows) {
  // The sweep a row belongs to: every dim but its layers, its overrides and its cluster.
  std::map<std::string, std::vector<const FidelityRow*>> sweeps;
  for (const FidelityRow& r : rows) {
    if (!r.error.empty()) continue;
    std::string key;
    for (const auto& [dim, value] : r.run->dims) {
      if (dim != "layers") key += fmt::format("{}={};", dim, value);
    }
    for (const std::string& o : r.run->overrides) key += o + ";";
    const std::size_t cluster = r.run->yaml.find("cluster:");
    if (cluster != std::string::npos) key += r.run->yaml.substr(cluster, r.run->yaml.find('\n', cluster) - cluster);
    sweeps[key].push_back(&r);
  }
  std::vector<LayerSweep> out;
  for (const auto& [key, members] : sweeps) {
    std::set<int> layers;
    for (const FidelityRow* r : members) layers.insert(r->run->dims.at("layers"));
    if (layers.size() < 2) continue;
    const auto& d = members.front()->run->dims;
    const int pp = d.at("pp");
    const int per_replica = d.at("global batch") / (d.at("dp") * d.at("micro batch"));
    const double passes = per_replica + pp - 1;
    // Least squares of y against x, for the measured and the predicted times.
    double sx = 0, sy = 0, sp = 0, sxx = 0, sxy = 0, sxp = 0;
    for (const FidelityRow* r : members) {
      const double x = static_cast<double>(r->run->dims.at("layers")) / pp;
      const double y = r->measured() / passes, p = r->predicted / passes;
      sx += x;
      sy += y;
      sp += p;
      sxx += x * x;
      sxy += x * y;
      sxp += x * p;
    }
    const double n = static_cast<double>(members.size());
    const double var = sxx - sx * sx / n;
    LayerSweep s;
    s.dims = d;
    s.dims.erase("layers");
    s.points = static_cast<int>(members.size());
    s.measured_slope = (sxy - sx * sy / n) / var;
    s.predicted_slope = (sxp - sx * sp / n) / var;
    s.measured_intercept = (sy - s.measured_slope * sx) / n;
    s.predicted_intercept = (sp - s.predicted_slope * sx) / n;
    out.push_back(std::move(s));
  }
  return out;
}

std::string layer_sweep_report(const std::vector<LayerSweep>& sweeps) {
  std::map<std::tuple<int, int, int>, std::vector<const LayerSweep*>> groups;
  for (const LayerSweep& s : sweeps) groups[{s.dims.at("hidden"), s.dims.at("tp"), s.dims.at("micro batch")}].push_back(&s);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
  };
  std::string out = fmt::format("{:>6} {:>3} {:>3} {:>6}  {:>25}  {:>30}\n", "hidden", "tp", "mb", "sweeps",
                                "per layer: measured  pred", "per micro-batch: measured  pred");
  for (const auto& [key, members] : groups) {
    std::vector<double> ms, ps, mi, pi;
    for (const LayerSweep* s : members) {
      ms.push_back(s->measured_slope);
      ps.push_back(s->predicted_slope);
      mi.push_back(s->measured_intercept);
      pi.push_back(s->predicted_intercept);
    }
    const double a = median(ms), b = median(ps), c = median(mi), e = median(pi);
    out += fmt::format("{:>6} {:>3} {:>3} {:>6}  {:>8.2f} ms {:>5.2f} {:>+5.0f} %  {:>11.1f} ms {:>5.1f} {:>+6.0f} %\n",
                       std::get<0>(key), std::get<1>(key), std::get<2>(key), members.size(), a * 1e3, b * 1e3,
                       100 * (b / a - 1), c * 1e3, e * 1e3, 100 * (e / c - 1));
  }
  return out;
}

std::string fidelity_svg(const std::vector<FidelityRow>& rows, const std::string& title) {
  double lo = 1e300, hi = 0.0;
  for (const FidelityRow& r : rows) {
    if (!r.error.empty()) continue;
    lo = std::min({lo, r.predicted, r.measured()});
    hi = std::max({hi, r.predicted, r.measured()});
  }
  if (hi <= 0.0) lo = hi = 1.0;
  const double l0 = std::floor(std::log10(lo) * 4) / 4, l1 = std::ceil(std::log10(hi) * 4) / 4 + 1e-9;
  constexpr double size = 480, margin = 60;
  auto pos = [&](double v) { return (std::log10(v) - l0) / (l1 - l0) * size; };
  auto x = [&](double v) { return margin + pos(v); };
  auto y = [&](double v) { return margin + size - pos(v); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{0}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{1}\" y=\"24\" font-size=\"14\">{2}</text>\n",
      size + 2 * margin, margin, title);
  svg += fmt::format("<rect x=\"{0}\" y=\"{0}\" width=\"{1}\" height=\"{1}\" fill=\"none\" stroke=\"#888\"/>\n", margin, size);
  for (int d = static_cast<int>(std::ceil(l0)); d <= static_cast<int>(std::floor(l1)); ++d) {
    for (int m : {1, 2, 5}) {
      const double v = m * std::pow(10.0, d);
      if (std::log10(v) < l0 || std::log10(v) > l1) continue;
      const std::string label = v >= 1 ? fmt::format("{:g} s", v) : fmt::format("{:g} ms", v * 1e3);
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>"
                         "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                         x(v), margin, margin + size, margin + size + 16, label);
      svg += fmt::format("<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#eee\"/>"
                         "<text x=\"{3}\" y=\"{0:.1f}\" text-anchor=\"end\">{4}</text>\n",
                         y(v), margin, margin + size, margin - 4, label);
    }
  }
  const double a = std::pow(10.0, l0), b = std::pow(10.0, l1);
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", x(a), y(a), x(b), y(b));
  for (double f : {0.9, 1.1}) {
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n",
                       x(a), y(a * f), x(b), y(b * f));
  }
  for (const FidelityRow& r : rows) {
    if (!r.error.empty()) continue;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#1f77b4\" fill-opacity=\"0.5\"/>\n", x(r.measured()),
                       y(r.predicted));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured step time</text>\n", margin + size / 2,
                     margin + size + 36);
  svg += fmt::format("<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">predicted step time</text>\n",
                     margin + size / 2);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#666\">dashed: +-10 %</text>\n", margin + 8, margin + 16);
  svg += "</svg>\n";
  return svg;
}

std::string allreduce_report(const std::string& dir, const std::string& cluster) {
  const scenario::Scenario s = scenario::load_text(
      fmt::format("cluster: {}\nmodel: tiny-gpt\ntraining: {{global_batch: 8}}\nplan: {{dp: 1}}\n", cluster),
      "allreduce");
  const topology::Cluster c(s.cluster);
  const double mib = 1024.0 * 1024.0;
  const std::vector<double> sizes{mib, 16 * mib, 64 * mib, 256 * mib, 1024 * mib};
  // A benchmark times the call from the host: the device's time plus the host's cost of
  // issuing it (the device preset's host.communication).
  const double issue = s.cluster.device.host.communication;
  std::string out = fmt::format("{:>4}  {:>8}  {:>14}  {:>16}  {:>7}  {:>16}  {:>7}  {}\n", "GPUs", "size",
                                "measured busbw", "predicted device", "error", "with the call", "error",
                                "algorithm/protocol");
  for (int n = 2; n <= std::min(8, c.gpu_count()); ++n) {
    std::ifstream in(fmt::format("{}/AR_GPU{}_a100", dir, n));
    if (!in) continue;
    std::map<double, double> measured;  // bytes -> seconds
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      const auto cells = split(line);
      if (cells.size() >= 4) measured[std::atof(cells[0].c_str())] = std::atof(cells[3].c_str()) * 1e-9;
    }
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    for (double S : sizes) {
      const auto it = measured.find(S);
      if (it == measured.end()) continue;
      Engine engine;
      Network net(engine, c);
      const CollectiveCall call{program::CollectiveOp::all_reduce, ranks, S};
      const Choice choice = choose(scenario::Collective::automatic, net, call);
      double end = 0.0;
      run_collective(net, choice, call, [&] { end = engine.now().to_seconds(); });
      engine.run();
      const double factor = 2.0 * (n - 1) / n;
      const double predicted = S / end * factor;
      const double with_call = S / (end + issue) * factor;
      const double actual = S / it->second * factor;
      out += fmt::format("{:>4}  {:>5.0f} MiB  {:>9.1f} GB/s  {:>11.1f} GB/s  {:>+6.1f} %  {:>11.1f} GB/s  {:>+6.1f} %  {}/{}\n",
                         n, S / mib, actual * 1e-9, predicted * 1e-9, 100 * (predicted / actual - 1), with_call * 1e-9,
                         100 * (with_call / actual - 1), to_string(choice.algorithm), to_string(choice.protocol));
    }
  }
  return out;
}

}  // namespace parasim::sim
