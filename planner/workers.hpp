// Running a fixed set of work items on threads, where the system may refuse threads.
#pragma once

#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace parasim::planner {

// Runs body(w) for w in [0, t) on up to t threads, each index once. Where the system refuses
// a thread (std::thread's std::system_error: a pids limit, a memory limit), the calling
// thread runs the indices left itself, so the result is the same, only later. The first
// exception a body throws is rethrown once all have joined (one escaping a thread would
// abort). `spawn(f)` starts f on a thread and returns it (std::thread's constructor by
// default; tests refuse some).
template <typename Body, typename Spawn>
void run_workers(unsigned t, Body body, Spawn spawn) {
  std::exception_ptr first;
  std::mutex m;
  auto task = [&](unsigned w) {
    try {
      body(w);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(m);
      if (!first) first = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(t);
  unsigned started = 0;
  try {
    for (; started < t; ++started) workers.push_back(spawn([&task, started] { task(started); }));
  } catch (const std::system_error&) {
    // Fewer threads than asked: the rest run here.
  }
  for (unsigned w = started; w < t; ++w) task(w);
  for (std::thread& w : workers) w.join();
  if (first) std::rethrow_exception(first);
}

template <typename Body>
void run_workers(unsigned t, Body body) {
  run_workers(t, std::move(body), [](auto f) { return std::thread(std::move(f)); });
}

}  // namespace parasim::planner
