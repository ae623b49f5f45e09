#include "sim/event_queue.hpp"

#include <stdexcept>

namespace parasim::sim {

std::uint64_t BinaryHeapQueue::push(Time t, std::uint64_t payload) {
  if (t < now_) throw std::logic_error("event scheduled in the past");
  const std::uint64_t seq = next_sequence_++;
  heap_.push(Event{t, seq, payload});
  return seq;
}

Event BinaryHeapQueue::pop() {
  if (heap_.empty()) throw std::logic_error("pop from an empty event queue");
  Event e = heap_.top();
  heap_.pop();
  if (e.time < now_) throw std::logic_error("simulated time ran backwards");
  now_ = e.time;
  return e;
}

}  // namespace parasim::sim
