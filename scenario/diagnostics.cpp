#include "scenario/diagnostics.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace parasim::scenario {
namespace {

std::string render(const Location& w, const std::string& key, const std::string& message) {
  std::string out = w.file;
  if (w.line > 0) out += fmt::format(":{}:{}", w.line, w.column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

template <typename Range>
std::string nearest_in(std::string_view word, const Range& candidates) {
  std::string best;
  int best_d = std::max(2, static_cast<int>(word.size()) / 3) + 1;
  for (const auto& c : candidates) {
    const int d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

}  // namespace

ScenarioError::ScenarioError(Location where, std::string key, std::string message)
    : std::runtime_error(render(where, key, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      message_(std::move(message)) {}

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest(std::string_view word, std::span<const std::string_view> candidates) {
  return nearest_in(word, candidates);
}

std::string nearest(std::string_view word, std::span<const std::string> candidates) {
  return nearest_in(word, candidates);
}

}  // namespace parasim::scenario
