#include "report/diff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "report/table.hpp"
#include "scenario/describe.hpp"
#include "topology/units.hpp"

namespace parasim::report {

double FigureChange::relative() const {
  return a != 0.0 ? (b - a) / a : std::numeric_limits<double>::quiet_NaN();
}

namespace {

void walk(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b, const std::string& at,
          std::vector<InputChange>& out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, va] : a.items()) {
      const std::string path = at.empty() ? key : fmt::format("{}.{}", at, key);
      if (b.contains(key)) {
        walk(va, b.at(key), path, out);
      } else {
        out.push_back({path, va.dump(), "-"});
      }
    }
    for (const auto& [key, vb] : b.items()) {
      if (!a.contains(key)) out.push_back({at.empty() ? key : fmt::format("{}.{}", at, key), "-", vb.dump()});
    }
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) walk(a[i], b[i], fmt::format("{}[{}]", at, i), out);
    return;
  }
  if (a != b) out.push_back({at, a.dump(), b.dump()});
}

// A JSON value as a person reads it: strings bare, numbers in six digits, "-" for none.
std::string readable(const std::string& json_text) {
  if (json_text == "-") return json_text;
  const nlohmann::ordered_json v = nlohmann::ordered_json::parse(json_text);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return json_text;
}

double mean_compute(const StepFigures& f) {
  if (f.ranks.empty()) return 0.0;
  double sum = 0.0;
  for (const RankFigures& r : f.ranks) sum += r.compute;
  return sum / static_cast<double>(f.ranks.size());
}

std::string value_text(const FigureChange& c, double v) {
  namespace u = units;
  if (c.unit == "s") return u::format_duration(v);
  if (c.unit == "run") return u::format_span(v);
  if (c.unit == "bytes") return u::format_bytes(v);
  if (c.unit == "fraction") return fmt::format("{:.1f} %", 100.0 * v);
  return u::format_count(v);
}

std::string delta_text(const FigureChange& c) {
  const double d = c.delta();
  if (d == 0.0) return "same";
  if (c.unit == "fraction") return fmt::format("{:+.1f} pts", 100.0 * d);
  const char* sign = d > 0 ? "+" : d < 0 ? "-" : "";
  const std::string magnitude = value_text(c, std::abs(d));
  const double rel = c.relative();
  return std::isnan(rel) ? fmt::format("{}{}", sign, magnitude) : fmt::format("{}{} ({:+.1f} %)", sign, magnitude, 100.0 * rel);
}

}  // namespace

std::vector<InputChange> changed_keys(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  std::vector<InputChange> out;
  walk(a, b, "", out);
  return out;
}

Diff diff(const DiffSide& a, const DiffSide& b) {
  Diff d;
  nlohmann::ordered_json ja = scenario::to_json(*a.scenario);
  nlohmann::ordered_json jb = scenario::to_json(*b.scenario);
  // Where each came from and what it is called differ always; the rest is the inputs.
  for (nlohmann::ordered_json* j : {&ja, &jb}) {
    j->erase("source");
    j->erase("name");
    j->erase("description");
  }
  d.inputs = changed_keys(ja, jb);

  const StepFigures& fa = *a.figures;
  const StepFigures& fb = *b.figures;
  const bool tokens = a.scenario->model.kind == scenario::ModelKind::transformer &&
                      b.scenario->model.kind == scenario::ModelKind::transformer;
  d.figures.push_back({"step_time", "step time", "s", fa.step_time, fb.step_time});
  if (tokens) {
    d.figures.push_back({"tokens_per_s", "tokens/s", "count", fa.tokens_per_s, fb.tokens_per_s});
  } else {
    d.figures.push_back({"samples_per_s", "samples/s", "count", fa.samples_per_s, fb.samples_per_s});
  }
  d.figures.push_back({"tokens_per_s_per_device", tokens ? "tokens/s per device" : "samples/s per device", "count",
                       (tokens ? fa.tokens_per_s : fa.samples_per_s) / std::max(1, a.scenario->plan.world()),
                       (tokens ? fb.tokens_per_s : fb.samples_per_s) / std::max(1, b.scenario->plan.world())});
  d.figures.push_back({"mfu", "MFU", "fraction", fa.mfu, fb.mfu});
  d.figures.push_back({"bubble_fraction", "pipeline bubble", "fraction", fa.bubble_fraction, fb.bubble_fraction});
  d.figures.push_back({"devices", "devices", "count", static_cast<double>(a.scenario->plan.world()),
                       static_cast<double>(b.scenario->plan.world())});
  d.figures.push_back({"memory_peak", "memory per rank (busiest stage)", "bytes", a.memory->peak().total(),
                       b.memory->peak().total()});
  if (a.time_to_train > 0.0 && b.time_to_train > 0.0) {
    d.figures.push_back({"time_to_train", "time to train (expected)", "run", a.time_to_train, b.time_to_train});
  }
  d.fits_a = a.memory->fits();
  d.fits_b = b.memory->fits();

  // The step's parts, per rank on average.
  auto parts = [](const StepFigures& f) {
    std::vector<double> p;
    p.push_back(mean_compute(f));
    double rest = f.step_time - p[0];
    for (std::size_t k = 0; k < dimension_count; ++k) {
      p.push_back(f.exposed_mean[k]);
      rest -= f.exposed_mean[k];
    }
    p.push_back(f.bubble_fraction * f.step_time);
    rest -= p.back();
    p.push_back(rest);
    return p;
  };
  const std::vector<double> pa = parts(fa), pb = parts(fb);
  std::vector<std::pair<std::string, std::string>> names{{"compute", "compute"}};
  for (std::size_t k = 0; k < dimension_count; ++k) {
    names.emplace_back(fmt::format("{}_exposed", dimension_names[k]), fmt::format("{} exposed", dimension_names[k]));
  }
  names.emplace_back("bubble", "pipeline bubble");
  names.emplace_back("other", "the rest (host, optimizer, slowest rank)");
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (pa[i] == 0.0 && pb[i] == 0.0) continue;
    d.parts.push_back({names[i].first, names[i].second, "s", pa[i], pb[i]});
  }
  std::stable_sort(d.parts.begin(), d.parts.end(), [](const FigureChange& x, const FigureChange& y) {
    return std::abs(x.delta()) > std::abs(y.delta());
  });
  return d;
}

std::string describe_diff(const Diff& d, const std::string& name_a, const std::string& name_b) {
  using A = Table::Align;
  std::string out;
  if (d.inputs.empty()) {
    out += "inputs: the same\n\n";
  } else {
    Table t({"input changed", "A", "B"}, {A::left, A::right, A::right});
    for (const InputChange& c : d.inputs) t.add_row({c.key, readable(c.a), readable(c.b)});
    out += t.render() + "\n";
  }
  Table f({"figure", "A: " + name_a, "B: " + name_b, "change"}, {A::left, A::right, A::right, A::right});
  for (const FigureChange& c : d.figures) f.add_row({c.name, value_text(c, c.a), value_text(c, c.b), delta_text(c)});
  f.add_row({"fits in memory", d.fits_a ? "yes" : "NO", d.fits_b ? "yes" : "NO", d.fits_a == d.fits_b ? "" : "changed"});
  out += f.render() + "\n";
  Table p({"the step's parts (mean per rank)", "A", "B", "change"}, {A::left, A::right, A::right, A::right});
  double step_delta = 0.0;
  for (const FigureChange& c : d.figures) {
    if (c.id == "step_time") step_delta = c.delta();
  }
  for (const FigureChange& c : d.parts) p.add_row({c.name, value_text(c, c.a), value_text(c, c.b), delta_text(c)});
  out += p.render();
  // The largest mover, in a sentence.
  if (!d.parts.empty() && step_delta != 0.0 && d.parts.front().delta() != 0.0) {
    const FigureChange& top = d.parts.front();
    const double share = top.delta() / step_delta;
    out += fmt::format("\nthe step {} by {}; the largest part that moved: {}, {}\n", step_delta > 0 ? "grew" : "shrank",
                       units::format_duration(std::abs(step_delta)), top.name,
                       share > 0 ? fmt::format("{:.0f} % of the change", 100.0 * share)
                                 : fmt::format("{} by {}, against it", top.delta() > 0 ? "up" : "down",
                                               units::format_duration(std::abs(top.delta()))));
  }
  return out;
}

nlohmann::ordered_json diff_json(const Diff& d) {
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (const InputChange& c : d.inputs) {
    auto parse = [](const std::string& text) {
      return text == "-" ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::parse(text);
    };
    inputs.push_back({{"key", c.key}, {"a", parse(c.a)}, {"b", parse(c.b)}});
  }
  auto rows = [](const std::vector<FigureChange>& v) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const FigureChange& c : v) {
      const double rel = c.relative();
      out.push_back({{"id", c.id},
                     {"name", c.name},
                     {"a", c.a},
                     {"b", c.b},
                     {"change", c.delta()},
                     {"relative", std::isnan(rel) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(rel)}});
    }
    return out;
  };
  return {{"inputs", inputs},
          {"figures", rows(d.figures)},
          {"fits", {{"a", d.fits_a}, {"b", d.fits_b}}},
          {"parts", rows(d.parts)}};
}

}  // namespace parasim::report
