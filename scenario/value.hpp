// A YAML document as a tree that remembers where every key and value came from. Scenario
// files, the files they extend, built-in presets and --set overrides are each read into
// this form with their own file name, then merged, so an error found after merging still
// points at the line that set the value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "scenario/diagnostics.hpp"

namespace parasim::scenario {

struct Entry;

struct Value {
  enum class Kind { null, scalar, map, sequence };
  Kind kind = Kind::null;
  std::string scalar;
  std::vector<Entry> entries;  // map, in file order
  std::vector<Value> items;    // sequence
  Location loc;

  [[nodiscard]] bool is_map() const { return kind == Kind::map; }
  [[nodiscard]] bool is_scalar() const { return kind == Kind::scalar; }
  [[nodiscard]] const Entry* find(std::string_view key) const;
  Entry* find(std::string_view key);
  [[nodiscard]] std::string_view kind_name() const;
};

struct Entry {
  std::string key;
  Location key_loc;
  Value value;
};

// Parses YAML text; `file` is what locations will name. Throws ScenarioError on a syntax
// error or a duplicate key.
Value parse_yaml(std::string_view text, const std::string& file);
Value parse_yaml_file(const std::string& path);

// The tree as YAML text (block style, keys in order), which parse_yaml reads back to the
// same tree.
std::string to_yaml(const Value& v);

// Overlays `top` on `base`: maps merge key by key (recursively), anything else replaces; a
// scalar (a preset name) under a map without `preset:` becomes {preset: name} refined by it.
void merge_into(Value& base, const Value& top);

// Applies "a.b.c=VALUE" to `root`, creating maps on the way. A scalar met on the way is
// a preset name (cluster: dgx-h100) and becomes {preset: NAME} so the override can refine it.
void apply_override(Value& root, std::string_view assignment);

}  // namespace parasim::scenario
