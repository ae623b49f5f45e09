#include "scenario/load.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "scenario/check.hpp"
#include "scenario/limits.hpp"

namespace fs = std::filesystem;

namespace parasim::scenario {
namespace {

// The top-level keys of a scenario: a file reached through extends: must have only these.
constexpr std::array<std::string_view, 10> scenario_keys{"name",  "description", "extends",  "cluster", "model",
                                                          "training", "plan",     "hardware", "run",     "job"};

// NeMo's recipes (NeMo-Framework-Launcher, launcher_scripts/conf/training/: e.g.
// nemotron/nemotron_15b.yaml, gpt3/175b.yaml) run tensor parallelism with sequence
// parallelism and Transformer Engine's tp communication overlap (sequence_parallel: true,
// ub_tp_comm_overlap: True), and the distributed optimizer with both data-parallel overlaps
// (optim: distributed_fused_adam, overlap_grad_sync: True, overlap_param_sync: true; NeMo's
// "Communication Overlap" guide). Under training.framework: nemo these are the defaults of
// the keys the plan leaves out (plan.zero and plan.overlap_param_gather in read_plan); tp
// overlap only where the model can have it (tp_overlap_possible).
void nemo_defaults(Scenario& s, const Value& plan) {
  if (s.training.framework != Framework::nemo || s.model.kind != ModelKind::transformer) return;
  ParallelPlan& p = s.plan;
  if (plan.find("sequence_parallel") == nullptr && p.tp > 1 && s.model.seq_len % (p.tp * p.cp) == 0)
    p.sequence_parallel = true;
  if (plan.find("tp_comm_overlap") == nullptr) p.tp_comm_overlap = tp_overlap_possible(s);
}

// Files read through extends: while loading one scenario, each once (a diamond of bases
// would otherwise be read once per path to it), with their own bases already merged.
struct BaseCache {
  std::map<fs::path, Value> done;
};

// Follows extends: from `doc` (already parsed, read from a file in `dir`).
Value with_bases(Value doc, const fs::path& dir, std::vector<fs::path>& chain, BaseCache& cache) {
  Entry* ext = doc.find("extends");
  if (ext == nullptr) return doc;
  std::vector<const Value*> bases;
  if (ext->value.is_scalar()) {
    bases.push_back(&ext->value);
  } else if (ext->value.kind == Value::Kind::sequence) {
    for (const Value& item : ext->value.items) {
      if (!item.is_scalar()) throw ScenarioError(item.loc, "extends", "expected a file name");
      bases.push_back(&item);
    }
  } else {
    throw ScenarioError(ext->value.loc, "extends", "expected a file name or a list of file names");
  }
  if (static_cast<int>(chain.size()) > limits::extends_depth) {
    throw ScenarioError(ext->value.loc, "extends",
                        fmt::format("extends: goes more than {} files deep (the limit)", limits::extends_depth));
  }

  Value merged;
  merged.kind = Value::Kind::map;
  merged.loc = doc.loc;
  for (const Value* b : bases) {
    fs::path p = dir / b->scalar;
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(p, ec);
    if (!fs::is_regular_file(p, ec)) {
      throw ScenarioError(b->loc, "extends", fmt::format("cannot open '{}' (looked for {})", b->scalar, p.string()));
    }
    for (const fs::path& seen : chain) {
      if (seen == canon) {
        throw ScenarioError(b->loc, "extends", fmt::format("'{}' extends itself through a cycle", b->scalar));
      }
    }
    auto hit = cache.done.find(canon);
    if (hit == cache.done.end()) {
      if (static_cast<int>(cache.done.size()) >= limits::extends_files) {
        throw ScenarioError(b->loc, "extends",
                            fmt::format("more than {} files are read through extends: (the limit)", limits::extends_files));
      }
      Value base = parse_yaml_file(p.string());
      // Say no more about a file that is not a scenario than that it is not one: its
      // first line may be something the user must not see (extends: /etc/shadow).
      bool scenario = base.is_map();
      for (const Entry& e : base.entries) {
        scenario = scenario && std::find(scenario_keys.begin(), scenario_keys.end(), e.key) != scenario_keys.end();
      }
      if (!scenario) {
        throw ScenarioError(b->loc, "extends",
                            fmt::format("'{}' is not a scenario file (its top level must be scenario keys: {})", b->scalar,
                                        fmt::join(scenario_keys, ", ")));
      }
      chain.push_back(canon);
      base = with_bases(std::move(base), p.parent_path(), chain, cache);
      chain.pop_back();
      hit = cache.done.emplace(canon, std::move(base)).first;
    }
    merge_into(merged, hit->second);
  }
  // The extending file wins over its bases; its own `extends` is spent.
  doc.entries.erase(doc.entries.begin() + (ext - doc.entries.data()));
  merge_into(merged, doc);
  return merged;
}

Value finish_document(Value doc, const fs::path& dir, const fs::path& self, std::span<const std::string> overrides) {
  if (!doc.is_map()) throw ScenarioError(doc.loc, "", fmt::format("a scenario is a section of keys, got {}", doc.kind_name()));
  std::vector<fs::path> chain{self};
  BaseCache cache;
  Value merged = with_bases(std::move(doc), dir, chain, cache);
  for (const std::string& o : overrides) {
    if (o.starts_with("extends=") || o.starts_with("extends.")) {
      throw ScenarioError(Location{fmt::format("--set {}", o), 1, 1}, "extends",
                          "cannot be set with --set (the files are read before overrides apply); write it in "
                          "the scenario");
    }
    apply_override(merged, o);
  }
  return merged;
}

Scenario from_document(const Value& root, const std::string& source) {
  Scenario s;
  s.source = source;
  const auto locations = std::make_shared<LocationMap>();
  s.locations = locations;
  LocationMap& where = *locations;
  Reader top(root, "", {"name", "description", "extends", "cluster", "model", "training", "plan", "hardware", "run", "job"},
             &where);
  s.name = top.string("name", fs::path(source).stem().string());
  // The name becomes part of file names (validate-NAME/): one plain path component.
  const bool control = std::any_of(s.name.begin(), s.name.end(), [](char ch) {
    return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
  });
  if (s.name.empty() || s.name.find_first_of("/\\") != std::string::npos || s.name.front() == '.' || control ||
      s.name.size() > 200) {
    if (top.has("name")) {
      top.fail("name", "expected a name of 1 to 200 characters without '/', '\\', control characters or a leading '.'");
    }
    s.name = "scenario";
  }
  s.description = top.string("description", std::string());

  auto section = [&](std::string_view key) -> const Value& {
    const Value* v = top.get(key);
    if (v == nullptr || v->kind == Value::Kind::null) {
      top.fail(key, fmt::format("missing required section '{}'", key));
    }
    return *v;
  };
  static const Value empty = [] {
    Value v;
    v.kind = Value::Kind::map;
    return v;
  }();
  auto optional_section = [&](std::string_view key) -> Value {
    const Value* v = top.get(key);
    if (v != nullptr && v->kind != Value::Kind::null) return *v;
    Value e = empty;
    e.loc = top.section_location();
    return e;
  };

  s.cluster = read_cluster(resolve_preset(section("cluster"), PresetKind::cluster, "cluster"), where);
  s.model = read_model(resolve_preset(section("model"), PresetKind::model, "model"), where);
  s.training = read_training(section("training"), s.cluster.device.kernels.present(), where);
  s.plan = read_plan(optional_section("plan"), s.cluster.total_gpus(), s.training.framework, where);
  nemo_defaults(s, optional_section("plan"));
  // Context parallelism's ring attention is FlashAttention's (Transformer Engine's): its
  // default on every device.
  if (s.plan.cp > 1 && section("training").find("attention") == nullptr) s.training.attention = Attention::flash;
  s.hardware = read_hardware(optional_section("hardware"), where);
  // The plan's ranks, for run.inject (not yet checked: a plan far past any cluster must not
  // overflow an int before check() rejects it).
  const double ranks = static_cast<double>(s.plan.dp) * s.plan.tp * s.plan.pp * s.plan.cp;
  s.run = read_run(optional_section("run"), s.cluster.device, static_cast<int>(std::min(ranks, 1e9)), where);
  s.job = read_job(optional_section("job"), s.cluster, where);
  // training.tokens as optimizer steps of global_batch x seq_len tokens.
  if (s.training.tokens > 0.0) {
    const Location at = where.at("training.tokens");
    if (s.model.kind != ModelKind::transformer) {
      throw ScenarioError(at, "training.tokens",
                          "a model of generic layers has no tokens: give the run's length as training.steps");
    }
    const double per_step = static_cast<double>(s.training.global_batch) * s.model.seq_len;
    const double steps = std::ceil(s.training.tokens / per_step);
    if (steps > limits::run_steps) {
      throw ScenarioError(at, "training.tokens", fmt::format("{:.3g} tokens are {:.3g} steps of {} tokens: past the limit of {} steps",
                                   s.training.tokens, steps, per_step, limits::run_steps));
    }
    s.training.total_steps = static_cast<int>(steps);
  }
  check(s);
  return s;
}

}  // namespace

Value load_document(const std::string& path, std::span<const std::string> overrides) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec)) throw ScenarioError(Location{path, 0, 0}, "", "cannot open the scenario (no such file)");
  if (!fs::is_regular_file(p, ec)) {
    throw ScenarioError(Location{path, 0, 0}, "", "expected a scenario file, got a directory, device, FIFO or socket");
  }
  return finish_document(parse_yaml_file(path), p.parent_path(), fs::weakly_canonical(p, ec), overrides);
}

Scenario load(const std::string& path, std::span<const std::string> overrides) {
  return from_document(load_document(path, overrides), path);
}

std::string scenario_yaml(const std::string& path, std::span<const std::string> overrides, const std::string& dest_dir) {
  Value doc = load_document(path, overrides);
  Entry* hardware = doc.find("hardware");
  Entry* profile = hardware != nullptr && hardware->value.is_map() ? hardware->value.find("profile") : nullptr;
  if (profile != nullptr && profile->value.is_scalar()) {
    const Location& at = profile->value.loc;
    fs::path p(profile->value.scalar);
    if (p.is_relative() && !at.file.starts_with("--set") && !at.file.starts_with("preset ")) {
      p = fs::path(at.file).parent_path() / p;
    }
    std::error_code ec;
    const fs::path rel = fs::relative(fs::absolute(p, ec), fs::absolute(dest_dir, ec), ec);
    if (!ec && !rel.empty()) profile->value.scalar = rel.generic_string();
  }
  return to_yaml(doc);
}

Scenario load_text(std::string_view text, const std::string& name, std::span<const std::string> overrides,
                   const std::string& base_dir) {
  return from_document(finish_document(parse_yaml(text, name), base_dir, fs::path(base_dir) / name, overrides), name);
}

}  // namespace parasim::scenario
