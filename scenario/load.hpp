// Loading a scenario: read the YAML file, follow `extends:` (paths relative to the file
// that names them; cycles are errors), apply `--set key=value` overrides, resolve presets
// (a scalar such as `cluster: dgx-h100`, or `preset:` inside a section whose other keys
// refine it), read each section with its defaults, then check the whole (check.hpp).
// Any problem throws ScenarioError naming file, line, column and key.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "scenario/presets.hpp"
#include "scenario/scenario.hpp"
#include "scenario/value.hpp"

namespace parasim::scenario {

Scenario load(const std::string& path, std::span<const std::string> overrides = {});
// `name` stands in for a file name in errors; `extends:` resolves against `base_dir`.
Scenario load_text(std::string_view text, const std::string& name, std::span<const std::string> overrides = {},
                   const std::string& base_dir = ".");

// The raw merged document (extends and overrides applied), before presets and defaults.
Value load_document(const std::string& path, std::span<const std::string> overrides = {});

// The scenario at `path` with its overrides as one self-contained YAML document (extends
// merged in, overrides applied), to be saved in folder `dest_dir`: a relative
// hardware.profile is rewritten relative to dest_dir. Loading the text from there gives
// the same scenario as load(path, overrides).
std::string scenario_yaml(const std::string& path, std::span<const std::string> overrides, const std::string& dest_dir);

// Sections (load_sections.cpp), each given the section's value after preset resolution.
Value resolve_preset(const Value& section, PresetKind kind, const std::string& path);
topology::ClusterSpec read_cluster(const Value& v, LocationMap& where);
// cluster.degraded and cluster.jitter of the cluster section `r` reads, into `c` (whose
// other keys are read): link names checked against the graph.
void read_heterogeneity(const Reader& r, topology::ClusterSpec& c, LocationMap& where);
topology::DeviceSpec read_device(const Value& v, const std::string& path, LocationMap& where);
// A device's `kernels` and `host` sections (also in a measured profile).
topology::KernelSpec read_kernels(const Value& v, const std::string& path, LocationMap& where);
topology::HostSpec read_host(const Value& v, const std::string& path, LocationMap& where);
ModelSpec read_model(const Value& v, LocationMap& where);
// `gpu`: the cluster's device has a kernel model (FlashAttention is then the default).
TrainingSpec read_training(const Value& v, bool gpu, LocationMap& where);
// `framework` sets the defaults the plan leaves to it (training.framework).
ParallelPlan read_plan(const Value& v, int cluster_gpus, Framework framework, LocationMap& where);
HardwareSpec read_hardware(const Value& v, LocationMap& where);
RunSpec read_run(const Value& v, const topology::DeviceSpec& device, int world, LocationMap& where);
JobSpec read_job(const Value& v, const topology::ClusterSpec& cluster, LocationMap& where);

}  // namespace parasim::scenario
