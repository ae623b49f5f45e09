// A loaded scenario rendered for people (the resolved values, defaults filled in) and for
// scripts (JSON with SI units: bytes, bytes/s, seconds, FLOP/s).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "scenario/scenario.hpp"

namespace parasim::scenario {

nlohmann::ordered_json to_json(const Scenario& s);
std::string describe(const Scenario& s);
// "tp,dp,pp": the placement as the scenario key writes it.
std::string placement_string(const ParallelPlan& p);
// "dp 2 x tp 8 x pp 2 (v 2, sequence parallel, tp comm overlap)": the plan's shape in one line.
std::string layout_string(const ParallelPlan& p);

}  // namespace parasim::scenario
