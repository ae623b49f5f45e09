// The plain test runner.
#include "catch_runner.hpp"

int main(int argc, char** argv) { return parasim::test::run_catch(argc, argv); }
