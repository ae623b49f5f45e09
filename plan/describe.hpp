// A loaded scenario rendered for people (the resolved values, defaults filled in) and for
// scripts (JSON with SI units: bytes, bytes/s, seconds, FLOP/s).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/scenario.hpp"

namespace parasim::plan {

nlohmann::ordered_json to_json(const Scenario& s);
std::string describe(const Scenario& s);

}  // namespace parasim::plan
