// Pipeline schedules executed by a small list scheduler written here, independent of the
// simulator: each stage runs its steps in order, a step starts when its stage is free and
// its cross-stage dependency has finished. With uniform stages (forward 1, backward 2 per
// whole stage; a chunk costs 1/v of that) the step time must give the published bubbles.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <tuple>

#include "workload/schedule.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;
using Kind = PipelineStep::Kind;

namespace {

struct Run {
  double makespan = 0.0;
  bool deadlock = false;
};

Run execute(Schedule schedule, const PipelineShape& shape) {
  const int p = shape.stages;
  const int v = shape.virtual_stages;
  std::vector<std::vector<PipelineStep>> order;
  for (int s = 0; s < p; ++s) order.push_back(stage_schedule(schedule, shape, s));
  // finish[(kind, stage, mb, chunk)]
  std::map<std::tuple<int, int, int, int>, double> finish;
  auto done = [&](Kind k, int s, int mb, int c) -> std::optional<double> {
    auto it = finish.find({static_cast<int>(k), s, mb, c});
    if (it == finish.end()) return std::nullopt;
    return it->second;
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0);
  const double f_cost = 1.0 / v;
  const double b_cost = 2.0 / v;
  std::size_t remaining = 0;
  for (const auto& o : order) remaining += o.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      const auto& steps = order[static_cast<std::size_t>(s)];
      if (i == steps.size()) continue;
      const PipelineStep st = steps[i];
      std::optional<double> ready = 0.0;
      if (st.kind == Kind::forward) {
        if (s > 0) ready = done(Kind::forward, s - 1, st.micro_batch, st.chunk);
        else if (st.chunk > 0) ready = done(Kind::forward, p - 1, st.micro_batch, st.chunk - 1);
      } else {
        if (s < p - 1) {
          ready = done(Kind::backward, s + 1, st.micro_batch, st.chunk);
        } else {
          ready = done(Kind::forward, s, st.micro_batch, st.chunk);
          if (ready && st.chunk < v - 1) {
            auto up = done(Kind::backward, 0, st.micro_batch, st.chunk + 1);
            ready = up ? std::optional<double>(std::max(*ready, *up)) : std::nullopt;
          }
        }
      }
      if (!ready) continue;
      const double start = std::max(*ready, free_at[static_cast<std::size_t>(s)]);
      const double end = start + (st.kind == Kind::forward ? f_cost : b_cost);
      finish[{static_cast<int>(st.kind), s, st.micro_batch, st.chunk}] = end;
      free_at[static_cast<std::size_t>(s)] = end;
      ++i;
      --remaining;
      progressed = true;
    }
    if (!progressed) return Run{0.0, true};
  }
  Run r;
  for (double t : free_at) r.makespan = std::max(r.makespan, t);
  return r;
}

double bubble(const Run& r, int m) { return (r.makespan - 3.0 * m) / r.makespan; }

}  // namespace

TEST_CASE("every schedule runs each micro-batch forward then backward exactly once", "[schedule]") {
  for (Schedule sched : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved_1f1b}) {
    for (int p : {1, 2, 4, 8}) {
      for (int m : {p, 2 * p, 4 * p}) {
        const int v = sched == Schedule::interleaved_1f1b ? 2 : 1;
        for (int s = 0; s < p; ++s) {
          const auto steps = stage_schedule(sched, {p, m, v}, s);
          CHECK(steps.size() == static_cast<std::size_t>(2 * m * v));
          std::map<std::pair<int, int>, int> state;  // 0 none, 1 forward seen, 2 backward seen
          for (const auto& st : steps) {
            int& k = state[{st.micro_batch, st.chunk}];
            CHECK(k == (st.kind == Kind::forward ? 0 : 1));
            k = st.kind == Kind::forward ? 1 : 2;
          }
          CHECK(state.size() == static_cast<std::size_t>(m * v));
        }
      }
    }
  }
}

TEST_CASE("GPipe and 1F1B bubbles are (p-1)/(m+p-1) with uniform stages", "[schedule][bubble]") {
  for (Schedule sched : {Schedule::gpipe, Schedule::one_f_one_b}) {
    for (int p : {2, 4, 8}) {
      for (int m : {1, 4, 8, 32}) {
        const Run r = execute(sched, {p, m, 1});
        REQUIRE_FALSE(r.deadlock);
        CHECK(r.makespan == Approx(3.0 * (m + p - 1)));
        CHECK(bubble(r, m) == Approx(static_cast<double>(p - 1) / (m + p - 1)));
      }
    }
  }
}

TEST_CASE("interleaving with v chunks divides the bubble by v", "[schedule][bubble]") {
  // Idle time (p-1)·3/v instead of (p-1)·3: makespan 3m + 3(p-1)/v.
  for (int p : {2, 4}) {
    for (int v : {2, 3, 4}) {
      for (int m : {p, 2 * p, 4 * p}) {
        const Run r = execute(Schedule::interleaved_1f1b, {p, m, v});
        REQUIRE_FALSE(r.deadlock);
        CHECK(r.makespan == Approx(3.0 * m + 3.0 * (p - 1) / v));
        const Run flat = execute(Schedule::one_f_one_b, {p, m, 1});
        CHECK((r.makespan - 3.0 * m) == Approx((flat.makespan - 3.0 * m) / v));
      }
    }
  }
}

TEST_CASE("1F1B holds at most p micro-batches of activations, GPipe holds m", "[schedule][memory]") {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 3, 8, 32}) {
      CHECK(peak_in_flight(stage_schedule(Schedule::gpipe, {p, m, 1}, 0)) == m);
      CHECK(peak_in_flight(stage_schedule(Schedule::one_f_one_b, {p, m, 1}, 0)) == std::min(p, m));
      // The last stage of 1F1B turns each micro-batch around at once.
      CHECK(peak_in_flight(stage_schedule(Schedule::one_f_one_b, {p, m, 1}, p - 1)) == 1);
      for (int s = 0; s < p; ++s) {
        CHECK(peak_in_flight(stage_schedule(Schedule::one_f_one_b, {p, m, 1}, s)) <= p);
      }
    }
  }
}

TEST_CASE("interleaved warm-up follows Megatron's rule", "[schedule]") {
  // p = 4, v = 2, m = 8: stage 0 warms up with (4-0-1)·2 + (2-1)·4 = 10 forwards, so it
  // holds 11 chunk activations = 5.5 stages' worth of micro-batches.
  const auto s0 = stage_schedule(Schedule::interleaved_1f1b, {4, 8, 2}, 0);
  int warm = 0;
  while (s0[static_cast<std::size_t>(warm)].kind == Kind::forward) ++warm;
  CHECK(warm == 11);  // 10 warm-up forwards, then the first steady-state forward
  CHECK(peak_in_flight(s0) == 11);
  // The first forwards cycle chunk 0 over micro-batches 0..3, then chunk 1.
  CHECK(s0[0] == PipelineStep{Kind::forward, 0, 0});
  CHECK(s0[3] == PipelineStep{Kind::forward, 3, 0});
  CHECK(s0[4] == PipelineStep{Kind::forward, 0, 1});
  // m = p: everything forward first.
  const auto all = stage_schedule(Schedule::interleaved_1f1b, {4, 4, 2}, 2);
  CHECK(peak_in_flight(all) == 8);
  CHECK_THROWS_AS(stage_schedule(Schedule::interleaved_1f1b, {4, 6, 2}, 0), std::invalid_argument);
}

TEST_CASE("a stage's holdings are its schedule's (held, last chunk's) pairs, each once in order", "[schedule]") {
  for (const Schedule sc : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved_1f1b}) {
    const PipelineShape shape{4, 8, sc == Schedule::interleaved_1f1b ? 2 : 1};
    for (int stage = 0; stage < 4; ++stage) {
      std::vector<std::pair<int, int>> want;
      int held = 0, last = 0;
      for (const PipelineStep& step : stage_schedule(sc, shape, stage)) {
        const int d = step.kind == PipelineStep::Kind::forward ? 1 : -1;
        held += d;
        if (step.chunk == shape.virtual_stages - 1) last += d;
        if (std::find(want.begin(), want.end(), std::make_pair(held, last)) == want.end()) want.emplace_back(held, last);
      }
      CHECK(stage_holdings(sc, shape, stage) == want);
      CHECK(&stage_holdings(sc, shape, stage) == &stage_holdings(sc, shape, stage));  // memoised
      int peak = 0;
      for (const auto& [h, l] : want) peak = std::max(peak, h);
      CHECK(peak == peak_in_flight(stage_schedule(sc, shape, stage)));
    }
  }
}
