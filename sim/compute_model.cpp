#include "sim/compute_model.hpp"

#include <algorithm>
#include <cmath>

#include "plan/load.hpp"
#include "plan/reader.hpp"

namespace parasim::sim {

double DeviceProfile::efficiency(double size) const {
  if (gemm_efficiency.empty()) return 1.0;
  if (size <= gemm_efficiency.front().first) return gemm_efficiency.front().second;
  if (size >= gemm_efficiency.back().first) return gemm_efficiency.back().second;
  for (std::size_t i = 1; i < gemm_efficiency.size(); ++i) {
    const auto [x1, y1] = gemm_efficiency[i];
    if (size > x1) continue;
    const auto [x0, y0] = gemm_efficiency[i - 1];
    const double w = (std::log(size) - std::log(x0)) / (std::log(x1) - std::log(x0));
    return y0 + w * (y1 - y0);
  }
  return gemm_efficiency.back().second;
}

DeviceProfile default_profile(const topology::DeviceSpec& device) {
  DeviceProfile p;
  p.name = device.name + " (datasheet)";
  p.peak = device.peak_flops;
  const bool cpu = device.name == "cpu-core";
  if (cpu) {
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

DeviceProfile load_profile(const std::string& path, const topology::DeviceSpec& device) {
  DeviceProfile p = default_profile(device);
  const plan::Value doc = plan::parse_yaml_file(path);
  plan::LocationMap where;
  plan::Reader r(doc, "", {"device", "gemm_efficiency", "memory_bandwidth", "launch_overhead", "peak"}, &where);
  p.name = r.string("device", device.name) + " (measured)";
  p.memory_bandwidth = r.bandwidth("memory_bandwidth", p.memory_bandwidth);
  p.launch_overhead = r.duration("launch_overhead", p.launch_overhead);
  if (const plan::Value* peak = r.get("peak")) {
    plan::Reader pr(*peak, "peak", {"fp32", "tf32", "bf16", "fp16"}, &where);
    for (topology::Dtype d : topology::all_dtypes) {
      p.peak[static_cast<std::size_t>(d)] = pr.flop_rate(topology::to_string(d), p.peak[static_cast<std::size_t>(d)]);
    }
  }
  if (const plan::Value* eff = r.get("gemm_efficiency")) {
    if (eff->kind != plan::Value::Kind::sequence || eff->items.empty()) {
      r.fail("gemm_efficiency", "expected a list of [size, efficiency] pairs, sizes ascending");
    }
    p.gemm_efficiency.clear();
    for (const plan::Value& item : eff->items) {
      if (item.kind != plan::Value::Kind::sequence || item.items.size() != 2 || !item.items[0].is_scalar() ||
          !item.items[1].is_scalar()) {
        throw plan::ScenarioError(item.loc, "gemm_efficiency", "expected a pair [size, efficiency]");
      }
      const double size = std::atof(item.items[0].scalar.c_str());
      const double e = std::atof(item.items[1].scalar.c_str());
      if (size <= 0 || e <= 0 || e > 1 || (!p.gemm_efficiency.empty() && size <= p.gemm_efficiency.back().first)) {
        throw plan::ScenarioError(item.loc, "gemm_efficiency",
                                  "expected a positive size above the previous one and an efficiency in (0, 1]");
      }
      p.gemm_efficiency.emplace_back(size, e);
    }
  }
  return p;
}

double gemm_seconds(const DeviceProfile& p, const plan::Gemm& g, topology::Dtype dtype, int element_bytes) {
  const double size = std::cbrt(static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k));
  const double flops = g.flops();
  const double io = g.io_bytes(element_bytes);
  const double peak = p.peak[static_cast<std::size_t>(dtype)];
  return std::max(flops / (peak * p.efficiency(size)), io / p.memory_bandwidth) + p.launch_overhead;
}

double compute_seconds(const DeviceProfile& p, const plan::Program& program, const plan::Op& op,
                       topology::Dtype dtype) {
  const int e = topology::dtype_bytes(dtype);
  const double passes = op.category == plan::Category::backward ? 2.0 : 1.0;
  double t = 0.0;
  double gemm_io = 0.0;
  if (op.gemms >= 0) {
    for (const plan::Gemm& g : program.gemm_sets[static_cast<std::size_t>(op.gemms)]) {
      t += passes * gemm_seconds(p, g, dtype, e);
      gemm_io += passes * g.io_bytes(e);
    }
  } else if (op.flops > 0.0) {
    // The optimizer: element-wise fp32 arithmetic, bound by memory in practice.
    t += op.flops / p.peak[static_cast<std::size_t>(topology::Dtype::fp32)];
  }
  const double rest = std::max(0.0, op.bytes - gemm_io);
  return t + rest / p.memory_bandwidth + p.launch_overhead;
}

}  // namespace parasim::sim
