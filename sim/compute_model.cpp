#include "sim/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "scenario/reader.hpp"

namespace parasim::sim {

namespace {

// y at x on a curve of (x, y) points, x ascending: linear in log(x) between points, the
// end values beyond them.
double log_interpolate(const std::vector<std::pair<double, double>>& curve, double x) {
  if (x <= curve.front().first) return curve.front().second;
  if (x >= curve.back().first) return curve.back().second;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    const auto [x1, y1] = curve[i];
    if (x > x1) continue;
    const auto [x0, y0] = curve[i - 1];
    const double w = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
    return y0 + w * (y1 - y0);
  }
  return curve.back().second;
}

}  // namespace

double DeviceProfile::efficiency(double size) const {
  return gemm_efficiency.empty() ? 1.0 : log_interpolate(gemm_efficiency, size);
}

namespace {

// The kernel model's figures of `ks` on `device`: streaming kernels at the device's achieved
// share of its bandwidth, a launch cost per kernel.
void use_kernel_model(DeviceProfile& p, const topology::KernelSpec& ks, const topology::DeviceSpec& device) {
  p.kernels = ks;
  p.kernels.l2_bandwidth *= device.clock_factor();  // the L2 runs on the SMs' clock
  p.memory_bandwidth = device.memory_bandwidth * ks.memory_efficiency;
  p.launch_overhead = ks.launch;
}

}  // namespace

DeviceProfile default_profile(const topology::DeviceSpec& device) {
  DeviceProfile p;
  p.name = device.name + " (datasheet)";
  p.device = device.name;
  // A power cap lowers the clock compute runs at (DeviceSpec::clock_factor).
  p.peak = device.peak_flops;
  for (double& rate : p.peak) rate *= device.clock_factor();
  p.kernels = device.kernels;
  p.host = device.host;
  const bool cpu = device.name == "cpu-core";
  if (device.kernels.present()) {
    use_kernel_model(p, device.kernels, device);  // GEMMs by tiles and waves: no efficiency curve
  } else if (cpu) {
    // One core with a tuned BLAS: good efficiency from modest sizes, no launch cost to
    // speak of, STREAM-like bandwidth.
    p.gemm_efficiency = {{16, 0.10}, {64, 0.45}, {128, 0.65}, {256, 0.78}, {512, 0.85}, {1024, 0.88}};
    p.memory_bandwidth = device.memory_bandwidth * 0.8;
    p.launch_overhead = 0.2e-6;
  } else {
    // Tensor-core GEMMs: small shapes cannot fill the device; large ones reach ~80 %.
    p.gemm_efficiency = {{64, 0.02}, {256, 0.15}, {512, 0.35}, {1024, 0.55}, {2048, 0.68}, {4096, 0.76}, {8192, 0.80}};
    p.memory_bandwidth = device.memory_bandwidth * 0.85;
    p.launch_overhead = 4e-6;
  }
  return p;
}

namespace {

LinkFigures read_link(const scenario::Value& v, const std::string& path, scenario::LocationMap& where) {
  scenario::Reader r(v, path, {"bandwidth", "latency"}, &where);
  LinkFigures f;
  f.bandwidth = r.bandwidth("bandwidth", std::nullopt);
  if (f.bandwidth <= 0.0) r.fail("bandwidth", "expected a positive bandwidth");
  f.latency = r.duration("latency", std::nullopt);
  return f;
}

}  // namespace

double DeviceProfile::collective_slowdown(program::CollectiveOp op, int group, double bytes, bool across) const {
  const std::optional<LinkFigures>& link = across ? inter_node : intra_node;
  const double busbw = curve_busbw(op, group, bytes, across);
  return busbw > 0.0 ? link->bandwidth / busbw : 1.0;
}

double DeviceProfile::curve_busbw(program::CollectiveOp op, int group, double bytes, bool across) const {
  if (!(across ? inter_node : intra_node) || bytes <= 0.0) return 0.0;
  const CollectiveCurve* below = nullptr;     // the largest measured group not above `group`
  const CollectiveCurve* smallest = nullptr;
  for (const CollectiveCurve& c : across ? inter_node_collectives : collectives) {
    if (c.op != op || c.busbw.empty()) continue;
    if (c.group <= group && (below == nullptr || c.group > below->group)) below = &c;
    if (smallest == nullptr || c.group < smallest->group) smallest = &c;
  }
  const CollectiveCurve* best = below != nullptr ? below : smallest;
  return best == nullptr ? 0.0 : log_interpolate(best->busbw, bytes);
}

DeviceProfile load_profile(const std::string& path, const topology::DeviceSpec& device) {
  DeviceProfile p = default_profile(device);
  const scenario::Value doc = scenario::parse_yaml_file(path);
  // Say no more about a file that is not a profile than that it is not one: its first line
  // may be something the user must not see (hardware.profile: /etc/shadow). A profile is a
  // map naming its device, as `parasim calibrate` writes it; an empty file is none.
  if (!doc.is_map() || doc.find("device") == nullptr) {
    throw scenario::ScenarioError(
        scenario::Location{path, doc.loc.line, doc.loc.column}, "",
        fmt::format("'{}' is not a device profile: `parasim calibrate --out FILE` writes one, a map of figures "
                    "with the device they were measured on (device: NAME)",
                    path));
  }
  scenario::LocationMap where;
  // backend, ranks and measurements record how the profile was made; the simulator reads
  // only the figures.
  scenario::Reader r(
      doc, "",
      {"device", "backend", "ranks", "gemm_efficiency", "memory_bandwidth", "optimizer_bandwidth", "launch_overhead",
       "peak", "links", "collectives", "inter_node_collectives", "network_cpu", "measurements", "kernels", "host"},
      &where);
  p.device = r.string("device", device.name);
  if (p.device != device.name) {
    r.fail("device", fmt::format("the profile was measured for device '{}', but the scenario's cluster has '{}'",
                                 p.device, device.name));
  }
  p.name = p.device + " (measured)";
  // The kernel model's constants and the host's costs, when the profile records them
  // (otherwise the device preset's stand).
  if (const scenario::Value* k = r.get("kernels"))
    use_kernel_model(p, scenario::read_kernels(*k, "kernels", where), device);
  if (const scenario::Value* h = r.get("host")) p.host = scenario::read_host(*h, "host", where);
  p.memory_bandwidth = r.bandwidth("memory_bandwidth", p.memory_bandwidth);
  if (p.memory_bandwidth <= 0.0) r.fail("memory_bandwidth", "expected a positive bandwidth");
  p.optimizer_bandwidth = r.bandwidth("optimizer_bandwidth", 0.0);
  p.launch_overhead = r.duration("launch_overhead", p.launch_overhead);
  if (const scenario::Value* peak = r.get("peak")) {
    scenario::Reader pr(*peak, "peak", {"fp32", "tf32", "bf16", "fp16", "fp8"}, &where);
    for (topology::Dtype d : topology::all_dtypes) {
      const auto i = static_cast<std::size_t>(d);
      const double rate = pr.flop_rate(topology::to_string(d), p.peak[i]);
      // 0 means "not supported" in a device's datasheet; a measurement of a type the device
      // computes cannot be 0 (the simulator would divide by it).
      if (rate <= 0.0 && p.peak[i] > 0.0) {
        pr.fail(topology::to_string(d), fmt::format("a measured peak must be positive: {} computes {}", device.name,
                                                    topology::to_string(d)));
      }
      p.peak[i] = rate;
    }
  }
  if (const scenario::Value* eff = r.get("gemm_efficiency")) {
    if (eff->kind != scenario::Value::Kind::sequence || eff->items.empty()) {
      r.fail("gemm_efficiency", "expected a list of [size, efficiency] pairs, sizes ascending");
    }
    p.gemm_efficiency.clear();
    for (const scenario::Value& item : eff->items) {
      if (item.kind != scenario::Value::Kind::sequence || item.items.size() != 2 || !item.items[0].is_scalar() ||
          !item.items[1].is_scalar()) {
        throw scenario::ScenarioError(item.loc, "gemm_efficiency", "expected a pair [size, efficiency]");
      }
      const double size = std::atof(item.items[0].scalar.c_str());
      const double e = std::atof(item.items[1].scalar.c_str());
      if (size <= 0 || e <= 0 || e > 1 || (!p.gemm_efficiency.empty() && size <= p.gemm_efficiency.back().first)) {
        throw scenario::ScenarioError(item.loc, "gemm_efficiency",
                                      "expected a positive size above the previous one and an efficiency in (0, 1]");
      }
      p.gemm_efficiency.emplace_back(size, e);
    }
  }
  if (const scenario::Value* links = r.get("links")) {
    scenario::Reader lr(*links, "links", {"intra_node", "inter_node"}, &where);
    if (const scenario::Value* v = lr.get("intra_node")) p.intra_node = read_link(*v, "links.intra_node", where);
    if (const scenario::Value* v = lr.get("inter_node")) p.inter_node = read_link(*v, "links.inter_node", where);
  }
  if (const scenario::Value* v = r.get("network_cpu")) {
    scenario::Reader nr(*v, "network_cpu", {"send", "receive"}, &where);
    p.send_cpu_per_byte = nr.duration("send", 0.0);
    p.receive_cpu_per_byte = nr.duration("receive", 0.0);
    if (p.send_cpu_per_byte < 0.0 || p.receive_cpu_per_byte < 0.0 || p.send_cpu_per_byte > 1e-6 ||
        p.receive_cpu_per_byte > 1e-6) {
      r.fail("network_cpu", "expected the CPU time per byte sent and received, each from 0 to 1 us");
    }
  }
  for (const char* section : {"collectives", "inter_node_collectives"}) {
    const scenario::Value* coll = r.get(section);
    if (coll == nullptr) continue;
    std::vector<CollectiveCurve>& curves = std::string_view(section) == "collectives" ? p.collectives : p.inter_node_collectives;
    scenario::Reader cr(*coll, section, {"all-reduce", "reduce-scatter", "all-gather"}, &where);
    for (program::CollectiveOp op : {program::CollectiveOp::all_reduce, program::CollectiveOp::reduce_scatter,
                                     program::CollectiveOp::all_gather}) {
      const std::string name(to_string(op));
      const scenario::Value* list = cr.get(name);
      if (list == nullptr) continue;
      const std::string key = std::string(section) + "." + name;
      if (list->kind != scenario::Value::Kind::sequence || list->items.empty()) {
        cr.fail(name, "expected a list of [group, bytes, busbw GB/s] triples");
      }
      for (const scenario::Value& item : list->items) {
        const bool triple =
            item.kind == scenario::Value::Kind::sequence && item.items.size() == 3 &&
            std::all_of(item.items.begin(), item.items.end(), [](const scenario::Value& v) { return v.is_scalar(); });
        if (!triple) throw scenario::ScenarioError(item.loc, key, "expected a triple [group, bytes, busbw GB/s]");
        const int group = std::atoi(item.items[0].scalar.c_str());
        const double bytes = std::atof(item.items[1].scalar.c_str());
        const double busbw = std::atof(item.items[2].scalar.c_str()) * 1e9;
        if (group < 2 || bytes <= 0.0 || busbw <= 0.0) {
          throw scenario::ScenarioError(item.loc, key,
                                        "expected a group of 2 or more ranks, positive bytes and a positive busbw");
        }
        auto it = std::find_if(curves.begin(), curves.end(),
                               [&](const CollectiveCurve& c) { return c.op == op && c.group == group; });
        if (it == curves.end()) {
          curves.push_back({op, group, {}});
          it = curves.end() - 1;
        }
        if (!it->busbw.empty() && bytes <= it->busbw.back().first) {
          throw scenario::ScenarioError(item.loc, key, "expected sizes ascending within a group");
        }
        it->busbw.emplace_back(bytes, busbw);
      }
    }
  }
  return p;
}

namespace {

// Which of a profile's curves a collective over `devices` runs at: 0 none, 1 those inside a
// node (every device on one), 2 those between nodes (each device on a node of its own).
int curves_for(const DeviceProfile& p, const topology::Cluster& cluster, const std::vector<int>& devices) {
  if (devices.size() < 2 || (p.collectives.empty() && p.inter_node_collectives.empty())) return 0;
  const int first = cluster.node_of(devices.front());
  if (std::all_of(devices.begin(), devices.end(), [&](int d) { return cluster.node_of(d) == first; })) {
    return p.collectives.empty() ? 0 : 1;
  }
  if (p.inter_node_collectives.empty()) return 0;
  std::vector<int> nodes;
  for (int d : devices) nodes.push_back(cluster.node_of(d));
  std::sort(nodes.begin(), nodes.end());
  return std::adjacent_find(nodes.begin(), nodes.end()) == nodes.end() ? 2 : 0;
}

}  // namespace

double measured_slowdown(const DeviceProfile& p, const topology::Cluster& cluster, program::CollectiveOp op,
                         const std::vector<int>& devices, double bytes) {
  const int curves = curves_for(p, cluster, devices);
  return curves == 0 ? 1.0 : p.collective_slowdown(op, static_cast<int>(devices.size()), bytes, curves == 2);
}

double measured_busbw(const DeviceProfile& p, const topology::Cluster& cluster, program::CollectiveOp op,
                      const std::vector<int>& devices, double bytes) {
  const int curves = curves_for(p, cluster, devices);
  return curves == 0 ? 0.0 : p.curve_busbw(op, static_cast<int>(devices.size()), bytes, curves == 2);
}

std::string profile_yaml(const DeviceProfile& p) {
  std::string y = fmt::format("device: {}\npeak:\n", p.device);
  for (topology::Dtype d : topology::all_dtypes) {
    y += fmt::format("  {}: {:.4g} GFLOPS\n", topology::to_string(d), p.peak[static_cast<std::size_t>(d)] * 1e-9);
  }
  if (!p.gemm_efficiency.empty()) {  // empty: the kernel model's tiles and waves time the GEMMs
    y += "# GEMM efficiency against size = cbrt(m n k), a fraction of the peak\ngemm_efficiency:\n";
    for (const auto& [size, e] : p.gemm_efficiency) y += fmt::format("  - [{:.4g}, {:.4g}]\n", size, e);
  }
  y += fmt::format("memory_bandwidth: {:.4g} GB/s\n", p.memory_bandwidth * 1e-9);
  if (p.optimizer_bandwidth > 0.0) {
    y += fmt::format("# AdamW, counting 32 bytes per parameter as the Program does in fp32\n"
                     "optimizer_bandwidth: {:.4g} GB/s\n",
                     p.optimizer_bandwidth * 1e-9);
  }
  y += fmt::format("launch_overhead: {:.4g} us\n", p.launch_overhead * 1e6);
  if (p.host.forward > 0.0 || p.host.backward > 0.0 || p.host.communication > 0.0) {
    y += fmt::format("# host time to issue a kernel (forward, backward) and a communication call\n"
                     "host: {{forward: {:.4g} us, backward: {:.4g} us, communication: {:.4g} us}}\n",
                     p.host.forward * 1e6, p.host.backward * 1e6, p.host.communication * 1e6);
  }
  if (p.intra_node || p.inter_node) {
    y += "links:\n";
    auto link = [&](const char* name, const LinkFigures& f) {
      y += fmt::format("  {}: {{bandwidth: {:.4g} GB/s, latency: {:.4g} us}}\n", name, f.bandwidth * 1e-9,
                       f.latency * 1e6);
    };
    if (p.intra_node) link("intra_node", *p.intra_node);
    if (p.inter_node) link("inter_node", *p.inter_node);
  }
  if (p.send_cpu_per_byte > 0.0 || p.receive_cpu_per_byte > 0.0) {
    y += fmt::format("# The CPU time a rank's cores spend per byte it sends and receives between nodes\n"
                     "network_cpu: {{send: {:.4g} ns, receive: {:.4g} ns}}\n",
                     p.send_cpu_per_byte * 1e9, p.receive_cpu_per_byte * 1e9);
  }
  auto curves = [&](const std::vector<CollectiveCurve>& list) {
    for (program::CollectiveOp op : {program::CollectiveOp::all_reduce, program::CollectiveOp::reduce_scatter,
                                     program::CollectiveOp::all_gather}) {
      bool first = true;
      for (const CollectiveCurve& c : list) {
        if (c.op != op) continue;
        if (first) y += fmt::format("  {}:\n", to_string(op));
        first = false;
        for (const auto& [bytes, bw] : c.busbw)
          y += fmt::format("    - [{}, {:.0f}, {:.4g}]\n", c.group, bytes, bw * 1e-9);
      }
    }
  };
  if (!p.collectives.empty()) {
    y += "# Collectives inside a node: [ranks, bytes S, busbw GB/s] (nccl-tests' bus bandwidth);\n"
         "# the simulator runs them at this rate rather than the link's\ncollectives:\n";
    curves(p.collectives);
  }
  if (!p.inter_node_collectives.empty()) {
    y += "# Collectives between nodes, one rank on each: [ranks, bytes S, busbw GB/s]\ninter_node_collectives:\n";
    curves(p.inter_node_collectives);
  }
  return y;
}

topology::ClusterSpec with_profile_links(topology::ClusterSpec cluster, const DeviceProfile& p) {
  if (p.intra_node) {
    cluster.intra.bandwidth = p.intra_node->bandwidth;
    cluster.intra.latency = p.intra_node->latency;
  }
  if (p.inter_node) {
    cluster.inter.nic_bandwidth = p.inter_node->bandwidth;
    cluster.inter.latency = p.inter_node->latency;
  }
  return cluster;
}

double gemm_seconds(const DeviceProfile& p, const workload::Gemm& g, topology::Dtype dtype, int element_bytes) {
  const double size = std::cbrt(static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k));
  const double flops = g.flops();
  const double io = g.io_bytes(element_bytes);
  const double peak = p.peak[static_cast<std::size_t>(topology::storage_dtype(dtype))];
  return std::max(flops / (peak * p.efficiency(size)), io / p.memory_bandwidth) + p.launch_overhead;
}

double op_seconds(const DeviceProfile& p, std::span<const workload::Gemm> gemms, double passes, double flops,
                  double bytes, bool optimizer, topology::Dtype dtype) {
  const int e = topology::dtype_bytes(topology::storage_dtype(dtype));
  double t = 0.0;
  double gemm_io = 0.0;
  if (!gemms.empty()) {
    for (const workload::Gemm& g : gemms) {
      t += passes * gemm_seconds(p, g, dtype, e);
      gemm_io += passes * g.io_bytes(e);
    }
  } else if (flops > 0.0) {
    // The optimizer: element-wise fp32 arithmetic, bound by memory in practice.
    t += flops / p.peak[static_cast<std::size_t>(topology::Dtype::fp32)];
  }
  const double rest = std::max(0.0, bytes - gemm_io);
  const bool own_rate = optimizer && p.optimizer_bandwidth > 0.0;
  return t + rest / (own_rate ? p.optimizer_bandwidth : p.memory_bandwidth) + p.launch_overhead;
}

namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

// A GEMM by tiles and waves (see the header).
double gemm_tile_seconds(const DeviceProfile& p, const workload::Kernel& g, double peak) {
  struct Tile {
    double m, n;
  };
  static constexpr Tile tiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
  const topology::KernelSpec& ks = p.kernels;
  const double sms = ks.sms;
  const double sm_rate = peak / sms * ks.gemm_efficiency;
  const double ridge = ks.l2_bandwidth > 0.0 ? peak / ks.l2_bandwidth : 0.0;  // FLOP per byte the L2 sustains
  const auto m = static_cast<double>(g.m);
  const auto n = static_cast<double>(g.n);
  const auto k = static_cast<double>(g.k);
  const auto batch = static_cast<double>(g.batch);
  double best = std::numeric_limits<double>::infinity();
  const double operand = g.fp8 ? 1.0 : g.element;  // bytes per A or B element the tiles load
  for (const Tile& t : tiles) {
    const double intensity = 2.0 * t.m * t.n / ((t.m + t.n) * operand);
    const double rate = sm_rate * (ridge > 0.0 ? std::min(1.0, intensity / ridge) : 1.0);
    const double count = ceil_div(m, t.m) * ceil_div(n, t.n) * batch;
    for (double split : {1.0, 2.0, 4.0, 8.0}) {
      if (split > 1.0 && (count * split > 2.0 * sms || k / split < 256.0)) break;
      double secs = ceil_div(count * split, sms) * 2.0 * t.m * t.n * std::ceil(k / split) / rate;
      if (split > 1.0) secs += split * m * n * batch * 8.0 / p.memory_bandwidth;  // fp32 partials out and back
      best = std::min(best, secs);
    }
  }
  return best;
}

double flash_seconds(const DeviceProfile& p, const workload::Kernel& k, double peak) {
  const bool forward = k.kind == workload::KernelKind::flash_forward;
  const double efficiency = k.v1   ? (forward ? p.kernels.flash_v1_forward : p.kernels.flash_v1_backward)
                            : k.v2 ? (forward ? p.kernels.flash_v2_forward : p.kernels.flash_v2_backward)
                                   : (forward ? p.kernels.flash_forward : p.kernels.flash_backward);
  const double blocks = ceil_div(static_cast<double>(k.m), 128.0) * static_cast<double>(k.batch);
  const double sms = std::max(1, p.kernels.sms);
  const double filled = blocks / (ceil_div(blocks, sms) * sms);
  return k.flops() / (peak * efficiency * filled);
}

}  // namespace

double kernel_work_seconds(const DeviceProfile& p, const workload::Kernel& k, topology::Dtype dtype) {
  // fp8 precision: FP8 GEMMs at the fp8 rate, everything else at bf16's.
  const double fp8 = p.peak[static_cast<std::size_t>(topology::Dtype::fp8)];
  const double peak = k.fp8 && fp8 > 0.0 ? fp8 : p.peak[static_cast<std::size_t>(topology::storage_dtype(dtype))];
  const double stream = k.io_bytes() / p.memory_bandwidth;
  switch (k.kind) {
    case workload::KernelKind::memory: return stream;
    case workload::KernelKind::gemm: {
      double compute = 0.0;
      if (!p.gemm_efficiency.empty() || !p.kernel_model()) {
        const double size = std::cbrt(static_cast<double>(k.m) * static_cast<double>(k.n) * static_cast<double>(k.k));
        compute = k.flops() / (peak * p.efficiency(size));
      } else {
        compute = gemm_tile_seconds(p, k, peak);
      }
      return std::max(compute, stream);
    }
    case workload::KernelKind::flash_forward:
    case workload::KernelKind::flash_backward: return std::max(flash_seconds(p, k, peak), stream);
  }
  return 0.0;
}

std::vector<double> kernel_durations(const DeviceProfile& p, std::span<const workload::Kernel> kernels,
                                     topology::Dtype dtype) {
  std::vector<double> d;
  d.reserve(kernels.size());
  for (const workload::Kernel& k : kernels) d.push_back(p.launch_overhead + kernel_work_seconds(p, k, dtype));
  return d;
}

double kernels_seconds(std::span<const double> durations, double first_issue, double dispatch, double scale) {
  double end = 0.0;
  double issue = first_issue;
  for (double d : durations) {
    end = std::max(issue, end) + d * scale;
    issue += dispatch;
  }
  return end;
}

double kernels_seconds(const DeviceProfile& p, std::span<const workload::Kernel> kernels, topology::Dtype dtype,
                       double first_issue, double dispatch) {
  return kernels_seconds(kernel_durations(p, kernels, dtype), first_issue, dispatch);
}

double dispatch_seconds(const DeviceProfile& p, program::Category c) {
  return c == program::Category::backward ? p.host.backward : p.host.forward;
}

std::size_t host_issued(const program::Op& op, std::size_t kernels) {
  const bool loop = op.piece == program::LayerPiece::column || op.piece == program::LayerPiece::row;
  if (op.step <= 0 || !loop || kernels == 0) return kernels;
  return kernels - 1;  // the block's GEMM
}

double op_dispatch_seconds(const DeviceProfile& p, const program::Op& op, std::size_t kernels) {
  if (kernels == 0) return 0.0;
  return dispatch_seconds(p, op.category) * static_cast<double>(host_issued(op, kernels)) / static_cast<double>(kernels);
}

double compute_seconds(const DeviceProfile& p, const program::Program& program, const program::Op& op,
                       topology::Dtype dtype) {
  if (p.kernel_model() && op.kernels >= 0) {
    const auto& ks = program.kernel_sets[static_cast<std::size_t>(op.kernels)];
    return kernels_seconds(p, ks, dtype, 0.0, op_dispatch_seconds(p, op, ks.size()));
  }
  // A whole backward op runs each GEMM twice; a piece's GEMM set lists what it runs.
  const double passes =
      op.category == program::Category::backward && op.piece == program::LayerPiece::whole ? 2.0 : 1.0;
  std::span<const workload::Gemm> gemms;
  if (op.gemms >= 0) gemms = program.gemm_sets[static_cast<std::size_t>(op.gemms)];
  return op_seconds(p, gemms, passes, op.flops, op.bytes, op.category == program::Category::optimizer, dtype);
}

double host_seconds(const scenario::Scenario& s, const program::Op& op) {
  const int sharing = std::max(1, std::min(s.cluster.gpus_per_node, s.plan.world()));
  return op.bytes / (s.cluster.host.memory_bandwidth / sharing);
}

}  // namespace parasim::sim
