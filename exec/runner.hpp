// The runner: executes one rank's ops of the Program on a Device, step after step, under
// the Program's execution rules (program.hpp), and times every op.
//
// One loop per rank, without threads: it polls the communication in flight (which also
// drives MPI's progress), posts every communication op whose dependencies are done (the
// tp and dp streams one op at a time in order, the pp stream in order but without waiting
// for earlier transfers to finish), then runs the next compute op if its dependencies are
// done. Communication therefore overlaps compute wherever the Program lets it. An op's
// span runs from when it was started (posted) to when its completion was seen; a receive's
// span covers its waiting, as in the simulator's trace.
//
// A rank that sees no progress for `stall_seconds` ends the job, naming the op it waits
// for (a peer that died or never posted its half).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/device.hpp"
#include "exec/shard.hpp"
#include "plan/program.hpp"

namespace parasim::exec {

struct OpSpan {
  std::int64_t op = -1;
  std::int64_t start_ns = 0;  // aligned clock
  std::int64_t end_ns = 0;
  double memory = 0.0;  // device bytes in use when the op ended
};

struct StepTiming {
  std::int64_t start_ns = 0;  // this rank's start, after the barrier
  std::int64_t end_ns = 0;    // its last op's end
  std::vector<OpSpan> spans;
  double flops = 0.0;  // performed by this rank
};

class Runner {
 public:
  Runner(Device& dev, const plan::Scenario& s, const plan::Program& prog, Shard& shard, double stall_seconds = 60.0);

  StepTiming step(std::int64_t index);

 private:
  struct InFlight {
    std::int64_t op;
    Request request;
  };
  bool ready(std::int64_t op) const;
  void start(std::int64_t op, std::vector<InFlight>& flying);
  // Marks `op` done; its span ends at end_ns when the device knows when (else now).
  void finish(std::int64_t op, std::int64_t end_ns = 0);
  void run_compute(const plan::Op& o);
  int boundary_of(const plan::Op& o) const;
  int tag_of(const plan::Op& o) const;
  [[noreturn]] void stalled(const std::vector<InFlight>& flying, const std::vector<std::size_t>& next) const;

  Device& dev_;
  const plan::Scenario& s_;
  const plan::Program& prog_;
  Shard& shard_;
  double stall_seconds_;
  int rank_;
  std::vector<std::int64_t> queue_[plan::stream_count];
  std::vector<std::uint8_t> state_;  // per global op: 0 waiting, 1 started, 2 done
  std::vector<Comm> comm_of_group_;
  std::vector<OpSpan> spans_;
  std::vector<std::size_t> span_of_;  // per global op of this rank: index in spans_
};

}  // namespace parasim::exec
