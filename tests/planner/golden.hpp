// Golden outputs: text checked against tests/golden/..., rewritten instead when the tests
// run with PARASIM_UPDATE_GOLDEN=1 (after an intended change, reviewed in the diff).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace parasim::test {

// The seed scenarios, in name order.
inline std::vector<std::filesystem::path> seed_scenarios() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(PARASIM_SOURCE_DIR "/scenarios")) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Checks `actual` against the golden file `relative` (under tests/golden).
inline void check_golden(const std::string& relative, const std::string& actual) {
  const std::filesystem::path golden = std::filesystem::path(PARASIM_SOURCE_DIR) / "tests" / "golden" / relative;
  if (std::getenv("PARASIM_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(golden.parent_path());
    std::ofstream(golden) << actual;
  }
  std::ifstream in(golden);
  INFO("golden file " << golden.string() << " (set PARASIM_UPDATE_GOLDEN=1 to write it)");
  REQUIRE(in.good());
  std::stringstream expected;
  expected << in.rdbuf();
  CHECK(actual == expected.str());
}

}  // namespace parasim::test
