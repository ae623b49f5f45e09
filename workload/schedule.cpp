#include "workload/schedule.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace parasim::workload {

std::vector<PipelineStep> stage_schedule(scenario::Schedule schedule, const PipelineShape& shape, int stage) {
  if (stage < 0 || stage >= shape.stages) throw std::out_of_range("pipeline stage out of range");
  switch (schedule) {
    case scenario::Schedule::gpipe: return schedules::gpipe(shape, stage);
    case scenario::Schedule::one_f_one_b: return schedules::one_f_one_b(shape, stage);
    case scenario::Schedule::interleaved_1f1b: return schedules::interleaved(shape, stage);
  }
  throw std::invalid_argument("unknown schedule");
}

std::pair<int, int> chunk_layers(int layers, int pp, int virtual_stages, int stage, int chunk) {
  const int slices = pp * virtual_stages;
  const int slice = chunk * pp + stage;
  const int base = layers / slices;
  const int extra = layers % slices;
  const int begin = slice * base + std::min(slice, extra);
  return {begin, begin + base + (slice < extra ? 1 : 0)};
}

const std::vector<std::pair<int, int>>& stage_holdings(scenario::Schedule schedule, const PipelineShape& shape,
                                                       int stage) {
  using Key = std::tuple<scenario::Schedule, int, int, int, int>;
  thread_local std::map<Key, std::vector<std::pair<int, int>>> memo;
  const Key key{schedule, shape.stages, shape.micro_batches, shape.virtual_stages, stage};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  std::vector<std::pair<int, int>> out;
  std::set<std::pair<int, int>> seen;
  int held = 0, last = 0;
  for (const PipelineStep& step : stage_schedule(schedule, shape, stage)) {
    const int d = step.kind == PipelineStep::Kind::forward ? 1 : -1;
    held += d;
    if (step.chunk == shape.virtual_stages - 1) last += d;
    if (seen.insert({held, last}).second) out.emplace_back(held, last);
  }
  return memo.emplace(key, std::move(out)).first->second;
}

int peak_in_flight(const std::vector<PipelineStep>& steps) {
  int now = 0;
  int peak = 0;
  for (const PipelineStep& s : steps) {
    now += s.kind == PipelineStep::Kind::forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace parasim::workload
