// parasim presets: the built-in device, cluster and model presets.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "scenario/load.hpp"
#include "scenario/presets.hpp"
#include "report/table.hpp"
#include "topology/units.hpp"

namespace parasim::cli {
namespace {

// One line describing a preset, from the preset itself.
std::string summary(const scenario::PresetFile& p) {
  scenario::LocationMap where;
  const scenario::Value v = scenario::parse_yaml(p.text, std::string(p.path));
  if (p.kind == "device") {
    const auto d =
        scenario::read_device(scenario::resolve_preset(v, scenario::PresetKind::device, "device"), "device", where);
    return fmt::format("{}, {} bf16, {} at {}", d.name, units::format_flop_rate(d.peak(topology::Dtype::bf16)),
                       units::format_bytes(d.memory_bytes), units::format_bandwidth(d.memory_bandwidth));
  }
  if (p.kind == "cluster") {
    const auto c = scenario::read_cluster(scenario::resolve_preset(v, scenario::PresetKind::cluster, "cluster"), where);
    return fmt::format("{} x {}, {} {} per device, {} x {} NICs", c.gpus_per_node, c.device.name,
                       topology::to_string(c.intra.fabric), units::format_bandwidth(c.intra.bandwidth),
                       c.inter.nics_per_node, units::format_bandwidth(c.inter.nic_bandwidth));
  }
  const auto m = scenario::read_model(scenario::resolve_preset(v, scenario::PresetKind::model, "model"), where);
  return fmt::format("{} {}, {} parameters, {} layers", to_string(m.kind), m.name,
                     units::format_count(m.parameter_count()), m.layer_count());
}

}  // namespace

void add_presets(CLI::App& app) {
  auto json = std::make_shared<JsonOption>();
  CLI::App* cmd = app.add_subcommand("presets", "List the built-in device, cluster and model presets");
  json->add_to(*cmd, "The presets");
  cmd->callback([json] {
    report::Table t({"kind", "name", "summary", "file"});
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const scenario::PresetFile& p : scenario::all_presets()) {
      const std::string s = summary(p);
      t.add_row({std::string(p.kind), std::string(p.name), s, std::string(p.path)});
      j.push_back({{"kind", p.kind}, {"name", p.name}, {"summary", s}, {"file", p.path}});
    }
    if (json->wanted()) write_output(json->path, stamped("presets", {{"presets", j}}).dump(2) + "\n");
    if (!json->on_stdout()) std::cout << t.render();
  });
}

}  // namespace parasim::cli
