// What every JSON document parasim writes opens with: "schema", the document's kind and
// version ("parasim.simulate/1": docs/json.md lists each one's keys; the number changes
// when a key is removed or changes meaning, not when one is added), and "parasim", the
// version and source revision (git describe) of the program that wrote it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "workload/memory.hpp"

namespace parasim::cli {

// `version`: the schema's number, raised when a key is removed or changes meaning.
nlohmann::ordered_json stamped(std::string_view kind, const nlohmann::ordered_json& body, int version = 1);

// The memory per rank as check and simulate print it: capacity, fits, and per pipeline
// stage each part (weights, gradients, master, optimizer, activations, logits, workspace,
// host with offloading) and the total.
nlohmann::ordered_json memory_json(const workload::MemoryReport& mem);

// "parasim 0.1.0 (git 1a2b3c4d5e6f), built with ...": --version's line.
std::string version_line();

// --json [FILE], the same on every command. Bare (or "--json -"), the JSON goes to standard
// output in place of the tables; with a FILE the command writes the JSON there and prints
// its usual output as well.
struct JsonOption {
  std::string path;  // empty: not asked for; "-": standard output

  void add_to(CLI::App& cmd, std::string_view what);
  bool wanted() const { return !path.empty(); }
  bool on_stdout() const { return path == "-"; }
};

// An option with an optional value would take the scenario after it for a file name, so
// main() spells every "--json" out before parsing: followed by "-" or a name ending in
// ".json" or ".json.gz" it becomes "--json=NAME", otherwise "--json=-". "--json=NAME"
// always names a file.
std::vector<std::string> spell_json_options(const std::vector<std::string>& args);

// While it lives, what the command prints to standard output goes to standard error, so
// that "--json" leaves standard output to the JSON alone (run, validate, calibrate: their
// ranks print as they go).
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool active);
  ~StdoutToStderr();
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

// This host's name, and the time now in UTC as ISO 8601 (comparison.json's provenance).
std::string host_name();
std::string utc_now();

}  // namespace parasim::cli
