#include "sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "report/metrics.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/memory_counter.hpp"
#include "sim/mpi_ranks.hpp"
#include "sim/rank_compute.hpp"
#include "sim/network.hpp"

namespace parasim::sim {
namespace {

using program::Op;
using program::OpKind;
using program::Stream;

// A compute op's jitter: exp(sigma z - sigma^2 / 2), z a standard normal drawn from (seed,
// op) alone (splitmix64 and Box-Muller), so that the order events run in does not matter.
double jitter(const topology::JitterSpec& j, std::int64_t op) {
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  const std::uint64_t a = mix(j.seed * 0x100000001b3ULL ^ static_cast<std::uint64_t>(op));
  const std::uint64_t b = mix(a);
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;  // (0, 1)
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return std::exp(j.sigma * z - 0.5 * j.sigma * j.sigma);
}

class Runner {
 public:
  Runner(const scenario::Scenario& s, const program::Program& prog, const DeviceProfile& profile,
         const SimOptions& options)
      : s_(s),
        prog_(prog),
        profile_(profile),
        cluster_(with_profile_links(s.cluster, profile)),
        net_(engine_, cluster_),
        counters_(options.counters),
        progress_(options.progress),
        sink_(options.spans) {
    const std::size_t n = prog.ops.size();
    waiting_.resize(n);
    done_.assign(n, 0);
    started_.assign(n, 0);
    start_time_.assign(n, 0);
    // Dependents in CSR form.
    std::vector<std::uint32_t> count(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      waiting_[i] = prog.ops[i].deps_count;
      for (std::int64_t d : prog.deps_of(static_cast<std::int64_t>(i))) ++count[static_cast<std::size_t>(d) + 1];
    }
    for (std::size_t i = 0; i < n; ++i) count[i + 1] += count[i];
    dependents_begin_ = count;
    dependents_.resize(prog.deps.size());
    for (std::size_t i = 0; i < n; ++i) {
      for (std::int64_t d : prog.deps_of(static_cast<std::int64_t>(i))) {
        dependents_[count[static_cast<std::size_t>(d)]++] = static_cast<std::int64_t>(i);
      }
    }
    // Lanes: per rank and stream, op ids in program order.
    // Partners, resolved once: a send's receive, a collective op's instance.
    lanes_.resize(prog.order.size() * program::stream_count);
    cursor_.assign(lanes_.size(), 0);
    draining_.assign(lanes_.size(), 0);
    partner_.assign(n, -1);
    arrived_.assign(n, 0);
    std::unordered_map<std::int64_t, std::int64_t> by_match;
    by_match.reserve(static_cast<std::size_t>(prog.collectives + prog.transfers));
    for (std::size_t r = 0; r < prog.order.size(); ++r) {
      for (std::int64_t id : prog.order[r]) {
        const Op& o = prog.ops[static_cast<std::size_t>(id)];
        lanes_[lane_of(o)].push_back(id);
        if (o.kind == OpKind::collective) {
          auto [it, fresh] = by_match.try_emplace(o.match, static_cast<std::int64_t>(instances_.size()));
          if (fresh) instances_.emplace_back();
          instances_[static_cast<std::size_t>(it->second)].push_back(id);
          partner_[static_cast<std::size_t>(id)] = it->second;
        }
      }
    }
    by_match.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (prog.ops[i].kind == OpKind::recv) by_match.emplace(prog.ops[i].match, static_cast<std::int64_t>(i));
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (prog.ops[i].kind != OpKind::send) continue;
      auto it = by_match.find(prog.ops[i].match);
      if (it == by_match.end())
        throw std::logic_error("a send without its receive: " + program::op_name(prog, static_cast<std::int64_t>(i)));
      partner_[i] = it->second;
    }
    if (prog.world > cluster_.gpu_count()) throw std::invalid_argument("the program has more ranks than the cluster");
    // MPI between nodes: one connection per pair of ranks, in order.
    if (s.cluster.library == topology::CollectiveLibrary::mpi) net_.order_between_nodes();
    // CPU ranks over TCP: their traffic between nodes takes their cores' time.
    const bool cpu_charged = s.cluster.library == topology::CollectiveLibrary::mpi &&
                             (profile.send_cpu_per_byte > 0.0 || profile.receive_cpu_per_byte > 0.0);
    // GPUs under NCCL: a running collective's channels hold SMs, and the rank's compute
    // runs on the rest meanwhile (KernelSpec::collective_sms).
    if (s.cluster.library == topology::CollectiveLibrary::nccl && profile.kernel_model() &&
        profile.kernels.collective_sms > 0) {
      hold_.emplace(profile.kernels.sms, cluster_.gpu_count());
      nccl_sms_ = profile.kernels.collective_sms;
    }
    if (cpu_charged || hold_) {
      compute_.emplace(
          engine_, cluster_.gpu_count(),
          [this](int rank) { return std::max(0.1, (hold_ ? hold_->speed(rank) : 1.0) - net_.cpu_load(rank)); },
          [this](std::int64_t id) { complete(id); });
    }
    if (cpu_charged) {
      net_.charge_cpu(profile.send_cpu_per_byte, profile.receive_cpu_per_byte, [this](int d) { compute_->load_changed(d); });
    }
    if (prog.one_replica()) fold(options.approximate);
    for (int r = 0; r < prog.world; ++r) speed_.push_back(s.cluster.compute_factor(r));
    if (counters_) start_counters();
    host_model_ = profile.host.forward > 0.0 || profile.host.backward > 0.0 || profile.host.communication > 0.0;
    if (host_model_) {
      issue_.assign(n, -1);
      durations_.resize(prog.kernel_sets.size());
      retry_.assign(n, 0);
      host_.resize(prog.order.size());
    }
  }

  // A one-replica Program: the network folds the other replicas onto replica 0 and learns,
  // before the first transfer, every flow the step will start (network.hpp).
  void fold(bool approximate) {
    if (!s_.cluster.uniform()) throw NotFoldable("the cluster is not uniform (cluster.degraded or cluster.jitter)");
    // Hybrid sharding's groups are parts of the dp lines: replica 0's shard group holds
    // other replicas' ranks, and no shift maps the groups onto one another.
    if (s_.plan.hybrid_shard()) throw NotFoldable("hybrid sharding's groups differ from replica to replica");
    Replicas r;
    r.count = s_.plan.dp;
    r.next.resize(static_cast<std::size_t>(prog_.world));
    r.represented.resize(static_cast<std::size_t>(prog_.world));
    for (int rank = 0; rank < prog_.world; ++rank) {
      scenario::Coord c = scenario::coord_of(s_.plan, rank);
      r.represented[static_cast<std::size_t>(rank)] = c.dp == 0 ? 1 : 0;
      c.dp = (c.dp + 1) % s_.plan.dp;
      r.next[static_cast<std::size_t>(rank)] = scenario::rank_of(s_.plan, c);
    }
    net_.fold(std::move(r));
    std::vector<FlowEnds> ends;
    for (const Op& o : prog_.ops) {
      if (o.kind == OpKind::send) ends.push_back({o.rank, o.peer, -1});
      if (o.kind == OpKind::copy) ends.push_back(o.to_host ? FlowEnds{o.rank, host_end, -1} : FlowEnds{host_end, o.rank, -1});
    }
    for (const auto& members : instances_) {
      const Op& o = prog_.ops[static_cast<std::size_t>(members.front())];
      const CollectiveCall call = call_of(o);
      const Algorithm a = algorithms_.get(s_.plan.collective, net_, call, o.group, false).algorithm;
      if (!symmetric(a, net_, call) && spans_replicas(net_, call)) net_.mark_approximate();
      const auto fe = flow_ends(a, net_, call);
      ends.insert(ends.end(), fe.begin(), fe.end());
    }
    std::sort(ends.begin(), ends.end(), [](const FlowEnds& a, const FlowEnds& b) {
      return std::tie(a.src, a.dst, a.link) < std::tie(b.src, b.dst, b.link);
    });
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    net_.prepare_fold(ends);
    if (!net_.exact() && !approximate) throw NotFoldable("the replicas are not exactly symmetric on this topology");
  }

  report::Trace run(SimStats* stats) {
    if (host_model_) {
      for (std::size_t r = 0; r < prog_.order.size(); ++r) advance_host(r);
    }
    for (std::size_t r = 0; r < prog_.order.size(); ++r) {
      for (std::int64_t id : prog_.order[r]) {
        const Op& o = prog_.ops[static_cast<std::size_t>(id)];
        if (o.stream == Stream::pp) try_start(id);
      }
    }
    for (std::size_t lane = 0; lane < lanes_.size(); ++lane) try_lane(lane);
    engine_.run();

    report::Trace t;
    t.kind = "predicted";
    t.world = prog_.world;
    t.mirror_of = prog_.mirror_of;
    for (std::size_t i = 0; i < prog_.ops.size(); ++i) {
      if (!done_[i]) throw std::logic_error("simulation ended with ops not run: the program deadlocks");
    }
    if (sink_) send_spans(true);
    t.spans = std::move(spans_);
    for (const report::Span& sp : t.spans) t.step_end = std::max(t.step_end, sp.end);
    for (int l = 0; l < cluster_.link_count(); ++l) {
      if (net_.bytes_carried(l) > 0.0) {
        t.links.push_back({l, net_.bytes_carried(l),
                           {net_.bytes_carried(l, 0), net_.bytes_carried(l, 1), net_.bytes_carried(l, 2), net_.bytes_carried(l, 3),
                            net_.bytes_carried(l, 4), net_.bytes_carried(l, 5), net_.bytes_carried(l, 6)}});
      }
    }
    if (counters_) finish_counters(t);
    if (stats != nullptr) {
      stats->events = engine_.events_fired();
      stats->flows = net_.flows_started();
      stats->ops = prog_.ops.size();
      stats->replicas = net_.replica_count();
      stats->exact = net_.exact();
      stats->algorithms = algorithms_.uses();
      stats->protocols = algorithms_.protocol_uses();
    }
    return t;
  }

 private:
  static std::size_t lane_of(const Op& o) {
    return static_cast<std::size_t>(o.rank) * program::stream_count + static_cast<std::size_t>(o.stream);
  }

  // The next op of its lane: serial streams advance when an op completes, the pp stream
  // when one is posted (it starts).
  bool at_head(std::int64_t id) const {
    const std::size_t lane = lane_of(prog_.ops[static_cast<std::size_t>(id)]);
    return cursor_[lane] < lanes_[lane].size() && lanes_[lane][cursor_[lane]] == id;
  }

  bool ready(std::int64_t id) const {
    return !started_[static_cast<std::size_t>(id)] && waiting_[static_cast<std::size_t>(id)] == 0 && at_head(id) &&
           issued(id);
  }

  // --- the host (profiles with host costs) ---------------------------------------------
  // Each rank's host issues its ops in program order, spending the profile's dispatch time
  // per kernel (compute ops) or per call (communication), and stops after an op marked
  // host_sync until that op completes, and before one marked host_waits until its
  // dependencies have. An op cannot start before it is issued; a compute
  // op's later kernels are issued while it runs (compute_model.hpp).
  struct Host {
    std::int64_t clock = 0;   // ps: when the host is free to issue the next op
    std::size_t cursor = 0;   // next op of the rank's order to issue
    std::int64_t waiting_for = -1;  // a host_sync op not yet complete
  };

  bool issued(std::int64_t id) const {
    return !host_model_ || (issue_[static_cast<std::size_t>(id)] >= 0 &&
                            issue_[static_cast<std::size_t>(id)] <= engine_.now().picoseconds());
  }

  std::int64_t dispatch_ps(const Op& o) const {
    if (o.kind != OpKind::compute && o.piece != program::LayerPiece::whole) return 0;  // the overlap's (host_issued)
    return Time::seconds(o.kind == OpKind::compute ? dispatch_seconds(profile_, o.category) : profile_.host.communication)
        .picoseconds();
  }

  void advance_host(std::size_t rank) {
    Host& h = host_[rank];
    const auto& order = prog_.order[rank];
    std::vector<std::int64_t> fresh;
    while (h.cursor < order.size()) {
      if (h.waiting_for >= 0) {
        if (!done_[static_cast<std::size_t>(h.waiting_for)]) break;
        h.waiting_for = -1;
        h.clock = std::max(h.clock, engine_.now().picoseconds());
      }
      const std::int64_t id = order[h.cursor];
      const Op& o = prog_.ops[static_cast<std::size_t>(id)];
      if (o.host_waits) {
        const auto deps = prog_.deps_of(id);
        const auto pending =
            std::find_if(deps.begin(), deps.end(), [&](std::int64_t d) { return !done_[static_cast<std::size_t>(d)]; });
        if (pending != deps.end()) {
          h.waiting_for = *pending;
          break;
        }
      }
      ++h.cursor;
      // A compute op costs a dispatch per kernel (none without kernels: a generic model's
      // empty embedding step), a communication op one call.
      std::int64_t count = 1;
      if (o.kind == OpKind::compute) {
        count = o.kernels >= 0 ? static_cast<std::int64_t>(
                                     host_issued(o, prog_.kernel_sets[static_cast<std::size_t>(o.kernels)].size()))
                               : 0;
      }
      const std::int64_t each = dispatch_ps(o);
      issue_[static_cast<std::size_t>(id)] = h.clock + (count > 0 ? each : 0);
      h.clock += each * count;
      if (o.host_sync) h.waiting_for = id;
      fresh.push_back(id);
    }
    for (std::int64_t id : fresh) try_start(id);
  }

  // How many times longer than nominal a device compute op takes: its device's degradation
  // and the op's jitter (cluster.degraded, cluster.jitter).
  double slowdown(const Op& o, std::int64_t id) const {
    if (s_.cluster.uniform()) return 1.0;
    const double slow = 1.0 / speed_[static_cast<std::size_t>(o.rank)];
    return s_.cluster.jitter.sigma > 0.0 ? slow * jitter(s_.cluster.jitter, id) : slow;
  }

  // Each kernel set's device times, worked out once: a step runs each set many times.
  const std::vector<double>& durations(int set) {
    auto& d = durations_[static_cast<std::size_t>(set)];
    if (d.empty()) d = kernel_durations(profile_, prog_.kernel_sets[static_cast<std::size_t>(set)], s_.training.precision);
    return d;
  }

  // Tries `id` again when it is issued, if that is later.
  void retry_when_issued(std::int64_t id) {
    const auto i = static_cast<std::size_t>(id);
    const std::int64_t now = engine_.now().picoseconds();
    if (!host_model_ || issue_[i] <= now || retry_[i]) return;
    retry_[i] = 1;
    engine_.after(Time::ps(issue_[i] - now), [this, id] { try_start(id); });
  }

  void try_lane(std::size_t lane) {
    if (lane % program::stream_count != static_cast<std::size_t>(Stream::pp)) {
      if (cursor_[lane] < lanes_[lane].size()) try_start(lanes_[lane][cursor_[lane]]);
      return;
    }
    // The pp stream posts every op in turn that is ready (once, if a start reaches here again).
    if (draining_[lane] != 0) return;
    draining_[lane] = 1;
    while (cursor_[lane] < lanes_[lane].size()) {
      const std::int64_t id = lanes_[lane][cursor_[lane]];
      try_start(id);
      if (started_[static_cast<std::size_t>(id)] == 0) break;
    }
    draining_[lane] = 0;
  }

  void try_start(std::int64_t id) {
    if (!issued(id)) {
      retry_when_issued(id);
      return;
    }
    if (!ready(id)) return;
    const Op& o = prog_.ops[static_cast<std::size_t>(id)];
    switch (o.kind) {
      case OpKind::compute: {
        mark_started(id);
        if (counters_) memory_->on_start(o, engine_.now().picoseconds());
        double secs = 0.0;
        if (o.stream == Stream::host) {
          secs = host_seconds(s_, o);  // the offloaded optimizer, on the host's cores
        } else if (host_model_ && profile_.kernel_model() && o.kernels >= 0) {
          // The first kernel is issued (now or earlier); the rest follow at the host's pace.
          const double first = Time::ps(issue_[static_cast<std::size_t>(id)] - engine_.now().picoseconds()).to_seconds();
          const auto& d = durations(o.kernels);
          secs = kernels_seconds(d, first, op_dispatch_seconds(profile_, o, d.size()), slowdown(o, id));
        } else {
          secs = compute_seconds(profile_, prog_, o, s_.training.precision) * slowdown(o, id);
        }
        if (compute_ && o.stream == Stream::compute) {
          compute_->start(o.rank, id, secs);
        } else {
          engine_.after(Time::seconds(secs), [this, id] { complete(id); });
        }
        break;
      }
      case OpKind::recv:
        // Completes when its send's data arrives; a rendezvous send moves from now.
        mark_started(id);
        if (arrived_[static_cast<std::size_t>(id)] != 0) complete(id);
        if (const std::int64_t send = partner_[static_cast<std::size_t>(id)]; send >= 0) transfer(send);
        try_lane(lane_of(o));
        break;
      case OpKind::send: {
        mark_started(id);
        const std::int64_t recv = partner_[static_cast<std::size_t>(id)];
        if (!rendezvous(cluster_, o) || started_[static_cast<std::size_t>(recv)]) {
          transfer(id);
        } else {
          partner_[static_cast<std::size_t>(recv)] = id;  // the receive starts it
        }
        try_lane(lane_of(o));
        break;
      }
      case OpKind::copy:
        mark_started(id);
        net_.transfer_host(o.rank, o.to_host, o.bytes, [this, id] { complete(id); }, report::dimension_of(o.category));
        break;
      case OpKind::collective: {
        const std::int64_t instance = partner_[static_cast<std::size_t>(id)];
        const auto& members = instances_[static_cast<std::size_t>(instance)];
        for (std::int64_t m : members) {
          if (!ready(m)) {
            retry_when_issued(m);
            return;
          }
        }
        for (std::int64_t m : members) mark_started(m);
        collectives_changed(instance, +1);
        run_collective(o, [this, instance] {
          collectives_changed(instance, -1);
          for (std::int64_t m : instances_[static_cast<std::size_t>(instance)]) complete(m);
        });
        break;
      }
    }
  }

  // A collective instance started (+1) or ended (-1): its ranks' compute slows while any
  // runs (hold_).
  void collectives_changed(std::int64_t instance, int delta) {
    if (!hold_) return;
    for (std::int64_t m : instances_[static_cast<std::size_t>(instance)]) {
      const Op& o = prog_.ops[static_cast<std::size_t>(m)];
      if (hold_->change(o.rank, held_sms(o, nccl_sms_), delta)) compute_->load_changed(o.rank);
    }
  }

  void mark_started(std::int64_t id) {
    started_[static_cast<std::size_t>(id)] = 1;
    start_time_[static_cast<std::size_t>(id)] = engine_.now().picoseconds();
    const Op& o = prog_.ops[static_cast<std::size_t>(id)];
    if (o.stream == Stream::pp) ++cursor_[lane_of(o)];  // posted: the next may be
  }

  // A send's data on its way; at its arrival the send completes, and its receive (now, or
  // when posted).
  void transfer(std::int64_t send) {
    const Op& o = prog_.ops[static_cast<std::size_t>(send)];
    net_.transfer(o.rank, o.peer, o.bytes, [this, send] {
      complete(send);
      const std::int64_t recv = partner_[static_cast<std::size_t>(send)];
      if (started_[static_cast<std::size_t>(recv)]) {
        complete(recv);
      } else {
        arrived_[static_cast<std::size_t>(recv)] = 1;
      }
    }, report::dimension_of(o.category));
  }

  // Every member of the op's group (in a one-replica Program, the members of the other
  // replicas too: they are ready when replica 0's member is).
  CollectiveCall call_of(const Op& o) const {
    return {o.collective, prog_.groups[static_cast<std::size_t>(o.group)].ranks, o.bytes,
            report::dimension_of(o.category)};
  }

  void run_collective(const Op& o, std::function<void()> done) {
    CollectiveCall call = call_of(o);
    if (s_.cluster.library == topology::CollectiveLibrary::mpi) {
      // libnbc's algorithm, its flows' bytes scaled to the measured time where a profile
      // has one (compute_model.hpp).
      const Choice& choice = algorithms_.get(s_.plan.collective, net_, call, o.group);
      scale_to_measured(profile_, choice.algorithm, net_, call);
      sim::run_collective(net_, choice, std::move(call), std::move(done));
      return;
    }
    // Inside one node (or with one rank on each node) a measured profile's collective rate
    // replaces the link's: the flows carry the bytes that take the measured time at the
    // link's bandwidth.
    call.bytes *= measured_slowdown(profile_, cluster_, o.collective, call.devices, call.bytes);
    const Choice& choice = algorithms_.get(s_.plan.collective, net_, call, o.group);
    sim::run_collective(net_, choice, std::move(call), std::move(done));
  }

  void complete(std::int64_t id) {
    const auto i = static_cast<std::size_t>(id);
    if (done_[i]) return;
    done_[i] = 1;
    const Op& o = prog_.ops[i];
    if (counters_ && o.kind == OpKind::compute) memory_->on_end(o, engine_.now().picoseconds());
    spans_.push_back(report::Span{o.rank, o.stream, o.category, o.kind, o.micro_batch, id, start_time_[i],
                                  engine_.now().picoseconds()});
    if (progress_ && spans_.size() % 4096 == 0) progress_(spans_.size(), prog_.ops.size());
    if (sink_ && spans_.size() - sent_ == span_block) send_spans(false);
    if (o.stream != Stream::pp) {
      const std::size_t lane = lane_of(o);
      ++cursor_[lane];
      try_lane(lane);
    }
    for (std::uint32_t k = dependents_begin_[i]; k < dependents_begin_[i + 1]; ++k) {
      const std::int64_t d = dependents_[k];
      if (--waiting_[static_cast<std::size_t>(d)] == 0) try_start(d);
    }
    if (host_model_ && host_[static_cast<std::size_t>(o.rank)].waiting_for == id) advance_host(static_cast<std::size_t>(o.rank));
  }

  void start_counters() {
    net_.record_rates();
    memory_.emplace(s_, prog_);
  }

  void finish_counters(report::Trace& t) {
    for (int r = 0; r < prog_.world; ++r) {
      if (prog_.one_replica() && prog_.mirror_of[static_cast<std::size_t>(r)] != r) continue;
      t.counters.push_back({"memory", r, -1, memory_->take(r)});
    }
    std::vector<report::LinkUse> busiest = t.links;
    std::stable_sort(busiest.begin(), busiest.end(), [this](const report::LinkUse& a, const report::LinkUse& b) {
      return a.bytes / cluster_.link(a.link).bandwidth > b.bytes / cluster_.link(b.link).bandwidth;
    });
    if (busiest.size() > busiest_links_counted) busiest.resize(busiest_links_counted);
    for (const report::LinkUse& l : busiest) t.counters.push_back({cluster_.link_name(l.link), -1, l.link, net_.utilisation(l.link)});
  }

  static constexpr std::size_t busiest_links_counted = 16;

  const scenario::Scenario& s_;
  const program::Program& prog_;
  const DeviceProfile& profile_;
  topology::Cluster cluster_;
  Engine engine_;
  Network net_;
  std::vector<std::uint32_t> waiting_;
  std::vector<char> done_;
  std::vector<char> started_;
  std::vector<std::int64_t> start_time_;
  std::vector<std::uint32_t> dependents_begin_;
  std::vector<std::int64_t> dependents_;
  std::vector<std::vector<std::int64_t>> lanes_;
  std::vector<std::size_t> cursor_;
  std::vector<char> draining_;  // a pp lane whose ready ops are being posted
  std::vector<std::int64_t> partner_;  // send: its recv; recv: a rendezvous send waiting for it; collective op: its instance
  std::vector<std::vector<std::int64_t>> instances_;  // member ops of each collective instance
  std::vector<char> arrived_;                         // recv: its data is here
  bool host_model_ = false;
  std::vector<Host> host_;               // per rank
  std::vector<std::int64_t> issue_;      // per op: when the host issues it (ps), -1 not yet
  std::vector<char> retry_;              // per op: a retry at its issue time is scheduled
  std::vector<std::vector<double>> durations_;  // per kernel set
  std::vector<report::Span> spans_;
  AlgorithmCache algorithms_;
  bool counters_ = false;
  SimProgress progress_;
  SpanSink sink_;
  std::vector<double> speed_;  // per rank: the share of its speed it computes at (cluster.degraded)
  std::optional<RankCompute> compute_;     // when the network takes the ranks' CPU time, or collectives their SMs
  std::optional<CollectiveHold> hold_;     // GPUs under NCCL whose collectives hold SMs
  int nccl_sms_ = 0;                       // the SMs one NCCL collective holds (its channels)
  std::size_t sent_ = 0;  // spans handed to sink_
  static constexpr std::size_t span_block = 1 << 15;

  void send_spans(bool last) {
    sink_(prog_, std::span<const report::Span>(spans_).subspan(sent_), last);
    sent_ = spans_.size();
  }
  std::optional<MemoryCounter> memory_;  // with counters
};

}  // namespace

report::Trace simulate(const scenario::Scenario& s, const program::Program& program, const DeviceProfile& profile,
                       SimStats* stats, const SimOptions& options) {
  return Runner(s, program, profile, options).run(stats);
}

report::Trace simulate(const scenario::Scenario& s, const program::Program& program, const DeviceProfile& profile,
                       SimStats* stats, bool counters) {
  return simulate(s, program, profile, stats, SimOptions{counters, true, {}, {}});
}

DeviceProfile profile_of(const scenario::Scenario& s) {
  return s.hardware.profile.empty() ? default_profile(s.cluster.device) : load_profile(s.hardware.profile, s.cluster.device);
}

report::Trace simulate(const scenario::Scenario& s, const program::Program& program, SimStats* stats, bool counters) {
  return simulate(s, program, profile_of(s), stats, SimOptions{counters, true, {}, {}});
}

}  // namespace parasim::sim
