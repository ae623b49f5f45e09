// Time <-> pixel mapping of a timeline: the visible window [start, end] in picoseconds laid
// over `width` pixels. A pure value type, so zooming, panning and axis ticks are tested
// without a window; the shared zoom (TimelineZoom) stores only the window, and each view
// builds its mapping from it and its own width.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace parasim::gui {

struct TimeMapping {
  double start = 0.0;  // picoseconds at x = 0
  double end = 1.0;    // picoseconds at x = width
  double width = 1.0;  // pixels

  [[nodiscard]] double span() const { return end - start; }
  [[nodiscard]] double toX(double ps) const { return (ps - start) * width / span(); }
  [[nodiscard]] double toTime(double x) const { return start + x * span() / width; }
  [[nodiscard]] double psPerPixel() const { return span() / width; }

  // Zoomed by `factor` (> 1 zooms in) about pixel x, which keeps showing the same time.
  [[nodiscard]] TimeMapping zoomedAt(double x, double factor) const {
    const double t = toTime(x);
    const double s = span() / factor;
    const double left = t - (x / width) * s;
    return {left, left + s, width};
  }
  // Moved so that what was at pixel x is now at x + dx.
  [[nodiscard]] TimeMapping panned(double dx) const {
    const double dt = dx * psPerPixel();
    return {start - dt, end - dt, width};
  }
};

// Axis ticks: multiples of 1, 2 or 5 x 10^k picoseconds, the finest step whose ticks are at
// least `minSpacing` pixels apart, inside the window.
inline double tickStep(const TimeMapping& m, double minSpacing) {
  const double want = std::max(m.psPerPixel() * minSpacing, 1.0);
  const double decade = std::pow(10.0, std::floor(std::log10(want)));
  for (const double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * decade >= want) return f * decade;
  }
  return 10.0 * decade;
}

inline std::vector<double> ticks(const TimeMapping& m, double minSpacing) {
  const double step = tickStep(m, minSpacing);
  std::vector<double> out;
  const double first = std::ceil(m.start / step);
  for (double k = first; k * step <= m.end; k += 1.0) out.push_back(k * step);
  return out;
}

}  // namespace parasim::gui
