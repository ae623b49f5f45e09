#include <catch2/catch.hpp>

#include <array>

#include "scenario/diagnostics.hpp"

using namespace parasim::scenario;

TEST_CASE("edit distance counts insertions, deletions and substitutions", "[diagnostics]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("tp", "tp") == 0);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("gpu_per_node", "gpus_per_node") == 1);
  CHECK(edit_distance("abc", "") == 3);
}

TEST_CASE("nearest suggests only plausible typos", "[diagnostics]") {
  constexpr std::array<std::string_view, 4> keys{"nodes", "gpus_per_node", "device", "intra_node"};
  CHECK(nearest("gpu_per_node", keys) == "gpus_per_node");
  CHECK(nearest("node", keys) == "nodes");
  CHECK(nearest("devise", keys) == "device");
  CHECK(nearest("completely_unrelated", keys).empty());
}

TEST_CASE("an error renders as file:line:col: key: message", "[diagnostics]") {
  const ScenarioError e(Location{"x.yaml", 12, 7}, "plan.tp", "expected a positive integer, got 'four'");
  CHECK(std::string(e.what()) == "x.yaml:12:7: plan.tp: expected a positive integer, got 'four'");
  const ScenarioError f(Location{"missing.yaml", 0, 0}, "", "cannot open the scenario (no such file)");
  CHECK(std::string(f.what()) == "missing.yaml: cannot open the scenario (no such file)");
}
