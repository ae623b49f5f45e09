// The cluster section's readers: presets resolved, the device (its kernel model and host
// costs), the links inside and between nodes; cluster.degraded and cluster.jitter are in
// load_degraded.cpp. docs/scenario-format.md documents every key read here.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "topology/units.hpp"

namespace parasim::scenario {

using topology::ClusterSpec;
using topology::DeviceSpec;
using topology::IntraFabric;
using topology::NetworkShape;

namespace {

// Whether a key was written by the user rather than inherited from a preset; options that
// do not apply to a refined preset's new shape are ignored when they came from the preset.
bool user_set(const Reader& r, std::string_view key) {
  return r.has(key) && !r.location_of(key).file.starts_with("preset ");
}

}  // namespace

Value resolve_preset(const Value& section, PresetKind kind, const std::string& path) {
  const Value* name = nullptr;
  if (section.is_scalar()) {
    name = &section;
  } else if (section.is_map()) {
    if (const Entry* e = section.find("preset")) name = &e->value;
  } else {
    throw ScenarioError(section.loc, path,
                        fmt::format("expected a {} preset name or a section of keys, got {}", to_string(kind),
                                    section.kind_name()));
  }
  if (name == nullptr) return section;
  if (!name->is_scalar()) throw ScenarioError(name->loc, path + ".preset", "expected a preset name");

  const PresetFile* preset = find_preset(kind, name->scalar);
  if (preset == nullptr) {
    const std::vector<std::string> known = preset_names(kind);
    const std::string near = nearest(name->scalar, known);
    throw ScenarioError(name->loc, path,
                        fmt::format("unknown {} preset '{}'{}; known presets: {}", to_string(kind), name->scalar,
                                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                    fmt::join(known, ", ")));
  }
  Value base = parse_yaml(preset->text, fmt::format("preset {} ({})", preset->name, preset->path));
  base = resolve_preset(base, kind, path);  // a preset may refine another
  if (!base.find("name")) {
    base.entries.push_back(Entry{"name", name->loc, Value{Value::Kind::scalar, std::string(preset->name), {}, {}, name->loc}});
  }
  if (section.is_map()) {
    Value refinements = section;
    std::erase_if(refinements.entries, [](const Entry& e) { return e.key == "preset"; });
    merge_into(base, refinements);
  }
  base.loc = section.loc;
  return base;
}

topology::KernelSpec read_kernels(const Value& v, const std::string& path, LocationMap& where) {
  Reader kr(v, path, {"sms", "gemm_efficiency", "l2_bandwidth", "memory_efficiency", "launch", "flash_attention",
                               "flash_attention_v1", "flash_attention_v2", "collective_sms"},
            &where);
  topology::KernelSpec ks;
  ks.sms = kr.integer("sms", std::nullopt, 1, 100000);
  ks.gemm_efficiency = kr.number("gemm_efficiency", std::nullopt, 0.01, 1.0);
  ks.l2_bandwidth = kr.bandwidth("l2_bandwidth", std::nullopt);
  ks.memory_efficiency = kr.number("memory_efficiency", std::nullopt, 0.01, 1.0);
  ks.launch = kr.duration("launch", 0.0);
  if (const Value* fa = kr.get("flash_attention")) {
    Reader fr(*fa, kr.key_path("flash_attention"), {"forward", "backward"}, &where);
    ks.flash_forward = fr.number("forward", std::nullopt, 0.01, 1.0);
    ks.flash_backward = fr.number("backward", std::nullopt, 0.01, 1.0);
  } else {
    ks.flash_forward = ks.gemm_efficiency * 0.75;
    ks.flash_backward = ks.gemm_efficiency * 0.6;
  }
  // FlashAttention-2: the device's fused kernel unless the device gives its own (on Hopper
  // cuDNN's and Transformer Engine's kernels run about twice its rate).
  if (const Value* fa = kr.get("flash_attention_v2")) {
    Reader fr(*fa, kr.key_path("flash_attention_v2"), {"forward", "backward"}, &where);
    ks.flash_v2_forward = fr.number("forward", std::nullopt, 0.01, 1.0);
    ks.flash_v2_backward = fr.number("backward", std::nullopt, 0.01, 1.0);
  } else {
    ks.flash_v2_forward = ks.flash_forward;
    ks.flash_v2_backward = ks.flash_backward;
  }
  // FlashAttention-1: its forward reaches 30-50 % of an A100's peak and its backward 25-35 %
  // where FlashAttention-2's reach 50-73 % and about 40-55 % (Dao 2023, "FlashAttention-2",
  // section 1 and figures 5-6): two thirds of the second generation's rates, unless the
  // device gives its own.
  if (const Value* fa = kr.get("flash_attention_v1")) {
    Reader fr(*fa, kr.key_path("flash_attention_v1"), {"forward", "backward"}, &where);
    ks.flash_v1_forward = fr.number("forward", std::nullopt, 0.01, 1.0);
    ks.flash_v1_backward = fr.number("backward", std::nullopt, 0.01, 1.0);
  } else {
    ks.flash_v1_forward = ks.flash_forward * 2.0 / 3.0;
    ks.flash_v1_backward = ks.flash_backward * 2.0 / 3.0;
  }
  ks.collective_sms = kr.integer("collective_sms", 0, 0, 100000);
  if (ks.collective_sms >= ks.sms) {
    kr.fail("collective_sms", fmt::format("expected fewer SMs than the device's {} (kernels.sms)", ks.sms));
  }
  return ks;
}

topology::HostSpec read_host(const Value& v, const std::string& path, LocationMap& where) {
  Reader hr(v, path, {"forward", "backward", "communication"}, &where);
  topology::HostSpec h;
  h.forward = hr.duration("forward", 0.0);
  h.backward = hr.duration("backward", 0.0);
  h.communication = hr.duration("communication", 0.0);
  return h;
}

DeviceSpec read_device(const Value& v, const std::string& path, LocationMap& where) {
  Reader r(v, path,
           {"preset", "name", "peak", "memory", "memory_bandwidth", "workspace", "headroom", "kernels", "host", "tdp",
            "power_limit"},
           &where);
  DeviceSpec d;
  d.name = r.string("name", std::string("custom"));
  const Value* peak = r.get("peak");
  if (peak == nullptr) r.fail("peak", "missing required key 'peak' (FLOP/s per data type, e.g. bf16: 989 TFLOPS)");
  Reader p(*peak, r.key_path("peak"), {"fp32", "tf32", "bf16", "fp16", "fp8"}, &where);
  bool any = false;
  for (topology::Dtype t : topology::all_dtypes) {
    const double rate = p.flop_rate(topology::to_string(t), 0.0);
    d.peak_flops[static_cast<std::size_t>(t)] = rate;
    any = any || rate > 0.0;
  }
  if (!any) r.fail("peak", "give the peak FLOP rate of at least one data type (fp32, tf32, bf16, fp16 or fp8)");
  d.memory_bytes = r.bytes("memory", std::nullopt);
  d.memory_bandwidth = r.bandwidth("memory_bandwidth", std::nullopt);
  d.workspace_bytes = r.bytes("workspace", 1024.0 * 1024 * 1024, true);
  if (d.workspace_bytes >= d.memory_bytes) r.fail("workspace", "the runtime workspace must be smaller than the memory");
  d.headroom = r.fraction("headroom", 0.05, 0.5);
  if (const Value* k = r.get("kernels")) d.kernels = read_kernels(*k, r.key_path("kernels"), where);
  if (const Value* h = r.get("host")) d.host = read_host(*h, r.key_path("host"), where);
  d.tdp = r.power("tdp", 0.0);
  d.power_limit = r.power("power_limit", d.tdp);
  if (r.get("power_limit") != nullptr && d.tdp <= 0.0) {
    r.fail("power_limit", "a power limit needs the board's own (tdp, e.g. 700W) to know what the cap takes");
  }
  return d;
}

ClusterSpec read_cluster(const Value& v, LocationMap& where) {
  Reader r(v, "cluster", {"preset", "name", "nodes", "gpus_per_node", "device", "intra_node", "inter_node", "wan", "host",
            "collectives", "degraded", "jitter"},
           &where);
  ClusterSpec c;
  c.name = r.string("name", std::string("custom"));
  // Bounds keep the graph buildable: 65,536 nodes x 1,024 devices is far past any cluster.
  c.nodes = r.integer("nodes", 1, 1, 65536);
  c.gpus_per_node = r.integer("gpus_per_node", std::nullopt, 1, 1024);
  const Value* dev = r.get("device");
  if (dev == nullptr) r.fail("device", "missing required key 'device' (a preset such as h100-sxm, or a section)");
  c.device = read_device(resolve_preset(*dev, PresetKind::device, "cluster.device"), "cluster.device", where);

  const Value* intra = r.get("intra_node");
  if (intra == nullptr) r.fail("intra_node", "missing required section 'intra_node' (fabric, bandwidth, latency)");
  Reader in(*intra, "cluster.intra_node", {"fabric", "bandwidth", "latency", "gpus_per_switch", "efficiency", "nvls"}, &where);
  c.intra.fabric = in.choice<IntraFabric>("fabric", std::nullopt,
                                          {{"nvswitch", IntraFabric::nvswitch},
                                           {"nvlink-mesh", IntraFabric::nvlink_mesh},
                                           {"pcie", IntraFabric::pcie},
                                           {"shared-memory", IntraFabric::shared_memory}});
  c.intra.bandwidth = in.bandwidth("bandwidth", std::nullopt);
  c.intra.latency = in.duration("latency", 1e-6);
  c.intra.gpus_per_switch = in.integer("gpus_per_switch", 2, 1, 1024);
  if (user_set(in, "gpus_per_switch") && c.intra.fabric != IntraFabric::pcie) {
    in.fail("gpus_per_switch", "applies only to the pcie fabric");
  }
  c.intra.efficiency = in.number("efficiency", 1.0, 0.01, 1.0);
  c.intra.nvls = in.number("nvls", 0.0, 0.0, 1.0);
  if (c.intra.nvls > 0.0 && c.intra.fabric != IntraFabric::nvswitch) {
    in.fail("nvls", "in-switch reductions need the nvswitch fabric");
  }

  const Value* inter = r.get("inter_node");
  if (inter != nullptr) {
    Reader net(*inter, "cluster.inter_node",
               {"nics_per_node", "nic_bandwidth", "latency", "shape", "oversubscription", "leaf_downlinks",
                "attach_bandwidth", "efficiency", "routing"},
               &where);
    c.inter.nics_per_node = net.integer("nics_per_node", 1, 1, 1024);
    c.inter.nic_bandwidth = net.bandwidth("nic_bandwidth", std::nullopt);
    c.inter.latency = net.duration("latency", 5e-6);
    c.inter.shape = net.choice<NetworkShape>("shape", NetworkShape::single_switch,
                                             {{"single-switch", NetworkShape::single_switch},
                                              {"fat-tree", NetworkShape::fat_tree},
                                              {"rail-optimized", NetworkShape::rail_optimized}});
    // "2:1" reads as 2.
    if (const Value* o = net.get("oversubscription"); o != nullptr && o->is_scalar() && o->scalar.ends_with(":1")) {
      Value plain = *o;
      plain.scalar.resize(plain.scalar.size() - 2);
      Value tmp;
      tmp.kind = Value::Kind::map;
      tmp.entries.push_back(Entry{"oversubscription", o->loc, plain});
      c.inter.oversubscription = Reader(tmp, "cluster.inter_node", {"oversubscription"}, nullptr)
                                     .number("oversubscription", std::nullopt, 1.0, 1024.0);
    } else {
      c.inter.oversubscription = net.number("oversubscription", 1.0, 1.0, 1024.0);
    }
    c.inter.leaf_downlinks = net.integer("leaf_downlinks", 32, 1, 4096);
    c.inter.attach_bandwidth = net.bandwidth("attach_bandwidth", 64e9);
    c.inter.efficiency = net.number("efficiency", 1.0, 0.01, 1.0);
    c.inter.routing = net.choice<topology::Routing>(
        "routing", topology::Routing::ecmp, {{"ecmp", topology::Routing::ecmp}, {"destination", topology::Routing::destination}});
    if (c.inter.shape == NetworkShape::single_switch) {
      for (const char* key : {"oversubscription", "leaf_downlinks", "routing"}) {
        if (user_set(net, key)) net.fail(key, "applies only to the fat-tree and rail-optimized shapes (shape is single-switch)");
      }
    }
  } else if (c.nodes > 1) {
    r.fail("inter_node", fmt::format("a cluster of {} nodes needs an 'inter_node' section (nics_per_node, nic_bandwidth, "
                                     "latency, shape)", c.nodes));
  }

  if (const Value* host = r.get("host"); host != nullptr && host->kind != Value::Kind::null) {
    Reader h(*host, "cluster.host", {"memory", "memory_bandwidth", "link_bandwidth", "devices_per_link", "latency"}, &where);
    c.host.memory = h.bytes("memory", std::nullopt);
    c.host.memory_bandwidth = h.bandwidth("memory_bandwidth", std::nullopt);
    const bool own_links = c.intra.fabric == IntraFabric::nvswitch || c.intra.fabric == IntraFabric::nvlink_mesh;
    if (own_links) {
      c.host.link_bandwidth = h.bandwidth("link_bandwidth", 0.0);  // 0: the links are not described
      c.host.devices_per_link = h.integer("devices_per_link", 1, 1, 1024);
      c.host.latency = h.duration("latency", 2e-6);
    } else {
      for (const char* key : {"link_bandwidth", "devices_per_link", "latency"}) {
        if (user_set(h, key)) {
          h.fail(key, fmt::format("applies only to the nvswitch and nvlink-mesh fabrics (under {} the devices reach the "
                                  "host through the fabric itself)", topology::to_string(c.intra.fabric)));
        }
      }
    }
  }

  // NCCL drives GPUs; CPU ranks on shared memory talk MPI.
  c.library = r.choice<topology::CollectiveLibrary>(
      "collectives", c.intra.fabric == IntraFabric::shared_memory ? topology::CollectiveLibrary::mpi : topology::CollectiveLibrary::nccl,
      {{"nccl", topology::CollectiveLibrary::nccl}, {"mpi", topology::CollectiveLibrary::mpi}});
  if (const Value* wan = r.get("wan"); wan != nullptr && wan->kind != Value::Kind::null) {
    Reader w(*wan, "cluster.wan", {"first_group_nodes", "bandwidth", "latency"}, &where);
    topology::WanSpec spec;
    spec.first_group_nodes = w.integer("first_group_nodes", std::max(1, c.nodes / 2));
    spec.bandwidth = w.bandwidth("bandwidth", std::nullopt);
    spec.latency = w.duration("latency", std::nullopt);
    if (c.nodes < 2) w.fail("first_group_nodes", "a WAN joins two groups of nodes: the cluster needs at least 2 nodes");
    if (spec.first_group_nodes >= c.nodes) {
      w.fail("first_group_nodes", fmt::format("expected from 1 to {} (the second group needs a node), got {}",
                                              c.nodes - 1, spec.first_group_nodes));
    }
    if (inter == nullptr) w.fail("bandwidth", "a WAN needs the cluster's 'inter_node' network inside each group");
    c.wan = spec;
  }
  read_heterogeneity(r, c, where);
  return c;
}

}  // namespace parasim::scenario
