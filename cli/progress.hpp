// Progress of a long command on standard error: "scoring plans  45 % (58,551 of 130,113),
// about 3 s left", redrawn in place at most ten times a second and cleared when the work
// ends. Shown only when standard error is a terminal and the command's output is not
// JSON (a script piping it or reading JSON sees nothing); PARASIM_PROGRESS=1 forces it on,
// =0 off.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

namespace parasim::cli {

class Progress {
 public:
  explicit Progress(bool json);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  [[nodiscard]] bool shown() const { return shown_; }
  // Thread-safe: the planner's workers call it.
  void update(std::string_view phase, std::size_t done, std::size_t total);
  // Clears the line (the next output starts on a clean line).
  void clear();

 private:
  bool shown_ = false;
  std::mutex mutex_;
  std::string phase_;
  std::chrono::steady_clock::time_point phase_start_{};
  std::chrono::steady_clock::time_point last_{};
  std::size_t width_ = 0;  // of the line on screen
};

}  // namespace parasim::cli
