#include "plan/value.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace parasim::plan {
namespace {

Location location(const YAML::Mark& m, const std::string& file) {
  if (m.is_null()) return Location{file, 0, 0};
  return Location{file, m.line + 1, m.column + 1};
}

Value convert(const YAML::Node& n, const std::string& file, const std::string& path) {
  Value v;
  v.loc = location(n.Mark(), file);
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      v.kind = Value::Kind::null;
      break;
    case YAML::NodeType::Scalar:
      v.kind = Value::Kind::scalar;
      v.scalar = n.Scalar();
      break;
    case YAML::NodeType::Sequence:
      v.kind = Value::Kind::sequence;
      for (const auto& item : n) v.items.push_back(convert(item, file, fmt::format("{}[{}]", path, v.items.size())));
      break;
    case YAML::NodeType::Map:
      v.kind = Value::Kind::map;
      for (const auto& kv : n) {
        Location key_loc = location(kv.first.Mark(), file);
        if (!kv.first.IsScalar()) throw ScenarioError(key_loc, "", "expected a plain key (a name), got a structure");
        std::string key = kv.first.Scalar();
        const std::string key_path = path.empty() ? key : path + "." + key;
        if (const Entry* dup = v.find(key)) {
          throw ScenarioError(key_loc, key_path, fmt::format("duplicate key (first set on line {})", dup->key_loc.line));
        }
        v.entries.push_back(Entry{std::move(key), key_loc, convert(kv.second, file, key_path)});
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
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ScenarioError(location(e.mark, file), "", fmt::format("YAML syntax error: {}", e.msg));
  }
  Value v = convert(root, file, "");
  if (v.kind == Value::Kind::null) {  // an empty document is an empty map
    v.kind = Value::Kind::map;
    v.loc = Location{file, 1, 1};
  }
  return v;
}

Value parse_yaml_file(const std::string& path) {
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

}  // namespace parasim::plan
