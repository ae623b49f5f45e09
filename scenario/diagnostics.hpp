// Errors in a scenario. Every one names where (file, line, column), which key (the dotted
// path, such as plan.tp) and what was expected; the CLI prints it as
//   scenarios/x.yaml:12:7: plan.tp: expected a positive integer, got 'four'
// and exits with code 2.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace parasim::scenario {

struct Location {
  std::string file;  // as given, or "--set KEY=VALUE" / "preset NAME (path)"
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based
};

class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(Location where, std::string key, std::string message);
  [[nodiscard]] const Location& where() const { return where_; }
  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  Location where_;
  std::string key_;
  std::string message_;
};

// Levenshtein distance, and the candidate closest to `word` if it is close enough to be a
// plausible typo (distance at most max(2, |word| / 3)); empty otherwise.
int edit_distance(std::string_view a, std::string_view b);
std::string nearest(std::string_view word, std::span<const std::string_view> candidates);
std::string nearest(std::string_view word, std::span<const std::string> candidates);

}  // namespace parasim::scenario
