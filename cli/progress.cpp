#include "cli/progress.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <fmt/format.h>

#include "topology/units.hpp"

namespace parasim::cli {

Progress::Progress(bool json) {
  const char* force = std::getenv("PARASIM_PROGRESS");
  if (force != nullptr && *force != '\0') {
    shown_ = std::string_view(force) != "0";
  } else {
    shown_ = !json && ::isatty(STDERR_FILENO) != 0;
  }
}

Progress::~Progress() {
  clear();
}

void Progress::update(std::string_view phase, std::size_t done, std::size_t total) {
  if (!shown_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (phase != phase_) {
    phase_ = phase;
    phase_start_ = now;
  } else if (done < total && now - last_ < std::chrono::milliseconds(100)) {
    return;
  }
  last_ = now;
  const double fraction = static_cast<double>(std::min(done, total)) / static_cast<double>(total);
  const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
  std::string eta;
  if (fraction > 0.02 && fraction < 1.0 && elapsed > 0.5) {
    eta = fmt::format(", about {} left", units::format_duration(elapsed * (1.0 - fraction) / fraction));
  }
  const std::string line =
      fmt::format("{} {:3.0f} % ({} of {}){}", phase, 100 * fraction, units::format_count(static_cast<double>(done)),
                  units::format_count(static_cast<double>(total)), eta);
  const std::size_t pad = width_ > line.size() ? width_ - line.size() : 0;
  std::fprintf(stderr, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
  std::fflush(stderr);
  width_ = line.size();
}

void Progress::clear() {
  std::lock_guard lock(mutex_);
  if (!shown_ || width_ == 0) return;
  std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
  std::fflush(stderr);
  width_ = 0;
}

}  // namespace parasim::cli
