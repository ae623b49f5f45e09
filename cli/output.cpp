#include "cli/output.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.hpp"
#include "report/gzip.hpp"

namespace parasim::cli {
namespace fs = std::filesystem;
namespace {

// Temporaries a signal handler must remove: fixed storage, as a handler may not allocate.
constexpr int max_live = 16;
constexpr std::size_t path_max = 4096;
std::array<std::array<char, path_max>, max_live> live_paths{};
std::array<std::atomic<bool>, max_live> live_used{};

int remember(const std::string& path) {
  if (path.size() >= path_max) return -1;
  for (int i = 0; i < max_live; ++i) {
    auto& used = live_used[static_cast<std::size_t>(i)];
    if (used.load()) continue;
    std::memcpy(live_paths[static_cast<std::size_t>(i)].data(), path.c_str(), path.size() + 1);
    used.store(true);
    return i;
  }
  return -1;
}

void forget(int slot) {
  if (slot >= 0) live_used[static_cast<std::size_t>(slot)].store(false);
}

extern "C" void remove_live_and_die(int sig) {
  for (int i = 0; i < max_live; ++i) {
    if (live_used[static_cast<std::size_t>(i)].load()) ::unlink(live_paths[static_cast<std::size_t>(i)].data());
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool write_all(int fd, const std::string& content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

// A special file (device, FIFO, socket) that exists: written in place, never replaced.
bool is_special(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }();
  return mask;
}

std::string reason() { return std::strerror(errno != 0 ? errno : EIO); }

}  // namespace

void check_output_path(const std::string& path, const std::string& given_option) {
  if (path == "-") return;
  // Under a CLI11 check the option is named by CLI11 already.
  const std::string option = given_option.empty() ? std::string() : given_option + " ";
  if (path.empty()) throw UsageError(fmt::format("{}the output file name is empty", option));
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(fmt::format("{}{}: is a directory, expected a file name", option, path));
  if (is_special(path)) {
    if (::access(path.c_str(), W_OK) != 0) throw UsageError(fmt::format("{}{}: cannot write it: {}", option, path, reason()));
    return;
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) {
    throw UsageError(fmt::format("{}{}: the folder {} does not exist", option, path, dir.string()));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(fmt::format("{}{}: cannot write in the folder {}: {}", option, path, dir.string(), reason()));
  }
  if (fs::exists(fs::symlink_status(path, ec)) && ::access(path.c_str(), W_OK) != 0 && errno != ENOENT) {
    throw UsageError(fmt::format("{}{}: cannot replace it: {}", option, path, reason()));
  }
}

void OutputSet::add(std::string path, std::string content) {
  // A file named *.gz is a gzip stream, whatever it holds (JSON, CSV); a trace that came
  // compressed already is not compressed twice.
  if (path != "-" && report::gzip_name(path) && !report::is_gzip(content)) content = report::gzip(content);
  files_.push_back({std::move(path), std::move(content)});
}

void OutputSet::commit() {
  struct Temp {
    std::string path;
    int slot = -1;
  };
  std::vector<Temp> temps(files_.size());
  auto drop_all = [&] {
    for (Temp& t : temps) {
      if (!t.path.empty()) ::unlink(t.path.c_str());
      forget(t.slot);
    }
  };
  // 1. Every regular file to its own temporary; nothing is visible yet.
  for (std::size_t i = 0; i < files_.size(); ++i) {
    const File& f = files_[i];
    if (f.path == "-" || is_special(f.path)) continue;
    fs::path dir = fs::path(f.path).parent_path();
    std::string pattern = (dir.empty() ? fs::path(".") : dir) / fmt::format(".{}.XXXXXX", fs::path(f.path).filename().string());
    errno = 0;
    const int fd = ::mkostemp(pattern.data(), O_CLOEXEC);  // O_EXCL: a planted name or symlink fails, not followed
    if (fd < 0) {
      const std::string why = reason();
      drop_all();
      throw std::runtime_error(fmt::format("cannot write '{}': {}", f.path, why));
    }
    temps[i].path = pattern;
    temps[i].slot = remember(pattern);
    errno = 0;
    // mkostemp makes the file 0600; give it the mode a plain create would have.
    const bool ok = write_all(fd, f.content) && ::fchmod(fd, 0666 & ~process_umask()) == 0;
    const std::string why = reason();
    if (::close(fd) != 0 || !ok) {
      drop_all();
      throw std::runtime_error(fmt::format("cannot write '{}': {}", f.path, ok ? reason() : why));
    }
  }
  // 2. Special targets and standard output, in place.
  for (const File& f : files_) {
    if (f.path == "-") {
      std::cout << f.content;
      continue;
    }
    if (!is_special(f.path)) continue;
    errno = 0;
    const int fd = ::open(f.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    const bool ok = fd >= 0 && write_all(fd, f.content);
    const std::string why = reason();
    if (fd >= 0) ::close(fd);
    if (!ok) {
      drop_all();
      throw std::runtime_error(fmt::format("cannot write '{}': {}", f.path, why));
    }
  }
  // 3. Into place.
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (temps[i].path.empty()) continue;
    if (::rename(temps[i].path.c_str(), files_[i].path.c_str()) != 0) {
      const std::string why = reason();
      drop_all();
      throw std::runtime_error(fmt::format("cannot write '{}': {}", files_[i].path, why));
    }
    forget(temps[i].slot);
    temps[i].path.clear();
  }
  files_.clear();
}

void install_output_signal_cleanup() {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG instead of the process being
  // killed by SIGXFSZ: the output set then removes its temporaries and says why (exit 1).
  std::signal(SIGXFSZ, SIG_IGN);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction sa {};
    sa.sa_handler = remove_live_and_die;
    sigemptyset(&sa.sa_mask);
    // Leave a signal the caller chose to ignore (nohup) ignored.
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

bool flush_standard_output() {
  errno = 0;
  std::cout.flush();
  const bool ok = static_cast<bool>(std::cout) && std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
  return ok;
}

}  // namespace parasim::cli
