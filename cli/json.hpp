// What every JSON document parasim writes opens with: "schema", the document's kind and
// version ("parasim.simulate/1": docs/json.md lists each one's keys; the number changes
// when a key is removed or changes meaning, not when one is added), and "parasim", the
// version and source revision (git describe) of the program that wrote it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/memory.hpp"

namespace parasim::cli {

nlohmann::ordered_json stamped(std::string_view kind, const nlohmann::ordered_json& body);

// The memory per rank as check and simulate print it: capacity, fits, and per pipeline
// stage each part (weights, gradients, master, optimizer, activations, logits, workspace,
// host with offloading) and the total.
nlohmann::ordered_json memory_json(const plan::MemoryReport& mem);

// "parasim 0.1.0 (git 1a2b3c4d5e6f), built with ...": --version's line.
std::string version_line();

// This host's name, and the time now in UTC as ISO 8601 (comparison.json's provenance).
std::string host_name();
std::string utc_now();

}  // namespace parasim::cli
