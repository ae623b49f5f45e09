// Time of a compute op on a device.
//
// Kernel level (devices with a kernel model: the GPU presets). A compute op is the list of
// kernels a real implementation launches for it (workload/kernels.hpp), run one after another
// on the device's stream:
//   GEMM       tiles of 256x128 ... 64x64 outputs, each tile on one SM; the tiles run in
//              waves of `sms`, so a GEMM of 12 tiles on 108 SMs takes as long as one of 108
//              (wave quantization). A tile's main loop sustains gemm_efficiency of the
//              SM's share of the peak, less when it is too small to reuse its operands:
//              it needs (tm + tn)·e bytes from L2 per 2·tm·tn FLOPs, so its rate is capped
//              by l2_bandwidth / sms · 2·tm·tn / ((tm + tn)·e). Split-K (2, 4, 8 slices, fp32
//              partials summed afterwards) is tried when the tiles do not fill the device;
//              the fastest choice is taken, as cuBLAS's heuristics aim to. Never faster
//              than its operands take to stream from memory.
//   memory     element-wise and reduction kernels: bytes / (memory_bandwidth · memory_efficiency)
//   flash      FlashAttention: its FLOPs (causal: half) at flash_forward / flash_backward of
//              the peak, on blocks of 128 queries (keys) per batch and head, in waves.
// Each kernel also costs `launch` on the device. The host issues the kernels one every
// `dispatch` seconds (HostSpec: Python's eager forward, autograd's backward), and a kernel
// cannot start before it is issued: with h_i the issue time of kernel i and w_i its work,
//   start_i = max(h_i, end_{i-1}),  end_i = start_i + launch + w_i
// so small kernels run at the host's pace and large ones hide it (the host runs ahead).
//
// Without a kernel model (CPU cores, custom devices, measured CPU profiles), an op's time
// is its GEMMs plus the rest of its bytes: a GEMM of F FLOPs moving M bytes takes
// max(F / (peak(dtype) · eff(size)), M / bw) plus a launch overhead, where size =
// (m·n·k)^(1/3) and eff(size) is interpolated linearly in log(size) between the profile's
// points (clamped at the ends): a 1024³ GEMM reaches a fraction of what an 8192³ one does.
// Backward ops run each forward GEMM twice (data and weight gradients have the same FLOPs).
// The rest of an op's memory traffic (norms, softmax, activations, the optimizer) moves at
// the memory bandwidth.
//
// Built-in profiles (default_profile) take peak rates and memory bandwidth from the
// device's datasheet and a typical efficiency curve for its kind; a measured profile
// written by `parasim calibrate` (hardware.profile) replaces them, and may also carry the
// measured bandwidth and latency of the links between ranks, which then replace the
// cluster's (with_profile_links).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "workload/kernels.hpp"
#include "program/program.hpp"
#include "topology/cluster.hpp"
#include "topology/cluster_spec.hpp"
#include "topology/device.hpp"

namespace parasim::sim {

// A link class's measured figures: one-way time of a message = latency + bytes / bandwidth.
struct LinkFigures {
  double bandwidth = 0.0;  // bytes/s
  double latency = 0.0;    // seconds
};

// A collective's measured bus bandwidth (nccl-tests' busbw) against its buffer size S, on
// a group of `group` ranks inside one node.
struct CollectiveCurve {
  program::CollectiveOp op = program::CollectiveOp::all_reduce;
  int group = 2;
  std::vector<std::pair<double, double>> busbw;  // (bytes, bytes/s), ascending bytes
};

struct DeviceProfile {
  std::string name;
  std::string device;                                   // the device preset it describes
  std::array<double, topology::dtype_count> peak{};                         // FLOP/s per dtype
  std::vector<std::pair<double, double>> gemm_efficiency;  // (size, fraction of peak), ascending size
  double memory_bandwidth = 0.0;                        // achievable bytes/s
  // The optimizer's bytes per second (the Program counts 24 + 2e bytes per parameter);
  // 0: memory_bandwidth. A measured profile has AdamW's own rate here.
  double optimizer_bandwidth = 0.0;
  double launch_overhead = 0.0;                         // seconds per kernel
  std::optional<LinkFigures> intra_node;                // measured; replaces the cluster's
  std::optional<LinkFigures> inter_node;
  // Measured collectives inside a node (with intra_node): each runs as its flows with the
  // bytes scaled by collective_slowdown(), so that on an uncontended link it takes the
  // measured time (the busbw already counts the algorithm's share of S on the wire).
  std::vector<CollectiveCurve> collectives;
  // The same between nodes, one rank on each (with inter_node; `calibrate --emulated`):
  // what the MPI library's algorithms make of the NICs, which may be far from a ring's.
  std::vector<CollectiveCurve> inter_node_collectives;
  // CPU ranks (`calibrate --emulated`): the CPU time a rank's cores spend per byte it sends
  // and per byte it receives between nodes (the TCP stack's work; 0: none). While such
  // traffic flows, the rank computes at 1 - (send rate x send + receive rate x receive) of
  // its speed.
  double send_cpu_per_byte = 0.0;
  double receive_cpu_per_byte = 0.0;
  topology::KernelSpec kernels;  // sms > 0: the kernel-level model above
  topology::HostSpec host;

  [[nodiscard]] bool kernel_model() const { return kernels.present(); }

  [[nodiscard]] double efficiency(double size) const;
  // intra_node bandwidth / the measured busbw of `op` at `bytes` (log-linear between
  // measured sizes, clamped at the ends) on the largest measured group not above `group`
  // (the smallest when all are above); 1 without a curve for `op` or a measured link.
  // `across`: a group of one rank per node, from inter_node and its curves.
  [[nodiscard]] double collective_slowdown(program::CollectiveOp op, int group, double bytes,
                                           bool across = false) const;
  // That measured busbw itself; 0 without a curve for `op` or a measured link.
  [[nodiscard]] double curve_busbw(program::CollectiveOp op, int group, double bytes, bool across = false) const;
};

DeviceProfile default_profile(const topology::DeviceSpec& device);

// The factor a collective over `devices` runs its bytes by under a measured profile: its
// curves inside a node when every device is on one node, its curves between nodes when
// each is on a node of its own; 1 otherwise (and without curves).
double measured_slowdown(const DeviceProfile& p, const topology::Cluster& cluster, program::CollectiveOp op,
                         const std::vector<int>& devices, double bytes);
// The measured busbw of that collective, from the same curves; 0 when none applies. Under
// MPI the simulator runs libnbc's algorithm with its flows' bytes scaled so that,
// uncontended, it takes the measured time (scale_to_measured, mpi_ranks.hpp).
double measured_busbw(const DeviceProfile& p, const topology::Cluster& cluster, program::CollectiveOp op,
                      const std::vector<int>& devices, double bytes);
// Reads a measured profile (YAML); errors name file, line and key.
DeviceProfile load_profile(const std::string& path, const topology::DeviceSpec& device);
// The profile as load_profile reads it (keys device, peak, gemm_efficiency,
// memory_bandwidth, launch_overhead, links), four significant digits per figure.
std::string profile_yaml(const DeviceProfile& p);
// The cluster with the profile's measured links in place of its own: intra_node sets each
// device's link (bandwidth, latency device to device), inter_node each NIC's.
topology::ClusterSpec with_profile_links(topology::ClusterSpec cluster, const DeviceProfile& p);

double gemm_seconds(const DeviceProfile& p, const workload::Gemm& g, topology::Dtype dtype, int element_bytes);
// Duration of a compute op: its GEMMs (`passes` times each: 2 for backward), the rest of
// its `bytes` at the memory bandwidth (the optimizer's at its own rate when measured), or
// without GEMMs its fp32 `flops`, plus a launch.
double op_seconds(const DeviceProfile& p, std::span<const workload::Gemm> gemms, double passes, double flops,
                  double bytes, bool optimizer, topology::Dtype dtype);
// Duration of a compute op of `program` on an idle host (without a kernel model: the
// legacy timing; with one: the kernels issued as the host can, the first at once).
double compute_seconds(const DeviceProfile& p, const program::Program& program, const program::Op& op,
                       topology::Dtype dtype);

// Duration of an op on the host's cores (Stream::host: the offloaded optimizer step): its
// bytes of host memory traffic at the rank's share of its node's host memory bandwidth
// (every rank of the node steps at once).
double host_seconds(const scenario::Scenario& s, const program::Op& op);

// --- kernel level ------------------------------------------------------------------------
// Seconds of one kernel's work on the device, launch excluded.
double kernel_work_seconds(const DeviceProfile& p, const workload::Kernel& k, topology::Dtype dtype);
// Seconds from when the device is ready until the last of `kernels` ends, when the host
// issues the first `first_issue` seconds after that (0 or less: already issued) and each
// next one `dispatch` seconds after the previous.
double kernels_seconds(const DeviceProfile& p, std::span<const workload::Kernel> kernels, topology::Dtype dtype,
                       double first_issue, double dispatch);
// The same from each kernel's device time (launch included), as kernel_durations() gives.
// `scale` multiplies each kernel's device time (a degraded device, jitter), not the issuing.
double kernels_seconds(std::span<const double> durations, double first_issue, double dispatch, double scale = 1.0);
std::vector<double> kernel_durations(const DeviceProfile& p, std::span<const workload::Kernel> kernels,
                                     topology::Dtype dtype);
// Host seconds to issue one kernel of an op of category `c`.
double dispatch_seconds(const DeviceProfile& p, program::Category c);
// Of a compute op's `kernels`, those the host issues from Python, each costing it a
// dispatch: all, except in the GEMM blocks of a tensor-parallel overlap after the first,
// which Transformer Engine's C++ loop issues, as it does the overlap's transfers and
// reduce-scatters (which cost the host nothing here).
std::size_t host_issued(const program::Op& op, std::size_t kernels);
// Host seconds per kernel of `op`: its host_issued share of dispatch_seconds.
double op_dispatch_seconds(const DeviceProfile& p, const program::Op& op, std::size_t kernels);

}  // namespace parasim::sim
