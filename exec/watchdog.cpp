#include "exec/watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace parasim::exec::watchdog {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

struct State {
  std::atomic<const char*> phase{"start-up"};
  std::atomic<int> step{-1};
  std::atomic<std::int64_t> last_progress_ms{0};
  std::atomic<bool> running{false};
  std::atomic<int> fd{-1};  // the heartbeat file
  std::thread thread;
};

State& state() {
  static State s;
  return s;
}

int rank_from_environment() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* r = std::getenv(v); r != nullptr) return std::atoi(r);
  }
  return -1;
}

std::string describe(const char* phase, int step) {
  return step >= 0 ? fmt::format("{} (step {})", phase, step + 1) : std::string(phase);
}

// Writes the heartbeat: pid, step, phase. From the thread every 200 ms and at each phase
// change, so a rank that stops as it enters a phase is seen in that phase.
void beat(State& s) {
  const int fd = s.fd.load();
  if (fd < 0) return;
  const std::string line = fmt::format("{} {} {}\n", ::getpid(), s.step.load(), s.phase.load());
  [[maybe_unused]] const ssize_t n = ::pwrite(fd, line.data(), line.size(), 0);
  [[maybe_unused]] const int t = ::ftruncate(fd, static_cast<off_t>(line.size()));
  ::futimens(fd, nullptr);
}

// A rank's heartbeat file: its pid and "phase (step N)"; false when unreadable.
bool read_heartbeat(const std::string& file, pid_t& pid, std::string& where) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return false;
  long p = 0;
  int step = -1;
  char phase[64] = {};
  const bool ok = std::fscanf(f, "%ld %d %63[^\n]", &p, &step, phase) == 3;
  std::fclose(f);
  if (ok) {
    pid = static_cast<pid_t>(p);
    where = describe(phase, step);
  }
  return ok;
}

// PARASIM_STOP=RANK:PHASE[:STEP] stops this rank (SIGSTOP) as it enters the phase, or
// kills it (SIGKILL) under PARASIM_STOP_SIGNAL=KILL: the fault test
// (tests/exec/stopped_rank_test.sh) stops and kills a rank in every phase this way, and in
// "launch", before its first heartbeat.
void fault_point(const char* name, int step) {
  const char* spec = std::getenv("PARASIM_STOP");
  if (spec == nullptr) return;
  int rank = -1;
  int at_step = -1;
  char which[32] = {};
  const int n = std::sscanf(spec, "%d:%31[^:]:%d", &rank, which, &at_step);
  if (n >= 2 && rank == rank_from_environment() && std::strcmp(which, name) == 0 && (n < 3 || at_step == step)) {
    const char* sig = std::getenv("PARASIM_STOP_SIGNAL");
    ::raise(sig != nullptr && std::strcmp(sig, "KILL") == 0 ? SIGKILL : SIGSTOP);
  }
}

}  // namespace

std::string process_identity(pid_t pid) {
  std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
  if (f == nullptr) return {};
  char buf[1024] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // The command name (field 2) is in parentheses and may hold spaces: fields after its
  // last ')' are "state ppid ..."; the start time is field 22, the 20th after it.
  const char* close = std::strrchr(buf, ')');
  if (n == 0 || close == nullptr) return {};
  // A zombie (killed, not yet reaped: its parent gone too, under an init that does not
  // reap) has ended.
  if (close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X')) return {};
  unsigned long long start = 0;
  const char* at = close + 1;
  for (int field = 3; field < 22 && at != nullptr; ++field) at = std::strchr(at + 1, ' ');
  if (at == nullptr || std::sscanf(at, " %llu", &start) != 1) return {};
  return fmt::format("{} {}", pid, start);
}

bool alive(const std::string& identity) {
  long pid = 0;
  if (std::sscanf(identity.c_str(), "%ld", &pid) != 1 || pid <= 0) return false;
  return process_identity(static_cast<pid_t>(pid)) == identity;
}

void mark_launcher(const std::string& dir) {
  const std::string me = process_identity(::getpid());
  ::setenv("PARASIM_LAUNCHER", me.c_str(), 1);
  if (dir.empty()) return;
  if (std::FILE* f = std::fopen((dir + "/launcher").c_str(), "w"); f != nullptr) {
    std::fprintf(f, "%s\n", me.c_str());
    std::fclose(f);
  }
}

int remove_stale_jobs(const std::string& parent) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    struct stat st {};
    if (dir.filename().string().rfind("parasim-job-", 0) != 0 || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::geteuid()) {
      continue;
    }
    char launcher[64] = {};
    std::FILE* f = std::fopen((dir / "launcher").c_str(), "r");
    if (f == nullptr) continue;  // not marked (an older parasim's, or being made): left alone
    const bool read = std::fgets(launcher, sizeof launcher, f) != nullptr;
    std::fclose(f);
    std::string identity = read ? launcher : "";
    while (!identity.empty() && identity.back() == '\n') identity.pop_back();
    if (identity.empty() || alive(identity)) continue;
    bool only_ours = true;
    for (fs::directory_iterator e(dir, ec), stop; !ec && e != stop; e.increment(ec)) {
      const std::string name = e->path().filename().string();
      if (name != "launcher" && name.rfind("rank-", 0) != 0) only_ours = false;
    }
    if (ec || !only_ours) continue;
    for (fs::directory_iterator e(dir, ec), stop; !ec && e != stop; e.increment(ec)) ::unlink(e->path().c_str());
    if (::rmdir(dir.c_str()) == 0) ++removed;
  }
  return removed;
}

void start(double stall_seconds) {
  State& s = state();
  if (s.running.exchange(true)) return;
  // A rank that exits early (std::exit on an error) stops the thread before the static
  // State is destroyed: atexit handlers registered later run first.
  static const bool registered = std::atexit([] { stop(); }) == 0;
  (void)registered;
  s.last_progress_ms = now_ms();
  fault_point("launch", -1);
  const char* dir = std::getenv("PARASIM_JOB_DIR");
  const int rank = rank_from_environment();
  const std::string file = dir != nullptr && rank >= 0 ? fmt::format("{}/rank-{}", dir, rank) : std::string();
  const auto stall_ms = static_cast<std::int64_t>(stall_seconds * 1000.0);
  if (!file.empty()) s.fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  beat(s);
  const char* launcher_env = std::getenv("PARASIM_LAUNCHER");
  const std::string launcher = launcher_env != nullptr ? launcher_env : "";
  s.thread = std::thread([&s, rank, stall_ms, launcher] {
    std::int64_t launcher_checked = now_ms();
    while (s.running.load()) {
      const char* phase = s.phase.load();
      const int step = s.step.load();
      beat(s);
      // The launcher killed (SIGKILL: it could not end mpirun): nobody would read this
      // rank's results or end it, so it ends itself.
      if (!launcher.empty() && now_ms() - launcher_checked >= 1000) {
        launcher_checked = now_ms();
        if (!alive(launcher)) {
          std::fprintf(stderr, "error: rank %d: its launcher (parasim, pid %s) is gone; ending in %s\n", rank,
                       launcher.substr(0, launcher.find(' ')).c_str(), describe(phase, step).c_str());
          std::fflush(stderr);
          std::_Exit(1);
        }
      }
      // The step loop watches its own ops and names them; this catches every other phase
      // (and a step loop blocked inside a call), a little later.
      if (now_ms() - s.last_progress_ms.load() > stall_ms + 2000) {
        std::fprintf(stderr, "error: rank %d made no progress for %.0f s in %s (a peer rank died or stopped)\n", rank,
                     static_cast<double>(stall_ms) / 1000.0, describe(phase, step).c_str());
        std::fflush(stderr);
        std::_Exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
}

void phase(const char* name, int step) {
  State& s = state();
  s.phase = name;
  s.step = step;
  s.last_progress_ms = now_ms();
  beat(s);
  fault_point(name, step);
}

void progress() { state().last_progress_ms = now_ms(); }

void stop() {
  State& s = state();
  if (!s.running.exchange(false)) return;
  if (s.thread.joinable()) s.thread.join();
  // The last beat says the rank ended its part: a rank gone after this did not die.
  s.phase = "finished";
  s.step = -1;
  beat(s);
  if (const int fd = s.fd.exchange(-1); fd >= 0) ::close(fd);
}

int watch_job(pid_t child, const std::string& dir, int ranks, double stall_seconds) {
  // Half the stall timeout: the launcher names the stopped rank before the others' own
  // watchdogs give up on it.
  const std::int64_t stale_ms = std::max<std::int64_t>(1000, static_cast<std::int64_t>(stall_seconds * 500.0));
  const std::int64_t started = now_ms();
  std::vector<pid_t> pids(static_cast<std::size_t>(ranks), 0);
  // The ranks first seen gone while mpirun still ran: killed or crashed, as mpirun's
  // status (128 + signal) alone does not say which rank or where.
  std::string gone;
  // When the first rank's heartbeat came: the others, started by mpirun at the same time,
  // follow within moments, so a rank still without one half the stall timeout later never
  // started (stopped or killed before it could write one).
  std::int64_t first_beat = 0;
  auto never_started = [&] {
    std::string who;
    struct stat st {};
    for (int r = 0; r < ranks; ++r) {
      if (::stat(fmt::format("{}/rank-{}", dir, r).c_str(), &st) != 0) who += fmt::format("{}{}", who.empty() ? "" : ", ", r);
    }
    return who;
  };
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child || (done < 0 && errno != EINTR)) {
      const bool own_code = WIFEXITED(status) && WEXITSTATUS(status) <= 2;  // a rank's own 0, 1 or 2
      if (!own_code && gone.empty() && first_beat > 0) {
        if (const std::string who = never_started(); !who.empty()) {
          gone = fmt::format("rank {} ended before its first heartbeat", who);
        }
      }
      if (own_code || gone.empty()) return status;
      std::fprintf(stderr, "error: %s (killed or crashed); mpirun ended the job with status %d\n", gone.c_str(),
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      std::fflush(stderr);
      return 1 << 8;
    }
    if (gone.empty()) {
      for (int r = 0; r < ranks; ++r) {
        const pid_t p = pids[static_cast<std::size_t>(r)];
        if (p <= 0 || ::kill(p, 0) == 0 || errno != ESRCH) continue;
        // Read again: its last beat, at the phase it entered, may be newer than our last look.
        pid_t again = 0;
        std::string where = "an unknown phase";
        read_heartbeat(fmt::format("{}/rank-{}", dir, r), again, where);
        if (where == "finished") continue;  // it ended its part of the run: not the one that died
        gone += fmt::format("{}rank {} ended in {}", gone.empty() ? "" : ", ", r, where);
      }
    }
    for (int r = 0; r < ranks; ++r) {
      const std::string file = fmt::format("{}/rank-{}", dir, r);
      struct stat st {};
      std::int64_t age = 0;
      std::int64_t limit = stale_ms;
      std::string what;
      if (::stat(file.c_str(), &st) != 0) {
        // mpirun may take seconds to start the ranks on a loaded host: before any rank's
        // heartbeat, a rank is "never started" only after the stall timeout, and at least
        // 10 s; once a peer's came, after 80 % of the stall timeout (at least 2 s) more,
        // before the peers' own watchdogs give up (the stall timeout + 2 s) and are named.
        if (first_beat > 0) {
          age = now_ms() - first_beat;
          limit = std::max<std::int64_t>(2000, static_cast<std::int64_t>(stall_seconds * 800.0));
        } else {
          age = now_ms() - started;
          limit = std::max<std::int64_t>(10000, static_cast<std::int64_t>(stall_seconds * 1000.0));
        }
        what = "never started (no heartbeat since the job began)";
      } else {
        if (first_beat == 0) first_beat = now_ms();
        const auto mtime_ms = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
        timespec wall{};
        ::clock_gettime(CLOCK_REALTIME, &wall);
        age = static_cast<std::int64_t>(wall.tv_sec) * 1000 + wall.tv_nsec / 1000000 - mtime_ms;
        std::string where;
        what = read_heartbeat(file, pids[static_cast<std::size_t>(r)], where) ? "stopped responding in " + where
                                                                              : "stopped responding";
      }
      if (age <= limit) continue;
      std::fprintf(stderr, "error: rank %d %s: no heartbeat for %.1f s; ending the job\n", r, what.c_str(),
                   static_cast<double>(age) / 1000.0);
      std::fflush(stderr);
      for (pid_t p : pids) {
        if (p > 0) ::kill(p, SIGKILL);  // a stopped rank too: SIGKILL needs no SIGCONT
      }
      // mpirun ends the ranks it still has (those that never wrote a heartbeat), then itself.
      ::kill(child, SIGTERM);
      const std::int64_t asked = now_ms();
      while (::waitpid(child, &status, WNOHANG) == 0) {
        if (now_ms() - asked > 3000) {
          ::kill(child, SIGKILL);
          ::waitpid(child, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return 1 << 8;  // as if exited with 1
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace parasim::exec::watchdog
