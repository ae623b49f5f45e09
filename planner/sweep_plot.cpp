// The sweep's plot: tokens/s against the first axis, one line per series (planner/sweep.hpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/sweep.hpp"
#include "topology/units.hpp"

namespace parasim::planner {
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

// A value as a number, or NaN when it is not one whole ("100Gbps", "bf16").
double number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && std::isfinite(v) ? v : std::nan("");
}

// The first of 1, 2, 5 x 10^k at or above v (v > 0).
double round_up(double v) {
  const double decade = std::pow(10.0, std::floor(std::log10(v)));
  for (double f : {1.0, 2.0, 5.0}) {
    if (f * decade >= v * (1 - 1e-9)) return f * decade;
  }
  return 10.0 * decade;
}
// The last of 1, 2, 5 x 10^k at or below v (v > 0).
double round_down(double v) {
  const double decade = std::pow(10.0, std::floor(std::log10(v)));
  for (double f : {5.0, 2.0, 1.0}) {
    if (f * decade <= v * (1 + 1e-9)) return f * decade;
  }
  return decade;
}

constexpr const char* palette[] = {"#2a6fdb", "#d9534f", "#2e9e5b", "#e8a33d",
                                   "#8e5bd0", "#17a2b8", "#6c757d", "#c2185b"};

struct Series {
  std::string name;
  std::vector<const SweepPoint*> points;  // in the first axis's order
};

}  // namespace

std::string sweep_svg(const std::vector<SweepPoint>& points, const std::vector<SweepAxis>& axes,
                      const std::string& title) {
  constexpr double width = 760, height = 480, left = 90, right = 200, top = 50, bottom = 60;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      width, height, (left + width - right) / 2, escape(title));
  std::vector<const SweepPoint*> ok;
  for (const SweepPoint& p : points) {
    if (p.error.empty() && p.tokens_per_s > 0.0) ok.push_back(&p);
  }
  if (ok.empty() || axes.empty()) {
    return svg + "<text x=\"50%\" y=\"50%\" text-anchor=\"middle\">no point could be simulated</text>\n</svg>\n";
  }
  // The x axis: the first axis's values, as numbers where they all are.
  const std::vector<std::string>& xs = axes.front().values;
  std::vector<double> xv;
  for (const std::string& v : xs) xv.push_back(number(v));
  const bool numeric = std::all_of(xv.begin(), xv.end(), [](double v) { return std::isfinite(v); });
  const double xmin = numeric ? *std::min_element(xv.begin(), xv.end()) : 0.0;
  const double xmax = numeric ? *std::max_element(xv.begin(), xv.end()) : 0.0;
  const bool log_x = numeric && xmin > 0.0 && xmax / xmin >= 8.0;
  const bool scaling = ok.front()->scaling;
  const bool log_y = log_x && scaling;
  auto x_index = [&](const SweepPoint* p) {
    return static_cast<std::size_t>(std::find(xs.begin(), xs.end(), p->values.front()) - xs.begin());
  };
  const double plot_w = width - left - right;
  auto xpos = [&](std::size_t i) {
    if (!numeric || xmax == xmin)
      return left + (static_cast<double>(i) + 0.5) / static_cast<double>(xs.size()) * plot_w;
    const double f = log_x ? std::log(xv[i] / xmin) / std::log(xmax / xmin) : (xv[i] - xmin) / (xmax - xmin);
    return left + 0.05 * plot_w + f * 0.9 * plot_w;
  };
  // The series: the other axes' values, in the grid's order.
  std::vector<Series> series;
  for (const SweepPoint* p : ok) {
    std::vector<std::string> rest;
    for (std::size_t a = 1; a < axes.size() && a < p->values.size(); ++a)
      rest.push_back(axes[a].key + "=" + p->values[a]);
    const std::string name = fmt::format("{}", fmt::join(rest, ", "));
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& s) { return s.name == name; });
    if (it == series.end()) it = series.insert(series.end(), Series{name, {}});
    it->points.push_back(p);
  }
  for (Series& s : series) {
    std::stable_sort(s.points.begin(), s.points.end(),
                     [&](const SweepPoint* a, const SweepPoint* b) { return x_index(a) < x_index(b); });
  }
  // The y axis: from 0 to a round top, or logarithmic between round bounds.
  double ymin = HUGE_VAL, ymax = 0.0;
  for (const SweepPoint* p : ok) {
    ymin = std::min(ymin, p->tokens_per_s);
    ymax = std::max(ymax, p->tokens_per_s);
    if (p->scaling && p->ideal > 0.0) {
      ymin = std::min(ymin, p->ideal);
      ymax = std::max(ymax, p->ideal);
    }
  }
  const double ytop = round_up(ymax);
  const double ybottom = log_y ? std::min(round_down(ymin), ytop / 10) : 0.0;
  auto y = [&](double v) {
    const double f = log_y ? std::log(v / ybottom) / std::log(ytop / ybottom) : v / ytop;
    return height - bottom - f * (height - top - bottom);
  };
  std::vector<double> ticks;
  if (log_y) {
    for (double decade = std::pow(10.0, std::floor(std::log10(ybottom))); decade <= ytop * 1.0001; decade *= 10) {
      for (double f : {1.0, 2.0, 5.0}) {
        if (f * decade >= ybottom * 0.9999 && f * decade <= ytop * 1.0001) ticks.push_back(f * decade);
      }
    }
  } else {
    for (int i = 0; i <= 5; ++i) ticks.push_back(ytop * i / 5);
  }
  // Axes, grid and labels.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left, height - bottom,
                     width - right);
  svg +=
      fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, height - bottom);
  for (double v : ticks) {
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", left, y(v),
                       width - right);
    svg += fmt::format("<text x=\"{0}\" y=\"{1:.1f}\" text-anchor=\"end\">{2}</text>\n", left - 6, y(v) + 4,
                       v == 0.0 ? std::string("0") : units::format_count(v));
  }
  for (std::size_t i = 0; i < xs.size(); ++i) {
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>\n", xpos(i),
                       height - bottom + 18, escape(xs[i]));
  }
  svg += fmt::format("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}{3}</text>\n", left + plot_w / 2, height - 15,
                     escape(axes.front().key), log_x ? " (log scale)" : "");
  svg += fmt::format(
      "<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">tokens/s{1}</text>\n",
      (top + height - bottom) / 2, log_y ? " (log scale)" : "");
  // Each series: its ideal line (dashed), its predicted line and points.
  for (std::size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const char* colour = palette[k % std::size(palette)];
    std::string ideal, pred;
    for (const SweepPoint* p : s.points) {
      ideal += fmt::format("{:.1f},{:.1f} ", xpos(x_index(p)), y(p->ideal));
      pred += fmt::format("{:.1f},{:.1f} ", xpos(x_index(p)), y(p->tokens_per_s));
    }
    const bool grows = std::any_of(s.points.begin(), s.points.end(),
                                   [&](const SweepPoint* p) { return p->gpus != s.points.front()->gpus; });
    if (scaling && grows) {
      svg += fmt::format(
          "<polyline class=\"ideal\" fill=\"none\" stroke=\"{}\" stroke-opacity=\"0.6\" "
          "stroke-dasharray=\"6 4\" stroke-width=\"1.5\" points=\"{}\"/>\n",
          colour, ideal);
    }
    svg += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       colour, pred);
    for (const SweepPoint* p : s.points) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", xpos(x_index(p)),
                         y(p->tokens_per_s), colour);
      if (!scaling) continue;
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"{}\">{:.0f} %</text>\n",
                         xpos(x_index(p)), y(p->tokens_per_s) - 10, colour, 100 * p->efficiency);
    }
  }
  // The legend, right of the plot.
  const double lx = width - right + 16;
  double ly = top + 10;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const std::string name = series[k].name.empty() ? std::string("predicted tokens/s") : series[k].name;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>"
        "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
        lx, ly, lx + 24, palette[k % std::size(palette)], lx + 30, ly + 4, escape(name));
    ly += 18;
  }
  if (scaling) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>"
        "<text x=\"{3}\" y=\"{4}\">ideal: linear from</text><text x=\"{3}\" y=\"{5}\">the smallest "
        "point (efficiency %)</text>\n",
        lx, ly, lx + 24, lx + 30, ly + 4, ly + 18);
  }
  return svg + "</svg>\n";
}

}  // namespace parasim::planner
