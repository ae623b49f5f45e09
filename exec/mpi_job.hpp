// The job's host side over MPI, shared by every backend: this process's rank in the job,
// blocking barrier, sums and maxima of doubles, a gather of bytes on rank 0, ending every
// rank, communicators over a set of ranks, and a clock aligned across ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace parasim::exec {

// MPI for the process's lifetime: initialised on first use (single-threaded calls), errors
// returned rather than fatal so they carry a message, finalised at exit.
void ensure_mpi();
// Throws std::runtime_error naming `what` and MPI's message unless `code` is MPI_SUCCESS.
void check_mpi(int code, const char* what);
// A count for MPI's int arguments; throws past INT_MAX.
int mpi_count(std::int64_t v);

class MpiJob {
 public:
  MpiJob();
  ~MpiJob();
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int world() const { return world_; }

  void barrier();
  void sum_to_all(std::span<double> values);
  void max_to_all(std::span<double> values);
  // Every rank's bytes, concatenated in rank order, on rank 0 (empty elsewhere).
  std::vector<char> gather_to_root(std::span<const char> mine);
  [[noreturn]] void abort_all(int code);

  // A communicator over `ranks` (world ranks, in order), created collectively by them with
  // the same `key`; freed with the job.
  MPI_Comm group(std::span<const int> ranks, int key);

  // Nanoseconds on a clock aligned across ranks: rank 0's steady clock. Rank 0 probes each
  // other rank in turn: it sends its time t0, the rank answers with its own tr, rank 0
  // notes t1 on receipt; the offset is tr - (t0 + t1) / 2 from the round trip with the
  // smallest t1 - t0 (Cristian's algorithm). Collective.
  [[nodiscard]] std::int64_t now_ns() const;
  void align_clock();

 private:
  int rank_ = 0;
  int world_ = 1;
  std::int64_t clock_offset_ns_ = 0;
  std::vector<MPI_Comm> comms_;
};

}  // namespace parasim::exec
