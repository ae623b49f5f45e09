#include "plan/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace parasim::plan {

std::vector<PipelineStep> stage_schedule(Schedule schedule, const PipelineShape& shape, int stage) {
  if (stage < 0 || stage >= shape.stages) throw std::out_of_range("pipeline stage out of range");
  switch (schedule) {
    case Schedule::gpipe: return schedules::gpipe(shape, stage);
    case Schedule::one_f_one_b: return schedules::one_f_one_b(shape, stage);
    case Schedule::interleaved_1f1b: return schedules::interleaved(shape, stage);
  }
  throw std::invalid_argument("unknown schedule");
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

}  // namespace parasim::plan
