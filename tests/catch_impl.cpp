// Catch2's implementation, compiled once for every test binary. Each binary's own main
// (main.cpp, exec/mpi_main.cpp, exec/cuda_main.cpp, gui/main.cpp) calls run_catch, as
// Catch::Session is declared only where the implementation is.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

namespace parasim::test {

int run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace parasim::test
