#include "report/metrics.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "workload/accounting.hpp"
#include "topology/units.hpp"

namespace parasim::report {

using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

namespace {

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

}  // namespace

int dimension_of(program::Category c) {
  switch (c) {
    case program::Category::tp_comm: return 0;
    case program::Category::pp_comm: return 1;
    case program::Category::dp_comm: return 2;
    case program::Category::cp_comm: return 3;
    case program::Category::ep_comm: return 4;
    case program::Category::offload: return 5;
    case program::Category::bn_comm: return 6;
    default: return -1;
  }
}

std::int64_t union_length(Intervals v) {
  std::int64_t sum = 0;
  for (const auto& [a, b] : merged(std::move(v))) sum += b - a;
  return sum;
}

std::int64_t uncovered_length(Intervals a, Intervals b) {
  const Intervals ma = merged(std::move(a));
  const Intervals mb = merged(std::move(b));
  std::int64_t sum = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : ma) {
    std::int64_t cur = s;
    while (j < mb.size() && mb[j].second <= cur) ++j;
    for (std::size_t k = j; k < mb.size() && mb[k].first < e; ++k) {
      if (mb[k].first > cur) sum += mb[k].first - cur;
      cur = std::max(cur, mb[k].second);
      if (cur >= e) break;
    }
    if (cur < e) sum += e - cur;
  }
  return sum;
}

double model_flops_per_step(const scenario::Scenario& s) {
  if (s.model.kind == scenario::ModelKind::transformer) {
    return workload::step_flops(s.model, s.training.global_batch, scenario::Recompute::none);
  }
  double forward = 0.0;
  for (const auto& l : s.model.generic_layers) forward += l.forward_flops;
  return 3.0 * forward * s.training.global_batch;
}

StepFigures step_figures(const scenario::Scenario& s, const Trace& trace, const topology::Cluster& cluster) {
  StepFigures f;
  f.step_time = trace.step_seconds();
  const double step_ps = static_cast<double>(trace.step_end);
  if (f.step_time > 0.0) {
    f.samples_per_s = s.training.global_batch / f.step_time;
    f.tokens_per_s = f.samples_per_s * s.model.tokens_per_sample();
    f.model_flops = model_flops_per_step(s);
    f.flops_per_device = f.model_flops / f.step_time / trace.world;
    // Against the 16-bit peak under fp8 too, as FP8 training's MFU is usually quoted, so
    // that fp8 and bf16 plans compare on one scale.
    f.mfu = f.flops_per_device / s.cluster.device.peak(topology::storage_dtype(s.training.precision));
  }

  std::vector<Intervals> compute(static_cast<std::size_t>(trace.world));
  std::vector<double> host(static_cast<std::size_t>(trace.world), 0.0);  // seconds on the host's cores (Stream::host)
  double host_mean = 0.0;
  std::vector<std::array<Intervals, dimension_count>> comm(static_cast<std::size_t>(trace.world));
  for (const Span& sp : trace.spans) {
    if (sp.kind == program::OpKind::recv) continue;  // waiting for a send, counted by the send
    if (sp.stream == program::Stream::host) host[static_cast<std::size_t>(sp.rank)] += sp.seconds();
    const int d = dimension_of(sp.category);
    auto& bucket = d < 0 ? compute[static_cast<std::size_t>(sp.rank)] : comm[static_cast<std::size_t>(sp.rank)][static_cast<std::size_t>(d)];
    bucket.emplace_back(sp.start, sp.end);
  }
  for (int r = 0; r < trace.world; ++r) {
    RankFigures rf;
    if (const int m = trace.mirror(r); m != r) {
      // A folded trace: this rank mirrors one of replica 0 (a lower rank, already done).
      rf = f.ranks[static_cast<std::size_t>(m)];
    } else {
      const auto& c = compute[static_cast<std::size_t>(r)];
      rf.compute = static_cast<double>(union_length(c)) * 1e-12;
      Intervals working = c;
      for (int d = 0; d < static_cast<int>(dimension_count); ++d) {
        const auto& iv = comm[static_cast<std::size_t>(r)][static_cast<std::size_t>(d)];
        rf.comm[static_cast<std::size_t>(d)] = static_cast<double>(union_length(iv)) * 1e-12;
        rf.exposed[static_cast<std::size_t>(d)] = static_cast<double>(uncovered_length(iv, c)) * 1e-12;
        if (d != 1) working.insert(working.end(), iv.begin(), iv.end());
      }
      rf.bubble = step_ps > 0 ? (step_ps - static_cast<double>(union_length(working))) / step_ps : 0.0;
    }
    rf.rank = r;
    host_mean += host[static_cast<std::size_t>(trace.mirror(r))] / trace.world;
    for (int d = 0; d < static_cast<int>(dimension_count); ++d) {
      f.comm_mean[static_cast<std::size_t>(d)] += rf.comm[static_cast<std::size_t>(d)] / trace.world;
      f.exposed_mean[static_cast<std::size_t>(d)] += rf.exposed[static_cast<std::size_t>(d)] / trace.world;
    }
    f.bubble_fraction += rf.bubble / trace.world;
    f.ranks.push_back(rf);
  }

  for (const LinkUse& l : trace.links) {
    const topology::Link& link = cluster.link(l.link);
    f.busiest_links.push_back({l.link, cluster.link_name(l.link), std::string(topology::to_string(link.cls)), l.bytes,
                               f.step_time > 0 ? l.bytes / (link.bandwidth * f.step_time) : 0.0});
  }
  std::stable_sort(f.busiest_links.begin(), f.busiest_links.end(),
                   [](const LinkFigure& a, const LinkFigure& b) { return a.utilisation > b.utilisation; });
  if (f.busiest_links.size() > 8) f.busiest_links.resize(8);

  // The bottleneck: what keeps the step from being pure compute. The largest loss among
  // the pipeline bubble and each dimension's exposed communication is named when it costs
  // at least 5 % of the step; otherwise the step is compute-bound.
  const double compute_mean = [&] {
    double sum = 0.0;
    for (const auto& r : f.ranks) sum += r.compute;
    return f.ranks.empty() ? 0.0 : sum / static_cast<double>(f.ranks.size());
  }();
  if (!f.ranks.empty()) {
    std::vector<double> computes;
    for (const auto& r : f.ranks) computes.push_back(r.compute);
    const auto slowest = std::max_element(computes.begin(), computes.end());
    f.slowest_rank = static_cast<int>(slowest - computes.begin());
    f.slowest_compute = *slowest;
    std::nth_element(computes.begin(), computes.begin() + static_cast<std::ptrdiff_t>(computes.size() / 2), computes.end());
    f.median_compute = computes[computes.size() / 2];
  }
  struct Candidate {
    double seconds;
    std::string what;
    std::string kind;
    LinkFigure link;
  };
  // For each dimension, the link its own traffic loads most (by that traffic's bytes over
  // the link's capacity in the step), with the link's whole utilisation.
  auto busiest_for = [&](int d) {
    const LinkUse* best = nullptr;
    double best_share = 0.0;
    for (const LinkUse& l : trace.links) {
      const double share = l.by_dimension[static_cast<std::size_t>(d)] / cluster.link(l.link).bandwidth;
      if (share > best_share) {
        best = &l;
        best_share = share;
      }
    }
    LinkFigure out;
    if (best == nullptr) return out;
    const topology::Link& link = cluster.link(best->link);
    out.link = best->link;
    out.name = cluster.link_name(best->link);
    out.cls = std::string(topology::to_string(link.cls));
    out.bytes = best->bytes;
    out.utilisation = f.step_time > 0 ? best->bytes / (link.bandwidth * f.step_time) : 0.0;
    return out;
  };
  auto dimension = [&](int d, const char* kind, const char* what) {
    Candidate c{f.exposed_mean[static_cast<std::size_t>(d)], what, kind, busiest_for(d)};
    if (c.link.link >= 0) {
      c.what += fmt::format("; busiest link {} at {:.0f} % ({})", c.link.name, 100 * c.link.utilisation, c.link.cls);
    }
    return c;
  };
  // A degraded device: the others wait for what it computes beyond the median rank (and,
  // without stages, that is what their idle time is).
  const double speed = f.slowest_rank >= 0 ? s.cluster.compute_factor(f.slowest_rank) : 1.0;
  const double idle = f.bubble_fraction * f.step_time;
  std::vector<Candidate> c{
      // Without stages, idle devices wait on nothing but the host issuing their kernels, or
      // on a uniform cluster with jitter, the slowest rank of each synchronised op.
      {s.plan.pp > 1 || speed == 1.0 ? idle : 0.0,
       s.plan.pp > 1                       ? "pipeline bubble: stages wait for each other"
       : s.cluster.jitter.sigma > 0.0      ? "idle: the ranks wait for the slowest of each synchronised op (cluster.jitter)"
                                           : "idle: the devices wait for the host to issue their kernels",
       s.plan.pp > 1 ? "bubble" : s.cluster.jitter.sigma > 0.0 ? "jitter" : "idle", {}},
      dimension(0, "tp", "exposed tensor-parallel communication"),
      dimension(1, "pp", "exposed pipeline transfers"),
      dimension(2, "dp", "exposed data-parallel gradient synchronisation"),
      dimension(3, "cp", "exposed context-parallel key/value exchange"),
      dimension(4, "ep", "exposed expert-parallel token all-to-all"),
      dimension(5, "offload", "exposed offload copies between the devices and host memory"),
      dimension(6, "syncbn", "exposed SyncBatchNorm exchange: each BatchNorm layer's statistics gathered forward and "
                             "its gradient sums summed backward over dp, blocking the layer"),
      {host_mean, "the optimizer step on the hosts' cores (offloaded: bound by host memory bandwidth)", "host_optimizer", {}},
  };
  if (speed < 1.0) {
    c.push_back({std::max(f.slowest_compute - f.median_compute, s.plan.pp > 1 ? 0.0 : idle),
                 fmt::format("waiting for a straggler: rank {} computes at {:.2g}x its speed (cluster.degraded), {} "
                             "against the median rank's {}",
                             f.slowest_rank, speed, units::format_duration(f.slowest_compute),
                             units::format_duration(f.median_compute)),
                 "straggler", {}});
  }
  const auto top = std::max_element(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  const double share = f.step_time > 0 ? top->seconds / f.step_time : 0.0;
  if (share >= 0.05) {
    f.bottleneck = fmt::format("{:.0f} % of the step is {}", 100 * share, top->what);
    f.limit = {top->kind, share, top->link};
  } else {
    const double computing = f.step_time > 0 ? compute_mean / f.step_time : 0.0;
    // Busy devices far from their peak run small kernels: launches, ramps and memory
    // latency, not FLOPs, set their time.
    if (f.mfu < 0.1) {
      f.bottleneck = fmt::format("launch / latency-bound: the devices compute {:.0f} % of the step at {:.1f} % of their "
                                 "peak (small kernels: launches and memory latency, not FLOPs, set their time)",
                                 100 * computing, 100 * f.mfu);
      f.limit = {"latency", computing, {}};
    } else {
      f.bottleneck = fmt::format("compute-bound: the devices compute {:.0f} % of the step", 100 * computing);
      f.limit = {"compute", computing, {}};
    }
  }
  return f;
}

}  // namespace parasim::report
