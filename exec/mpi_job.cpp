#include "exec/mpi_job.hpp"

#include <chrono>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace parasim::exec {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(fmt::format("MPI {} failed: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

int mpi_count(std::int64_t v) {
  if (v > std::numeric_limits<int>::max()) throw std::length_error("message larger than MPI's int count");
  return static_cast<int>(v);
}

void ensure_mpi() {
  int ready = 0;
  MPI_Initialized(&ready);
  if (ready != 0) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Finalize();
  });
}

MpiJob::MpiJob() {
  ensure_mpi();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
}

MpiJob::~MpiJob() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  for (MPI_Comm& c : comms_) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
}

MPI_Comm MpiJob::group(std::span<const int> ranks, int key) {
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_create_group(MPI_COMM_WORLD, group, key, &comm), "communicator creation");
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  comms_.push_back(comm);
  return comm;
}

std::int64_t MpiJob::now_ns() const { return steady_ns() - clock_offset_ns_; }

void MpiJob::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

void MpiJob::sum_to_all(std::span<double> values) {
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD),
            "all-reduce");
}

void MpiJob::max_to_all(std::span<double> values) {
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD),
            "all-reduce");
}

std::vector<char> MpiJob::gather_to_root(std::span<const char> mine) {
  const int size = mpi_count(static_cast<std::int64_t>(mine.size()));
  std::vector<int> sizes(static_cast<std::size_t>(world_));
  check_mpi(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "gather");
  std::vector<int> displs(sizes.size());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = mpi_count(total);
    total += sizes[i];
  }
  std::vector<char> out(rank_ == 0 ? static_cast<std::size_t>(total) : 0);
  check_mpi(MPI_Gatherv(mine.data(), size, MPI_BYTE, out.data(), sizes.data(), displs.data(), MPI_BYTE, 0,
                        MPI_COMM_WORLD),
            "gather");
  return out;
}

void MpiJob::abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}


void MpiJob::align_clock() {
  clock_offset_ns_ = 0;
  constexpr int rounds = 20;
  for (int r = 1; r < world_; ++r) {
    if (rank_ == 0) {
      std::int64_t best_rtt = std::numeric_limits<std::int64_t>::max();
      std::int64_t offset = 0;
      for (int i = 0; i < rounds; ++i) {
        const std::int64_t t0 = steady_ns();
        std::int64_t tr = 0;
        MPI_Send(&t0, 1, MPI_INT64_T, r, 900, MPI_COMM_WORLD);
        MPI_Recv(&tr, 1, MPI_INT64_T, r, 901, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const std::int64_t t1 = steady_ns();
        if (t1 - t0 < best_rtt) {
          best_rtt = t1 - t0;
          offset = tr - (t0 + t1) / 2;
        }
      }
      MPI_Send(&offset, 1, MPI_INT64_T, r, 902, MPI_COMM_WORLD);
    } else if (rank_ == r) {
      for (int i = 0; i < rounds; ++i) {
        std::int64_t t0 = 0;
        MPI_Recv(&t0, 1, MPI_INT64_T, 0, 900, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const std::int64_t tr = steady_ns();
        MPI_Send(&tr, 1, MPI_INT64_T, 0, 901, MPI_COMM_WORLD);
      }
      MPI_Recv(&clock_offset_ns_, 1, MPI_INT64_T, 0, 902, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  barrier();
}


}  // namespace parasim::exec
