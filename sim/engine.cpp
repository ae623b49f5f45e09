#include "sim/engine.hpp"

namespace parasim::sim {

void Engine::at(Time t, Callback fn) {
  std::uint64_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    slots_[slot] = std::move(fn);
  } else {
    slot = slots_.size();
    slots_.push_back(std::move(fn));
  }
  queue_.push(t, slot);
}

std::uint64_t Engine::run() {
  std::uint64_t count = 0;
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    now_ = e.time;
    Callback fn = std::move(slots_[e.payload]);
    slots_[e.payload] = nullptr;
    free_.push_back(e.payload);
    fn();
    ++count;
  }
  fired_ += count;
  return count;
}

}  // namespace parasim::sim
