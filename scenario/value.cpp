#include "scenario/value.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "scenario/limits.hpp"

namespace parasim::scenario {
namespace {

Location location(const YAML::Mark& m, const std::string& file) {
  if (m.is_null()) return Location{file, 0, 0};
  return Location{file, m.line + 1, m.column + 1};
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    unsigned min = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      extra = 1, min = 0x80, cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min = 0x800, cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min = 0x10000, cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<std::size_t>(extra)) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

// Where a second document starts, or 0: a '---' line after content, or anything but a
// comment after a '...' line (the end of the first document). A '---' before any content,
// after directives such as '%YAML 1.2', only opens the first.
struct SecondDocument {
  int line = 0;
  bool after_end = false;  // found after '...'
};

SecondDocument second_document(std::string_view text) {
  auto starts_marker = [](std::string_view l, std::string_view m) {
    return l.starts_with(m) && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
  };
  bool content = false;
  bool ended = false;
  int line = 1;
  for (std::size_t at = 0; at < text.size(); ++line) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(at, end - at);
    const auto first = l.find_first_not_of(" \t\r");
    const bool blank = first == std::string_view::npos || l[first] == '#';
    if (starts_marker(l, "---")) {
      if (content || ended) return {line, ended};
    } else if (starts_marker(l, "...")) {
      ended = true;
    } else if (!blank) {
      if (ended) return {line, true};
      if (l[0] != '%') content = true;  // a directive belongs to the document it opens
    }
    at = end + 1;
  }
  return {};
}

struct Converter {
  const std::string& file;
  long long nodes = 0;

  Value convert(const YAML::Node& n, const std::string& path, int depth = 0);
};

Value Converter::convert(const YAML::Node& n, const std::string& path, int depth) {
  Value v;
  v.loc = location(n.Mark(), file);
  // Aliases are expanded into copies: a few hundred bytes of nested aliases would grow
  // into gigabytes without a bound on the values one document may hold.
  if (++nodes > limits::yaml_nodes) {
    throw ScenarioError(v.loc, path,
                        fmt::format("the document holds more than {} values (counting each alias's copy); a "
                                    "scenario needs a few hundred",
                                    limits::yaml_nodes));
  }
  // An alias inside its own anchor ('a: &a [*a]') makes the node graph a cycle; deep
  // nesting would exhaust the stack. A scenario nests a handful of levels.
  if (depth >= limits::yaml_depth) {
    throw ScenarioError(v.loc, path,
                        fmt::format("values nested more than {} levels deep (an alias inside its own anchor?); "
                                    "a scenario nests a few",
                                    limits::yaml_depth));
  }
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      v.kind = Value::Kind::null;
      break;
    case YAML::NodeType::Scalar:
      v.kind = Value::Kind::scalar;
      v.scalar = n.Scalar();
      if (!valid_utf8(v.scalar)) throw ScenarioError(v.loc, path, "expected UTF-8 text; the value has bytes that are not");
      break;
    case YAML::NodeType::Sequence:
      v.kind = Value::Kind::sequence;
      for (const auto& item : n) v.items.push_back(convert(item, fmt::format("{}[{}]", path, v.items.size()), depth + 1));
      break;
    case YAML::NodeType::Map:
      v.kind = Value::Kind::map;
      for (const auto& kv : n) {
        Location key_loc = location(kv.first.Mark(), file);
        if (!kv.first.IsScalar()) throw ScenarioError(key_loc, "", "expected a plain key (a name), got a structure");
        std::string key = kv.first.Scalar();
        if (!valid_utf8(key)) throw ScenarioError(key_loc, path, "expected a UTF-8 key; the key has bytes that are not");
        const std::string key_path = path.empty() ? key : path + "." + key;
        // yaml-cpp 0.7 reads a merge key as a plain key named '<<', merging nothing.
        if (key == "<<") {
          throw ScenarioError(key_loc, key_path,
                              "a YAML merge key ('<<: *anchor') is not read here: write the keys out, or put the "
                              "shared part in a file and use extends:");
        }
        if (const Entry* dup = v.find(key)) {
          throw ScenarioError(key_loc, key_path, fmt::format("duplicate key (first set on line {})", dup->key_loc.line));
        }
        v.entries.push_back(Entry{std::move(key), key_loc, convert(kv.second, key_path, depth + 1)});
      }
      break;
  }
  return v;
}

}  // namespace

const Entry* Value::find(std::string_view key) const {
  for (const Entry& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

Entry* Value::find(std::string_view key) {
  return const_cast<Entry*>(static_cast<const Value*>(this)->find(key));
}

std::string_view Value::kind_name() const {
  switch (kind) {
    case Kind::null: return "nothing";
    case Kind::scalar: return "a single value";
    case Kind::map: return "a section of keys";
    case Kind::sequence: return "a list";
  }
  return "?";
}

Value parse_yaml(std::string_view text, const std::string& file) {
  if (static_cast<long long>(text.size()) > limits::file_bytes) {
    throw ScenarioError(Location{file, 0, 0}, "",
                        fmt::format("the text is {} bytes, past the limit of {} for one document", text.size(),
                                    limits::file_bytes));
  }
  YAML::Node root;
  try {
    // YAML::Load reads the first document only; yaml-cpp 0.7's LoadAll can loop forever on
    // malformed input, so a second document is found from the text (a '---' line).
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard, whose message is only "bad file".
    throw ScenarioError(location(e.mark, file), "",
                        fmt::format("values nested more than {} levels deep (the YAML reader's limit); a "
                                    "scenario nests a few, and allows {}",
                                    e.depth(), limits::yaml_depth));
  } catch (const YAML::Exception& e) {
    throw ScenarioError(location(e.mark, file), "", fmt::format("YAML syntax error: {}", e.msg));
  }
  if (const SecondDocument second = second_document(text); second.line > 0) {
    throw ScenarioError(Location{file, second.line, 1}, "",
                        second.after_end ? "a second YAML document (after the end marker '...'); a scenario file "
                                           "holds one document"
                                         : "a second YAML document (after '---'); a scenario file holds one document");
  }
  Converter conv{file};
  Value v = conv.convert(root, "");
  if (v.kind == Value::Kind::null) {  // an empty document is an empty map
    v.kind = Value::Kind::map;
    v.loc = Location{file, 1, 1};
  }
  return v;
}

Value parse_yaml_file(const std::string& path) {
  // Only regular files: a FIFO or a device such as /dev/zero would block or never end.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && status.type() != std::filesystem::file_type::regular) {
    throw ScenarioError(Location{path, 0, 0}, "",
                        std::filesystem::is_directory(status) ? "expected a file, got a directory"
                                                              : "expected a regular file (not a device, FIFO or socket)");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && static_cast<long long>(size) > limits::file_bytes) {
    throw ScenarioError(Location{path, 0, 0}, "",
                        fmt::format("the file is {} bytes, past the limit of {} (4 MiB) for a scenario or profile",
                                    size, limits::file_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(Location{path, 0, 0}, "", "cannot open the file (does it exist and is it readable?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_yaml(text.str(), path);
}

void merge_into(Value& base, const Value& top) {
  if (base.is_scalar() && top.is_map() && top.find("preset") == nullptr) {
    // A preset name refined by keys (a cluster preset's device, refined by a scenario).
    Value name = base;
    base = Value{};
    base.kind = Value::Kind::map;
    base.loc = name.loc;
    base.entries.push_back(Entry{"preset", name.loc, name});
  }
  if (!base.is_map() || !top.is_map()) {
    base = top;
    return;
  }
  for (const Entry& e : top.entries) {
    Entry* mine = base.find(e.key);
    if (mine == nullptr) {
      base.entries.push_back(e);
    } else {
      mine->key_loc = e.key_loc;
      merge_into(mine->value, e.value);
    }
  }
}

void apply_override(Value& root, std::string_view assignment) {
  const std::string origin = fmt::format("--set {}", assignment);
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ScenarioError(Location{origin, 0, 0}, "", "expected KEY=VALUE, such as plan.tp=4");
  }
  const std::string_view path = assignment.substr(0, eq);
  const std::string_view text = assignment.substr(eq + 1);
  Value value = parse_yaml(text, origin);
  if (value.kind == Value::Kind::map && value.entries.empty() && text.find_first_not_of(" \t") == std::string_view::npos) {
    value.kind = Value::Kind::null;
  }
  // The value's columns count from the start of VALUE; shift them to the whole assignment.
  std::vector<Value*> todo{&value};
  while (!todo.empty()) {
    Value* v = todo.back();
    todo.pop_back();
    v->loc = Location{origin, 1, static_cast<int>(eq) + 1 + std::max(v->loc.column, 1)};
    for (Entry& e : v->entries) todo.push_back(&e.value);
    for (Value& i : v->items) todo.push_back(&i);
  }

  Value* at = &root;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string key(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (key.empty()) throw ScenarioError(Location{origin, 1, 1}, std::string(path), "empty key in a dotted path");
    // A list's entry by its index: cluster.degraded.0.factor.
    if (at->kind == Value::Kind::sequence && key.find_first_not_of("0123456789") == std::string::npos) {
      const std::size_t index = key.size() > 9 ? at->items.size() : std::stoul(key);
      if (index >= at->items.size()) {
        throw ScenarioError(Location{origin, 1, static_cast<int>(start) + 1}, std::string(path.substr(0, dot)),
                            fmt::format("index {} is past the list's end: it has {} entr{} (from 0)", key,
                                        at->items.size(), at->items.size() == 1 ? "y" : "ies"));
      }
      if (dot == std::string_view::npos) {
        at->items[index] = std::move(value);
        return;
      }
      at = &at->items[index];
      start = dot + 1;
      continue;
    }
    if (at->kind == Value::Kind::scalar) {  // preset name: refine it
      Value preset = *at;
      *at = Value{};
      at->kind = Value::Kind::map;
      at->loc = preset.loc;
      at->entries.push_back(Entry{"preset", preset.loc, preset});
    } else if (at->kind != Value::Kind::map) {
      *at = Value{};
      at->kind = Value::Kind::map;
      at->loc = Location{origin, 1, 1};
    }
    Entry* e = at->find(key);
    if (e == nullptr) {
      at->entries.push_back(Entry{key, Location{origin, 1, static_cast<int>(start) + 1}, Value{}});
      e = &at->entries.back();
      e->value.loc = Location{origin, 1, static_cast<int>(start) + 1};
    }
    e->key_loc = Location{origin, 1, static_cast<int>(start) + 1};
    if (dot == std::string_view::npos) {
      e->value = std::move(value);
      return;
    }
    at = &e->value;
    start = dot + 1;
  }
}

namespace {

void emit(YAML::Emitter& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::null: out << YAML::Null; break;
    case Value::Kind::scalar: out << v.scalar; break;
    case Value::Kind::map:
      out << YAML::BeginMap;
      for (const Entry& e : v.entries) {
        out << YAML::Key << e.key << YAML::Value;
        emit(out, e.value);
      }
      out << YAML::EndMap;
      break;
    case Value::Kind::sequence:
      out << YAML::BeginSeq;
      for (const Value& item : v.items) emit(out, item);
      out << YAML::EndSeq;
      break;
  }
}

}  // namespace

std::string to_yaml(const Value& v) {
  YAML::Emitter out;
  emit(out, v);
  return std::string(out.c_str()) + "\n";
}

}  // namespace parasim::scenario
