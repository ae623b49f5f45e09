// Built-in presets: devices, clusters and models. Their source of truth is the YAML under
// scenarios/hardware/{devices,clusters}/ and scenarios/models/; the build embeds those
// files in the binary, so presets work from any directory and errors inside them still
// name the file and line.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parasim::scenario {

enum class PresetKind { device, cluster, model };

struct PresetFile {
  std::string_view kind;  // "device", "cluster", "model"
  std::string_view name;  // file stem, as scenarios refer to it
  std::string_view path;  // relative to the repository
  std::string_view text;  // YAML
};

std::string_view to_string(PresetKind k);
std::span<const PresetFile> all_presets();
const PresetFile* find_preset(PresetKind kind, std::string_view name);
std::vector<std::string> preset_names(PresetKind kind);

}  // namespace parasim::scenario
