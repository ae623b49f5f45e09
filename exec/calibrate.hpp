// Measuring a machine through the backend interface: what `parasim calibrate` runs on
// every rank of the job at once, so that each figure is what a rank gets while its
// neighbours work too (shared caches, memory bandwidth, cores).
//
//   * GEMMs over a grid of shapes (squares and the shapes of transformer layers and of
//     attention) in the three forms a layer runs (NN, NT, TN), with cold caches, as FLOP/s;
//   * the decoder's element-wise kernels (layer norm, GELU, causal softmax, residual adds,
//     AdamW), as bytes moved per second;
//   * on a device that queues its kernels (a GPU), the host's and the device's part of a
//     kernel apart: the host's time to issue one (the calls return before the kernel
//     runs) and the device's time per kernel when tiny ones run back to back, and the
//     host's time to post a collective;
//   * point-to-point (ping-pong between ranks 0 and 1, one-way time) and every collective
//     the Program uses (all-reduce, reduce-scatter, all-gather) on groups of 2, 4, ... up
//     to every rank, from 1 KiB to 256 MiB in steps of 4, with the algorithm bandwidth
//     (bytes / time) and bus bandwidth (algorithm bandwidth times the nccl-tests factor:
//     2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather, 1 for
//     point-to-point), where bytes is the whole buffer, as nccl-tests counts it; buffers
//     cycle through cold_cache_bytes, so that, as in a training step, they are not in cache.
//
// fit_profile() turns the measurements into the figures a device profile holds: the best
// GEMM rate as the peak, efficiency against size (the cube root of m·n·k), the effective
// element-wise bandwidth, the cost of a launch, the host's costs, and the link's bandwidth and latency as
// one-way point-to-point time = latency + bytes / bandwidth.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exec/device.hpp"

namespace parasim::exec {

// The operand bytes each GEMM shape cycles through, so that it runs with cold caches.
inline constexpr std::size_t cold_cache_bytes = std::size_t{64} << 20;

struct CalibrateOptions {
  // GEMMs are measured in each of these precisions (Device::set_gemm_precision): fp32
  // alone on the CPU backend, which computes every format in fp32; all four on GPUs.
  std::vector<scenario::Dtype> gemm_precisions{scenario::Dtype::fp32};
  bool large_shapes = false;  // GPU-sized grid: hidden 1024 to 12288, squares to 8192
  std::int64_t min_comm_bytes = 1 << 10;
  std::int64_t max_comm_bytes = std::int64_t{256} << 20;
  // Each measurement runs in three rounds lasting this long together (one call each at
  // least); its time is the median round's mean, its spread how far the rounds lie apart.
  double seconds_per_point = 0.02;
  bool quick = false;               // a small GEMM grid and kernel sizes (smoke tests)
  // > 0: the ranks are nodes' (consecutive, this many a node; calibrate --emulated): the
  // link and the collectives are measured between the first rank of each node, the others
  // idle. 0: every rank in every measurement.
  int node_ranks = 0;
};

struct GemmSample {
  int m = 0, n = 0, k = 0;
  scenario::Dtype dtype = scenario::Dtype::fp32;
  double seconds = 0.0;    // one GEMM, mean over the ranks
  std::string form = "NN";  // NN: C = A·B, NT: C = A·Bᵀ, TN: C = Aᵀ·B (B stored n x k, A k x m)
  double spread = 0.0;      // (slowest round - fastest round) / median round, the largest over the ranks
  std::string rejected{};   // why reject_outliers() set it aside; empty: used
  [[nodiscard]] double flops() const { return 2.0 * m * static_cast<double>(n) * k; }
  [[nodiscard]] double rate() const { return flops() / seconds; }
  [[nodiscard]] double size() const;  // cube root of m·n·k
};

struct KernelSample {
  std::string kernel;
  std::int64_t elements = 0;
  double bytes = 0.0;      // moved by one call: what it reads and writes
  double seconds = 0.0;    // one call, mean over the ranks
  double spread = 0.0;
  [[nodiscard]] double bandwidth() const { return bytes / seconds; }
};

struct CommSample {
  std::string op;  // "send/recv", "all-reduce", "reduce-scatter", "all-gather"
  int group = 2;
  double bytes = 0.0;    // the whole buffer
  double seconds = 0.0;  // slowest rank's mean; one-way time for send/recv
  double spread = 0.0;
  std::string rejected{};
  [[nodiscard]] double algbw() const { return bytes / seconds; }
  [[nodiscard]] double busbw() const;
};

// nccl-tests' factor from algorithm to bus bandwidth for `op` on `group` ranks.
double bus_factor(std::string_view op, int group);

struct Calibration {
  std::string backend;
  int ranks = 1;
  std::vector<GemmSample> gemms;
  std::vector<KernelSample> kernels;
  double launch_seconds = 0.0;  // an empty-sized kernel call, back to back: host or device, the slower
  // A device that queues its kernels (multiprocessors() > 0; 0 elsewhere, and the three
  // figures below are not measured):
  int sms = 0;
  double issue_seconds = 0.0;         // host time to issue one tiny kernel (medians over rounds)
  double device_launch_seconds = 0.0;  // device time per tiny kernel queued back to back
  double post_seconds = 0.0;          // host time to post a collective (0: one rank, none)
  std::vector<CommSample> comms;
  // Between nodes on the CPU backend (node_ranks > 0): the share of its core a rank loses
  // to its traffic, per byte/s it sends and per byte/s it receives (CPU seconds per byte:
  // the network stack's work on the rank's cores). 0: not measured.
  double send_cpu_per_byte = 0.0;
  double receive_cpu_per_byte = 0.0;
};

// Told on rank 0 what is being measured and how many of the measurements are done: at each
// new phase, and after each measurement (phase, done, total).
using CalibrateProgress = std::function<void(std::string_view, std::size_t, std::size_t)>;

// Every rank calls it; rank 0's result holds the figures (means and maxima over ranks).
Calibration calibrate(Device& dev, const CalibrateOptions& options, const CalibrateProgress& progress = {});

// Sets aside (GemmSample::rejected, CommSample::rejected, with the reason) what cannot be
// the machine's behaviour, so that one disturbed measurement does not set a figure:
//   * a GEMM whose rate is under a quarter or over four times the median rate of the
//     GEMMs of its dtype within 25 % of its size (its other forms, similar shapes), where
//     there are two such or more;
//   * a message that took more than twice as long as the next larger one of the same
//     collective and group (4 times the bytes), or the largest, more than 16 times as long
//     as the one before it.
// calibrate() calls it; returns how many it set aside.
std::size_t reject_outliers(Calibration& c);

struct ProfileFit {
  std::array<double, topology::dtype_count> peak{};                         // FLOP/s, the best GEMM per dtype; 0: not measured
  std::vector<std::pair<double, double>> efficiency;    // (size, fraction of peak), ascending
  double memory_bandwidth = 0.0;                        // bytes/s over the element-wise kernels
  double optimizer_bandwidth = 0.0;                     // AdamW at 32 bytes per parameter
  double launch_overhead = 0.0;                         // seconds
  // The host's time per kernel and per communication call (the profile's `host`); 0 when
  // the device runs kernels on the calling thread.
  double host_kernel = 0.0;
  double host_communication = 0.0;
  double link_bandwidth = 0.0;                          // bytes/s; 0 when nothing was measured
  double link_latency = 0.0;                            // seconds
  double send_cpu_per_byte = 0.0;                       // Calibration's, as measured
  double receive_cpu_per_byte = 0.0;
  // Every collective measured, as (op, group, bytes, busbw): the profile's curves.
  struct Collective {
    std::string op;
    int group = 2;
    double bytes = 0.0;
    double busbw = 0.0;
  };
  std::vector<Collective> collectives;
};

// Pure: the same measurements give the same fit. Rejected samples take no part.
//   peak: per dtype, the best GEMM rate measured in it;
//   efficiency: each sample's rate over its dtype's peak, binned by half-octaves of size,
//     each bin's median efficiency at the bin's geometric-mean size;
//   memory_bandwidth: the median over the activation kernels at the largest size measured
//     of each one's bytes over its time (one slow kernel does not set every kernel's
//     rate); optimizer_bandwidth: AdamW's parameters at that size times 32 bytes (the
//     Program's count for an fp32 update: 24 + 2·4) over its time;
//   launch_overhead: the device's time per queued tiny kernel where measured (sms > 0),
//     else the back-to-back call; host_kernel and host_communication: the issue and post
//     times (sms > 0; with one rank, posting counts as issuing a kernel);
//   link: bandwidth = the best send/recv algorithm bandwidth at 1 MiB or more (any size
//     when none is that large), latency = the smallest message's time less its bytes over
//     that bandwidth (not below zero);
//   collectives: every all-reduce, reduce-scatter and all-gather sample's busbw, by group
//     and ascending size.
ProfileFit fit_profile(const Calibration& c);

}  // namespace parasim::exec
