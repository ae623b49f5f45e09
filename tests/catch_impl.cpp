// Catch2's implementation, compiled once for every test binary. Each binary's own main
// (main.cpp, exec/mpi_main.cpp, exec/cuda_main.cpp, gui/main.cpp) calls run_catch, as
// Catch::Session is declared only where the implementation is.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

namespace parasim::test {

// A test filter that matches no test fails the run (Catch's --warn NoTests, always on): a
// test whose name the build's test discovery cut (a ';' splits a CMake list) would
// otherwise pass without running.
int run_catch(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  Catch::ConfigData& config = session.configData();
  config.warnings = static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
  return session.run();
}

}  // namespace parasim::test
