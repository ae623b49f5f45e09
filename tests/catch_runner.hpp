// Runs the Catch2 session with the command line (the implementation is in catch_impl.cpp).
#pragma once

namespace parasim::test {

int run_catch(int argc, char** argv);

}  // namespace parasim::test
