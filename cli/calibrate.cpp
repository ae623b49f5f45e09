// parasim calibrate: measure this machine through an executor backend and write the
// device profile that scenarios reference (hardware.profile) and the simulator uses.
//
// Every rank measures at once (exec/calibrate.hpp says what and how); started outside
// MPI, the command starts `mpirun -np N` on itself with one rank per core by default.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/emulated.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "exec/backend.hpp"
#include "exec/calibrate.hpp"
#include "scenario/presets.hpp"
#include "report/table.hpp"
#include "sim/compute_model.hpp"
#include "topology/units.hpp"

#ifdef PARASIM_HAVE_CPU_BACKEND
#include "exec/devices.hpp"
#endif

namespace parasim::cli {
namespace {

namespace u = units;

struct CalibrateArgs {
  std::string backend = "cpu";
  std::string device = "cpu-core";
  int ranks = 0;  // 0: one per core
  std::string out;
  JsonOption json;
  std::string max_size = "256MiB";
  bool quick = false;
  std::string mpirun_args;
  bool emulated = false;  // between the emulated cluster's nodes (cli/emulated.hpp)
};

void precheck(const CalibrateArgs& a) {
  // The preset the profile will describe must exist before anything is measured: a profile
  // naming no preset could never be loaded.
  if (scenario::find_preset(scenario::PresetKind::device, a.device) == nullptr) {
    std::string names;
    for (const std::string& n : scenario::preset_names(scenario::PresetKind::device))
      names += (names.empty() ? "" : ", ") + n;
    throw UsageError(fmt::format("--device: no device preset '{}' (one of: {})", a.device, names));
  }
  const exec::BackendStatus b = exec::backend_status(a.backend);
  if (!b.usable) throw UsageError(fmt::format("backend {} cannot run here: {}", b.name, b.detail));
#ifndef PARASIM_HAVE_CUDA_DEVICE
  if (a.backend == "cuda") throw UsageError("this build has no CUDA executor; calibrate with --backend cpu");
#endif
  if (a.backend == "cuda" && a.device == "cpu-core") {
    throw UsageError("--device: name the GPU preset the profile describes (e.g. --device h100-sxm)");
  }
}

#ifdef PARASIM_HAVE_CPU_BACKEND

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

// `between_nodes`: calibrate --emulated, its links and collectives measured between ranks
// of different nodes: the link is the nodes' NIC to NIC (the profile's inter_node), and the
// collectives are those of one rank per node (inter_node_collectives).
sim::DeviceProfile to_profile(const exec::ProfileFit& f, const std::string& device, bool between_nodes) {
  sim::DeviceProfile p;
  p.device = device;
  p.name = device + " (measured)";
  // A dtype not measured runs at the fp32 rate: the CPU backend computes 16-bit formats in
  // fp32 (their values rounded), so it measures fp32 alone.
  for (std::size_t d = 0; d < p.peak.size(); ++d) p.peak[d] = f.peak[d] > 0.0 ? f.peak[d] : f.peak[0];
  p.gemm_efficiency = f.efficiency;
  p.memory_bandwidth = f.memory_bandwidth;
  p.optimizer_bandwidth = f.optimizer_bandwidth;
  p.launch_overhead = f.launch_overhead;
  // What the executor's host pays per kernel and per call (it issues from C++, not from
  // Python as the presets' Megatron-LM figures assume).
  if (f.host_kernel > 0.0) p.host = {f.host_kernel, f.host_kernel, f.host_communication};
  if (f.link_bandwidth > 0.0) {
    (between_nodes ? p.inter_node : p.intra_node) = sim::LinkFigures{f.link_bandwidth, f.link_latency};
  }
  p.send_cpu_per_byte = f.send_cpu_per_byte;
  p.receive_cpu_per_byte = f.receive_cpu_per_byte;
  std::vector<sim::CollectiveCurve>& curves = between_nodes ? p.inter_node_collectives : p.collectives;
  for (const exec::ProfileFit::Collective& c : f.collectives) {
    program::CollectiveOp op = program::CollectiveOp::all_reduce;
    if (c.op == "reduce-scatter") op = program::CollectiveOp::reduce_scatter;
    if (c.op == "all-gather") op = program::CollectiveOp::all_gather;
    auto it = std::find_if(curves.begin(), curves.end(),
                           [&](const sim::CollectiveCurve& k) { return k.op == op && k.group == c.group; });
    if (it == curves.end()) it = curves.insert(curves.end(), sim::CollectiveCurve{op, c.group, {}});
    it->busbw.emplace_back(c.bytes, c.busbw);
  }
  return p;
}

std::string measurements_yaml(const exec::Calibration& c) {
  std::string y = "# What was measured (the simulator reads only the figures above).\nmeasurements:\n";
  y += "  gemm:  # [m, n, k, form, dtype, seconds, FLOP/s, spread of 3 rounds], rejected ones commented out\n";
  for (const auto& g : c.gemms) {
    y += fmt::format("    {}- [{}, {}, {}, {}, {}, {:.4g}, {:.4g}, {:.3f}]{}\n", g.rejected.empty() ? "" : "# ", g.m, g.n,
                     g.k, g.form, topology::to_string(g.dtype), g.seconds, g.rate(), g.spread,
                     g.rejected.empty() ? "" : "  rejected: " + g.rejected);
  }
  y += "  kernels:  # [kernel, elements, bytes moved, seconds, bytes/s, spread of 3 rounds]\n";
  for (const auto& k : c.kernels) {
    y += fmt::format("    - [{}, {}, {:.4g}, {:.4g}, {:.4g}, {:.3f}]\n", k.kernel, k.elements, k.bytes, k.seconds,
                     k.bandwidth(), k.spread);
  }
  y += fmt::format("  launch_seconds: {:.4g}\n", c.launch_seconds);
  if (c.sms > 0) {
    y += fmt::format("  multiprocessors: {}\n  issue_seconds: {:.4g}\n  device_launch_seconds: {:.4g}\n  post_seconds: {:.4g}\n",
                     c.sms, c.issue_seconds, c.device_launch_seconds, c.post_seconds);
  }
  y += "  communication:  # [op, ranks, bytes, seconds, algbw bytes/s, busbw bytes/s, spread of 3 rounds]\n";
  for (const auto& s : c.comms) {
    y += fmt::format("    {}- [{}, {}, {:.0f}, {:.4g}, {:.4g}, {:.4g}, {:.3f}]{}\n", s.rejected.empty() ? "" : "# ", s.op,
                     s.group, s.bytes, s.seconds, s.algbw(), s.busbw(), s.spread,
                     s.rejected.empty() ? "" : "  rejected: " + s.rejected);
  }
  return y;
}

nlohmann::ordered_json calibration_json(const exec::Calibration& c, const sim::DeviceProfile& p) {
  nlohmann::ordered_json gemm = nlohmann::ordered_json::array();
  for (const auto& g : c.gemms) {
    gemm.push_back({{"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"form", g.form},
                    {"dtype", topology::to_string(g.dtype)},
                    {"seconds", g.seconds},
                    {"spread", g.spread},
                    {"flop_rate", g.rate()}});
    if (!g.rejected.empty()) gemm.back()["rejected"] = g.rejected;
  }
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const auto& k : c.kernels) {
    kernels.push_back({{"kernel", k.kernel}, {"elements", k.elements}, {"bytes", k.bytes}, {"seconds", k.seconds},
                       {"spread", k.spread}, {"bandwidth", k.bandwidth()}});
  }
  nlohmann::ordered_json comm = nlohmann::ordered_json::array();
  for (const auto& s : c.comms) {
    comm.push_back({{"op", s.op}, {"ranks", s.group}, {"bytes", s.bytes}, {"seconds", s.seconds}, {"spread", s.spread},
                    {"algbw", s.algbw()}, {"busbw", s.busbw()}});
    if (!s.rejected.empty()) comm.back()["rejected"] = s.rejected;
  }
  nlohmann::ordered_json eff = nlohmann::ordered_json::array();
  for (const auto& [size, e] : p.gemm_efficiency) eff.push_back({size, e});
  nlohmann::ordered_json peaks;
  for (const topology::Dtype d : topology::all_dtypes) peaks[std::string(topology::to_string(d))] = p.peak[static_cast<std::size_t>(d)];
  nlohmann::ordered_json profile{{"device", p.device},
                                 {"peak_flop_rate", p.peak[0]},
                                 {"peak", peaks},
                                 {"gemm_efficiency", eff},
                                 {"memory_bandwidth", p.memory_bandwidth},
                                 {"optimizer_bandwidth", p.optimizer_bandwidth},
                                 {"launch_overhead", p.launch_overhead}};
  if (c.sms > 0) {
    profile["host"] = {{"forward", p.host.forward}, {"backward", p.host.backward}, {"communication", p.host.communication}};
  }
  if (p.inter_node) {
    profile["inter_node"] = {{"bandwidth", p.inter_node->bandwidth}, {"latency", p.inter_node->latency}};
  }
  if (p.intra_node) {
    profile["intra_node"] = {{"bandwidth", p.intra_node->bandwidth}, {"latency", p.intra_node->latency}};
  }
  if (p.send_cpu_per_byte > 0.0 || p.receive_cpu_per_byte > 0.0) {
    profile["network_cpu"] = {{"send", p.send_cpu_per_byte}, {"receive", p.receive_cpu_per_byte}};
  }
  nlohmann::ordered_json out{{"backend", c.backend}, {"ranks", c.ranks}, {"profile", profile}, {"gemm", gemm},
                             {"kernels", kernels},   {"launch_seconds", c.launch_seconds}};
  if (c.sms > 0) {
    out["multiprocessors"] = c.sms;
    out["issue_seconds"] = c.issue_seconds;
    out["device_launch_seconds"] = c.device_launch_seconds;
    out["post_seconds"] = c.post_seconds;
  }
  out["communication"] = comm;
  return out;
}

void print_report(const exec::Calibration& c, const sim::DeviceProfile& p) {
  using A = report::Table::Align;
  auto spread = [](double v) { return fmt::format("{:.0f} %", 100 * v); };
  report::Table g({"GEMM m x n x k", "form", "dtype", "time", "spread", "rate per rank", "of best", ""},
                  {A::left, A::left, A::left, A::right, A::right, A::right, A::right, A::left});
  for (const auto& s : c.gemms) {
    g.add_row({fmt::format("{} x {} x {}", s.m, s.n, s.k), s.form, std::string(topology::to_string(s.dtype)),
               u::format_duration(s.seconds), spread(s.spread), u::format_flop_rate(s.rate()),
               fmt::format("{:.0f} %", 100 * s.rate() / p.peak[static_cast<std::size_t>(s.dtype)]),
               s.rejected.empty() ? "" : "rejected"});
  }
  fmt::print("\nGEMMs (every rank at once, operands cycled through {} to keep caches cold; of best: of the dtype's best)\n{}",
             u::format_bytes(static_cast<double>(exec::cold_cache_bytes)), g.render());
  report::Table k({"kernel", "elements", "time", "spread", "bandwidth"}, {A::left, A::right, A::right, A::right, A::right});
  for (const auto& s : c.kernels) {
    k.add_row({s.kernel, u::format_count(static_cast<double>(s.elements)), u::format_duration(s.seconds),
               spread(s.spread), u::format_bandwidth(s.bandwidth())});
  }
  fmt::print("\nelement-wise kernels (bytes read and written per second)\n{}", k.render());
  fmt::print("kernel call overhead: {}\n", u::format_duration(c.launch_seconds));
  if (c.sms > 0) {
    fmt::print("{} multiprocessors; a kernel costs the host {} to issue and the device {} back to back; "
               "posting a collective costs the host {}\n",
               c.sms, u::format_duration(c.issue_seconds), u::format_duration(c.device_launch_seconds),
               c.post_seconds > 0.0 ? u::format_duration(c.post_seconds) : std::string("(one rank: not measured)"));
  }
  if (!c.comms.empty()) {
    report::Table m({"op", "ranks", "size", "time", "spread", "algbw", "busbw", ""},
                    {A::left, A::right, A::right, A::right, A::right, A::right, A::right, A::left});
    for (const auto& s : c.comms) {
      m.add_row({s.op, std::to_string(s.group), u::format_bytes(s.bytes), u::format_duration(s.seconds), spread(s.spread),
                 u::format_bandwidth(s.algbw()), u::format_bandwidth(s.busbw()), s.rejected.empty() ? "" : "rejected"});
    }
    fmt::print("\ncommunication (send/recv: one-way time of a ping-pong; busbw as nccl-tests)\n{}", m.render());
  }
  std::string peaks;
  for (const topology::Dtype d : topology::all_dtypes) {
    peaks += fmt::format("{}{} {}", peaks.empty() ? "" : ", ", topology::to_string(d),
                         u::format_flop_rate(p.peak[static_cast<std::size_t>(d)]));
  }
  fmt::print("\nprofile for {}: peak {}; element-wise {}, optimizer {}, launch {}", p.device, peaks,
             u::format_bandwidth(p.memory_bandwidth),
             u::format_bandwidth(p.optimizer_bandwidth), u::format_duration(p.launch_overhead));
  if (p.inter_node) {
    fmt::print(", link between nodes {} + {}", u::format_bandwidth(p.inter_node->bandwidth),
               u::format_duration(p.inter_node->latency));
  }  if (p.send_cpu_per_byte > 0.0 || p.receive_cpu_per_byte > 0.0) {
    fmt::print(", CPU per byte between nodes {:.3g} ns sent, {:.3g} ns received", p.send_cpu_per_byte * 1e9,
               p.receive_cpu_per_byte * 1e9);
  }

  if (p.intra_node) {
    fmt::print(", link {} + {}", u::format_bandwidth(p.intra_node->bandwidth), u::format_duration(p.intra_node->latency));
  }
  fmt::print("\n");
  // Each measurement's rounds: how steady the host was, and what was set aside.
  std::vector<double> spreads;
  for (const auto& s : c.gemms) spreads.push_back(s.spread);
  for (const auto& s : c.kernels) spreads.push_back(s.spread);
  for (const auto& s : c.comms) spreads.push_back(s.spread);
  std::sort(spreads.begin(), spreads.end());
  if (!spreads.empty()) {
    const double median = spreads[spreads.size() / 2];
    fmt::print("spread between each measurement's 3 rounds: median {:.1f} %, largest {:.0f} %\n", 100 * median,
               100 * spreads.back());
    if (median > 0.10) {
      fmt::print("warning: the rounds of a measurement differ by {:.0f} % (median): the host is busy or unsteady; "
                 "calibrate again on an idle host\n",
                 100 * median);
    }
  }
  for (const auto& s : c.gemms) {
    if (!s.rejected.empty()) {
      fmt::print("rejected: GEMM {} x {} x {} {} {}: {}\n", s.m, s.n, s.k, s.form, topology::to_string(s.dtype), s.rejected);
    }
  }
  for (const auto& s : c.comms) {
    if (!s.rejected.empty()) fmt::print("rejected: {} on {} ranks, {}: {}\n", s.op, s.group, u::format_bytes(s.bytes), s.rejected);
  }
}

void run_calibrate(const CalibrateArgs& a) {
  const u::Parsed max = u::parse_bytes(a.max_size);
  if (!max.ok()) throw UsageError("--max-size: " + max.error);
  if (max.value < 1024) throw UsageError("--max-size must be at least 1KiB");
  if (max.value > 4.0 * (1LL << 30)) throw UsageError(fmt::format("--max-size {}: at most 4GiB", a.max_size));
  const std::string out = a.out.empty() ? fmt::format("calibrate-{}.yaml", a.backend) : a.out;
  check_output_path(out, "--out");
  if (!under_mpi()) {
    precheck(a);
    // One rank per core on the CPU backend; one GPU unless --ranks says more.
    const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    if (a.emulated) {
      // Every rank of every node (what computes shares the node's cores), the ranks told
      // where the cluster's state is, so that they measure between their nodes.
      const EmulatedCluster c = emulated_cluster_up();
      relaunch_under_mpirun(c.nodes * c.ranks_per_node, 0.0,
                            fmt::format("{} -x PARASIM_CLUSTER_DIR={} {}", emulated_mpirun_args(c), state_dir(), a.mpirun_args));
    }
    const int ranks = a.ranks > 0 ? a.ranks : a.backend == "cuda" ? 1 : cores;
    if (ranks > 1) relaunch_under_mpirun(ranks, 0.0, a.mpirun_args);
  }
  std::optional<StdoutToStderr> json_alone;  // the tables to standard error while the JSON has standard output
  json_alone.emplace(a.json.on_stdout());
  const std::unique_ptr<exec::Device> owned =
      exec::make_device(a.backend == "cuda" ? scenario::Backend::cuda : scenario::Backend::cpu, 0);
  exec::Device& dev = *owned;
  if (a.ranks > 0 && dev.world() != a.ranks) {
    if (dev.rank() == 0) std::cerr << fmt::format("error: --ranks {} but the job has {}\n", a.ranks, dev.world());
    std::exit(exit_bad_input);
  }
  const bool root = dev.rank() == 0;
  const std::string cpu = root ? cpu_model() : std::string();
  exec::CalibrateOptions o;
  o.quick = a.quick;
  if (a.backend == "cuda") {
    o.gemm_precisions.assign(topology::all_dtypes.begin(), topology::all_dtypes.end());
    o.large_shapes = !a.quick;
  }
  o.max_comm_bytes = static_cast<std::int64_t>(max.value);
  if (a.emulated) {
    const std::optional<EmulatedCluster> up = cluster_state();
    o.node_ranks = up ? up->ranks_per_node : 1;
  }
  if (root) {
    fmt::print("calibrating backend {} with {} rank{} at once ({}){}\n", a.backend, dev.world(),
               dev.world() == 1 ? "" : "s", cpu, a.quick ? ", quick grid" : "");
  }
  const auto t0 = std::chrono::steady_clock::now();
  exec::Calibration c;
  Progress progress(a.json.on_stdout() || !root);
  try {
    // A line per phase; on a terminal a progress line as well (the ranks' stderr is mpirun's
    // pipe: the launcher passes PARASIM_PROGRESS on when its own is a terminal).
    std::string phase;
    c = exec::calibrate(dev, o, [&](std::string_view what, std::size_t done, std::size_t total) {
      if (what != phase) {
        phase = what;
        progress.clear();
        fmt::print("  measuring {}\n", what);
        std::fflush(stdout);
      }
      progress.update("calibrating", done, total);
    });
    progress.clear();
  } catch (const std::exception& e) {
    std::cerr << fmt::format("error: rank {}: {}\n", dev.rank(), e.what());
    dev.abort_all(exit_failure);
  }
  if (!root) return;
  const sim::DeviceProfile p = to_profile(exec::fit_profile(c), a.device, a.emulated);
  print_report(c, p);
  // validate reads the host back from this line (cli/validate.cpp, profile_host).
  const std::string header =
      fmt::format("# Device profile measured by `parasim calibrate --backend {}` with {} rank{} at once\n"
                  "# on {} ({}), {}. Reference it from a scenario:  hardware: {{profile: FILE}}\n",
                  a.backend, dev.world(), dev.world() == 1 ? "" : "s", host_name(), cpu, today());
  const std::string body = fmt::format("backend: {}\nranks: {}\n", a.backend, dev.world()) + sim::profile_yaml(p);
  OutputSet files;
  files.add(out, header + body + measurements_yaml(c));
  if (a.json.wanted()) files.add(a.json.path, stamped("calibration", calibration_json(c, p)).dump(2) + "\n");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("\nwrote {} (measured in {:.1f} s){}\n", out, secs, a.json.wanted() && !a.json.on_stdout() ? ", " + a.json.path : "");
  json_alone.reset();
  files.commit();
}

#else

void run_calibrate(const CalibrateArgs& a) {
  precheck(a);
  throw UsageError(fmt::format("this build has no CPU executor: {}", exec::cpu_status().detail));
}

#endif

}  // namespace

void add_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Measure this machine (GEMMs, kernels, links) and write a device profile for the simulator");
  cmd->add_option("--backend", a->backend, "Executor backend to measure")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "Device preset the profile describes")->capture_default_str();
  // At most 1,024: the ranks are processes of this host (or of the emulated cluster's nodes).
  cmd->add_option("--ranks", a->ranks, "Ranks measuring at once (default: one per core)")->check(CLI::Range(1, 1024));
  cmd->add_option("--mpirun-args", a->mpirun_args, "Arguments for the mpirun that starts the ranks (split at spaces)")
      ->type_name("ARGS");
  cmd->add_option("--out", a->out, "Profile to write (default: calibrate-BACKEND.yaml)")->type_name("FILE")
      ->check(output_file());
  a->json.add_to(*cmd, "Every measurement and the profile");
  cmd->add_option("--max-size", a->max_size, "Largest message measured (from 1KiB in steps of 4)")
      ->capture_default_str();
  cmd->add_flag("--quick", a->quick, "A small GEMM and kernel grid, for smoke tests");
  cmd->add_flag("--emulated", a->emulated,
                "Every rank of every node of the emulated cluster (`parasim cluster up`): the link, the "
                "collectives and the network's CPU measured between the nodes' first ranks (the profile's "
                "inter_node, inter_node_collectives, network_cpu)");
  cmd->callback([a] { run_calibrate(*a); });
}

}  // namespace parasim::cli
