// Catch2 under MPI: every rank runs the same test cases in the same order (each case is
// collective); rank 0 reports, the others are quiet; the exit status is the worst rank's.
#include "tests/catch_runner.hpp"
#include <mpi.h>

#include <cstdio>

#include "exec/cpu/cpu_device.hpp"

int main(int argc, char** argv) {
  parasim::exec::ensure_mpi();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  int rc = parasim::test::run_catch(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}
