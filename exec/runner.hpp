// The runner: executes one rank's ops of the Program on a Device, step after step, under
// the Program's execution rules (program.hpp), and times every op.
//
// One loop per rank, without threads: it polls what is in flight (which also drives MPI's
// progress), posts every communication op whose dependencies allow (the tp and dp streams
// one op at a time in order, the pp stream in order but without waiting for earlier
// transfers to finish, those posted in one pass as one group: Device::group_begin), then
// issues the next compute op. Communication therefore overlaps
// compute wherever the Program lets it.
//
// Devices may run asynchronously (CUDA): an op is issued (enqueued on its stream) before
// it is done. An op may be issued once each dependency is done, or is a compute op already
// issued, which its stream then waits for on the device (an event, wait_event) rather than
// the host. What the shard does when a communication op completes (tp_finish, freeing a
// sent buffer) runs on the host once it is done. An op's span runs from the event recorded
// before it on its stream to its completion (on the CPU backend: from when it was posted
// to when its completion was seen); a receive's span covers its waiting, as in the
// simulator's trace.
//
// A rank that sees no progress for `stall_seconds` ends the job, naming the op it waits
// for (a peer that died or never posted its half).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/device.hpp"
#include "exec/shard.hpp"
#include "program/program.hpp"

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
  Runner(Device& dev, const scenario::Scenario& s, const program::Program& prog, Shard& shard,
         double stall_seconds = 60.0);

  StepTiming step(std::int64_t index);
  // With overlap_param_gather each step opens with the previous step's parameter
  // all-gathers, and ZeRO-3 gathers each unit before its use: after the last step they run
  // once more (a unit once), so that every rank ends with the whole updated model. A no-op
  // otherwise.
  void gather_parameters();

 private:
  struct InFlight {
    std::int64_t op;
    Request request;  // communication
    Event end;        // compute: recorded after its kernels
  };
  bool ready(std::int64_t op) const;
  void start(std::int64_t op, std::vector<InFlight>& flying);
  // Marks `op` done; its span ends at end_ns when the device knows when (else now).
  void finish(std::int64_t op, std::int64_t end_ns = 0);
  void run_compute(const program::Op& o);
  // The layer slot whose gradients a backward compute op accumulates into, or no_slot.
  static constexpr int no_slot = -1000;
  int gradient_slot(const program::Op& o) const;
  int boundary_of(const program::Op& o) const;
  int tag_of(const program::Op& o) const;
  // A collective over the ranks holding the same experts (their buckets).
  bool experts(const program::Op& o) const;
  // A tp collective of the experts' rows (a mixture of experts with tp > 1).
  bool moe_tp(const program::Op& o) const;
  // An all-to-all of expert parallelism (Category::ep_comm), or moe_tp's collective, posted.
  Request exchange_tokens(const program::Op& o, Comm comm, int members);
  // A transfer of a tp overlap's ring or of the cp ring (not a pipeline boundary's).
  static bool is_ring(const program::Op& o) {
    return o.tp_role == program::TpRole::ring || o.category == program::Category::cp_comm;
  }
  static constexpr int ring_tag = 32767;  // MPI guarantees tags up to 32767; the cp ring's gradients 32766
  [[noreturn]] void stalled(const std::vector<InFlight>& flying, const std::vector<std::size_t>& next) const;

  Device& dev_;
  const scenario::Scenario& s_;
  const program::Program& prog_;
  Shard& shard_;
  double stall_seconds_;
  int rank_;
  std::vector<std::int64_t> queue_[program::stream_count];
  std::vector<std::uint8_t> state_;  // per global op: 0 waiting, 1 issued, 2 done
  std::vector<Event> begin_, end_;   // per global op of this rank: its events
  std::size_t done_ = 0;             // ops of this rank done in the current step
  std::vector<Comm> comm_of_group_;
  std::vector<OpSpan> spans_;
  std::vector<std::size_t> span_of_;  // per global op of this rank: index in spans_
  Buffer counts_;                     // the token counts' exchange (sent, then received)
  double delay_ = 1.0;                // run.inject: this step's compute slowed by this factor
};

}  // namespace parasim::exec
