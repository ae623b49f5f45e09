#include "sim/collectives.hpp"

#include <memory>
#include <stdexcept>

namespace parasim::sim {
namespace {

struct RingState {
  Network* net = nullptr;
  std::vector<int> devices;
  double chunk = 0.0;
  int steps_left = 0;
  int outstanding = 0;
  std::function<void()> done;
};

void ring_step(const std::shared_ptr<RingState>& st) {
  if (st->steps_left == 0) {
    auto done = std::move(st->done);
    done();
    return;
  }
  --st->steps_left;
  const auto n = st->devices.size();
  st->outstanding = static_cast<int>(n);
  for (std::size_t i = 0; i < n; ++i) {
    st->net->transfer(st->devices[i], st->devices[(i + 1) % n], st->chunk, [st] {
      if (--st->outstanding == 0) ring_step(st);
    });
  }
}

}  // namespace

void ring_collective(Network& net, plan::CollectiveOp op, std::vector<int> devices, double bytes,
                     std::function<void()> done) {
  const int n = static_cast<int>(devices.size());
  int steps = 0;
  switch (op) {
    case plan::CollectiveOp::all_reduce: steps = 2 * (n - 1); break;
    case plan::CollectiveOp::reduce_scatter:
    case plan::CollectiveOp::all_gather: steps = n - 1; break;
    case plan::CollectiveOp::broadcast: throw std::invalid_argument("ring broadcast is not modelled");
  }
  auto st = std::make_shared<RingState>();
  st->net = &net;
  st->devices = std::move(devices);
  st->chunk = n > 0 ? bytes / n : 0.0;
  st->steps_left = n > 1 ? steps : 0;
  st->done = std::move(done);
  ring_step(st);
}

}  // namespace parasim::sim
