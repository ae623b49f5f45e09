// The pending-event set of the discrete-event engine. Events are ordered by (time,
// insertion sequence): two events at the same time fire in the order they were
// scheduled, so a run never depends on heap layout and reruns are bit-identical.
// pop() asserts that time never runs backwards.
//
// Behind a small interface so that queue kinds can be benchmarked against each other;
// BinaryHeapQueue costs O(log n) per push and pop.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "sim/time.hpp"

namespace parasim::sim {

struct Event {
  Time time;
  std::uint64_t sequence = 0;  // assigned by the queue
  std::uint64_t payload = 0;   // what the engine needs to dispatch it (an action id, ...)
};

class EventQueue {
 public:
  virtual ~EventQueue() = default;
  // Schedules an event; returns its sequence number.
  virtual std::uint64_t push(Time t, std::uint64_t payload) = 0;
  // Removes and returns the earliest event; the queue must not be empty.
  virtual Event pop() = 0;
  [[nodiscard]] virtual bool empty() const = 0;
  [[nodiscard]] virtual std::size_t size() const = 0;
  [[nodiscard]] virtual Time now() const = 0;  // time of the last event popped
};

class BinaryHeapQueue final : public EventQueue {
 public:
  std::uint64_t push(Time t, std::uint64_t payload) override;
  Event pop() override;
  [[nodiscard]] bool empty() const override { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const override { return heap_.size(); }
  [[nodiscard]] Time now() const override { return now_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_sequence_ = 0;
  Time now_;
};

}  // namespace parasim::sim
