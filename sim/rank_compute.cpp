#include "sim/rank_compute.hpp"

#include <algorithm>

namespace parasim::sim {

int held_sms(const program::Op& o, int nccl_sms) {
  constexpr int userbuffer_sms = 16;
  const bool userbuffers = o.category == program::Category::tp_comm && o.piece == program::LayerPiece::row;
  return userbuffers ? userbuffer_sms : nccl_sms;
}

RankCompute::RankCompute(Engine& engine, int ranks, std::function<double(int)> speed,
                         std::function<void(std::int64_t)> complete)
    : engine_(engine), running_(static_cast<std::size_t>(ranks)), speed_(std::move(speed)), complete_(std::move(complete)) {}

void RankCompute::start(int rank, std::int64_t op, double seconds) {
  Running& r = running_[static_cast<std::size_t>(rank)];
  r.op = op;
  r.work = seconds;
  r.since = engine_.now().picoseconds();
  r.speed = speed_(rank);
  schedule(rank);
}

void RankCompute::load_changed(int rank) {
  if (static_cast<std::size_t>(rank) >= running_.size()) return;
  Running& r = running_[static_cast<std::size_t>(rank)];
  const double now_speed = speed_(rank);
  if (r.op < 0 || now_speed == r.speed) return;
  const std::int64_t now = engine_.now().picoseconds();
  r.work = std::max(0.0, r.work - static_cast<double>(now - r.since) * 1e-12 * r.speed);
  r.since = now;
  r.speed = now_speed;
  schedule(rank);
}

void RankCompute::schedule(int rank) {
  Running& r = running_[static_cast<std::size_t>(rank)];
  const std::uint64_t version = ++r.version;
  engine_.after(Time::seconds(r.work / r.speed), [this, rank, version] {
    Running& now = running_[static_cast<std::size_t>(rank)];
    if (now.version != version) return;  // rescheduled since
    const std::int64_t op = now.op;
    now.op = -1;
    complete_(op);
  });
}

}  // namespace parasim::sim
