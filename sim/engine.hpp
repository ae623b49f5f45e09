// The discrete-event engine: a clock and callbacks ordered by (time, insertion sequence).
// Models schedule work with at(); run() fires events until none is left. Callbacks live
// in a slot vector reused through a free list, so scheduling allocates only when the
// number of pending events grows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/event_queue.hpp"

namespace parasim::sim {

class Engine {
 public:
  using Callback = std::function<void()>;

  [[nodiscard]] Time now() const { return now_; }
  void at(Time t, Callback fn);
  void after(Time delay, Callback fn) { at(now_ + delay, std::move(fn)); }
  // Fires events in order until the queue is empty; returns the number fired.
  std::uint64_t run();
  [[nodiscard]] std::uint64_t events_fired() const { return fired_; }

 private:
  BinaryHeapQueue queue_;
  std::vector<Callback> slots_;
  std::vector<std::uint64_t> free_;
  Time now_;
  std::uint64_t fired_ = 0;
};

}  // namespace parasim::sim
