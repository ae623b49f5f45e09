#include "exec/execute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "exec/runner.hpp"
#include "scenario/placement.hpp"
#include "exec/shard.hpp"
#include "exec/watchdog.hpp"

namespace parasim::exec {

namespace {

// A span as it travels to rank 0.
struct WireSpan {
  std::int64_t op;
  std::int64_t start_ns;
  std::int64_t end_ns;
  double memory;
};

}  // namespace

std::string divergence(const StepRecord& r, const std::vector<double>& earlier_losses, double factor) {
  const int step = r.index + 1;  // as run prints it, warm-up steps included
  const std::string who = r.largest_rank >= 0 ? fmt::format(" (rank {}'s gradients are the largest)", r.largest_rank) : "";
  if (!std::isfinite(r.loss)) return fmt::format("step {}: the loss is {}{}", step, r.loss, r.largest_rank >= 0 ? who : " (on every rank)");
  if (!r.skipped && !std::isfinite(r.grad_norm)) {
    return fmt::format("step {}: the gradient norm is {}{}", step, r.grad_norm,
                       r.largest_rank >= 0 ? fmt::format(" (non-finite on rank {})", r.largest_rank) : " (on every rank)");
  }
  if (earlier_losses.empty()) return "";
  std::vector<double> last(earlier_losses.end() - static_cast<std::ptrdiff_t>(std::min<std::size_t>(10, earlier_losses.size())),
                           earlier_losses.end());
  std::nth_element(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(last.size() / 2), last.end());
  const double median = last[last.size() / 2];
  if (median > 0.0 && r.loss > factor * median) {
    return fmt::format("step {}: the loss {:.4g} is {:.3g} times the median of the last {} steps' ({:.4g}){}", step, r.loss,
                       r.loss / median, std::min<std::size_t>(10, earlier_losses.size()), median, who);
  }
  return "";
}

Measurement execute(const scenario::Scenario& s, Device& dev, const RunOptions& options) {
  if (dev.world() != s.plan.world()) {
    throw std::invalid_argument(fmt::format("the plan needs {} ranks (dp {} x tp {} x pp {}); the job has {}",
                                            s.plan.world(), s.plan.dp, s.plan.tp, s.plan.pp, dev.world()));
  }
  Measurement m;
  m.program = program::compile(s);
  const program::Program& prog = m.program;
  const std::unique_ptr<Shard> shard_ptr = make_shard(dev, s, dev.rank());
  Shard& shard = *shard_ptr;
  Runner runner(dev, s, prog, shard, options.stall_seconds);

  m.model_note = model_description(s);
  std::vector<StepTiming> kept;  // measured steps
  std::vector<std::pair<std::int64_t, std::int64_t>> bounds;  // global start, end per measured step
  const int total = options.warmup + options.steps;
  watchdog::phase("clock alignment");
  dev.align_clock();
  dev.reset_peak();
  for (int i = 0; i < total; ++i) {
    watchdog::phase("step", i);
    if (dev.rank() == options.fault_rank && i == options.fault_step) {
      if (options.fault_kind == "exit") std::_Exit(3);
      throw std::runtime_error(fmt::format("injected fault at step {}", i));
    }
    StepTiming t = runner.step(i);
    watchdog::phase("between steps", i);
    std::vector<double> ext{-static_cast<double>(t.start_ns), static_cast<double>(t.end_ns)};
    dev.max_to_all(ext);
    std::vector<double> sums{shard.loss_sum(), shard.loss_tokens(), t.flops};
    dev.sum_to_all(sums);
    StepRecord r;
    r.index = i;
    r.warmup = i < options.warmup;
    r.seconds = (ext[1] + ext[0]) * 1e-9;
    r.loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    r.flops = sums[2];
    r.skipped = shard.last_step_skipped();
    r.loss_scale = shard.loss_scale();
    r.grad_norm = shard.grad_norm();
    r.clip = shard.clip_factor();
    r.learning_rate = scenario::learning_rate_at(s.training, std::max(0, shard.optimizer_steps() - 1));
    {
      // Each rank's share of the squared norm: the largest (a non-finite one first) names
      // the rank a diverging step comes from.
      std::vector<double> shares(static_cast<std::size_t>(dev.world()), 0.0);
      const double mine = shard.source_grad_norm2();
      shares[static_cast<std::size_t>(dev.rank())] = std::isfinite(mine) ? mine : -1.0;
      dev.sum_to_all(shares);
      const auto bad = std::find(shares.begin(), shares.end(), -1.0);
      r.largest_rank = static_cast<int>((bad != shares.end() ? bad : std::max_element(shares.begin(), shares.end())) - shares.begin());
      if (std::count(shares.begin(), shares.end(), -1.0) == dev.world() && dev.world() > 1) r.largest_rank = -1;  // all
      // Against its data-parallel peers (same tp and pp coordinates): how far its norm
      // stands out from theirs.
      if (r.largest_rank >= 0 && bad == shares.end()) {
        const scenario::Coord at = scenario::coord_of(s.plan, r.largest_rank);
        std::vector<double> peers;
        for (int q = 0; q < dev.world(); ++q) {
          const scenario::Coord c = scenario::coord_of(s.plan, q);
          if (q != r.largest_rank && c.tp == at.tp && c.pp == at.pp) peers.push_back(shares[static_cast<std::size_t>(q)]);
        }
        if (!peers.empty()) {
          std::nth_element(peers.begin(), peers.begin() + static_cast<std::ptrdiff_t>(peers.size() / 2), peers.end());
          const double median = peers[peers.size() / 2];
          if (median > 0.0) r.largest_ratio = std::sqrt(shares[static_cast<std::size_t>(r.largest_rank)] / median);
        }
      }
    }
    if (s.run.on_divergence != scenario::OnDivergence::ignore) {
      std::vector<double> earlier;
      for (const StepRecord& e : m.steps) earlier.push_back(e.loss);
      r.divergence = divergence(r, earlier, s.run.divergence_factor);
    }
    m.steps.push_back(r);
    if (!r.divergence.empty() && s.run.on_divergence == scenario::OnDivergence::stop) {
      if (dev.rank() == 0 && options.on_step) options.on_step(r);
      throw Diverged("training diverged at " + r.divergence);
    }
    if (s.model.moe() && s.plan.ep > 1 && !r.warmup) {
      // Each exchange waits for its busiest rank: per layer and micro-batch, the most rows
      // any holder of the layer computed over their mean.
      std::vector<double> busiest = shard.expert_rows(), all = shard.expert_rows();
      dev.max_to_all(busiest);
      dev.sum_to_all(all);
      const double holders = static_cast<double>(dev.world()) / s.plan.pp;
      double load = 0.0;
      int counted = 0;
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (all[k] <= 0.0) continue;
        load += busiest[k] / (all[k] / holders);
        ++counted;
      }
      if (counted > 0) m.expert_load += load / counted / options.steps;
    }
    if (dev.rank() == 0 && options.on_step) options.on_step(r);
    if (!r.warmup) {
      bounds.emplace_back(static_cast<std::int64_t>(-ext[0]), static_cast<std::int64_t>(ext[1]));
      kept.push_back(std::move(t));
    }
  }

  watchdog::phase("final gather");
  runner.gather_parameters();
  std::vector<double> peaks(static_cast<std::size_t>(dev.world()), 0.0);
  peaks[static_cast<std::size_t>(dev.rank())] = static_cast<double>(dev.peak());
  dev.sum_to_all(peaks);
  m.peak_memory = peaks;
  m.kernel_paths = dev.kernel_paths();
  if (kept.empty()) return m;

  // The measured step of median time (the lower median), by the same rule on every rank.
  std::vector<std::size_t> idx(kept.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto secs = [&](std::size_t i) { return m.steps[static_cast<std::size_t>(options.warmup) + i].seconds; };
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return secs(a) < secs(b); });
  const std::size_t med = idx[(idx.size() - 1) / 2];
  m.median_seconds = secs(med);
  double sum = 0.0, flops = 0.0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    sum += secs(i);
    flops += m.steps[static_cast<std::size_t>(options.warmup) + i].flops;
  }
  m.mean_seconds = sum / static_cast<double>(kept.size());
  m.flops_per_step = flops / static_cast<double>(kept.size());
  m.traced_step = options.warmup + static_cast<int>(med);

  // Rank 0 gathers that step's spans into one Trace, times from the step's global start.
  std::vector<WireSpan> wire;
  for (const OpSpan& sp : kept[med].spans) wire.push_back({sp.op, sp.start_ns, sp.end_ns, sp.memory});
  const std::vector<char> all = dev.gather_to_root(
      std::span<const char>(reinterpret_cast<const char*>(wire.data()), wire.size() * sizeof(WireSpan)));
  if (dev.rank() != 0) return m;
  const std::int64_t origin = bounds[med].first;
  report::Trace& tr = m.trace;
  tr.kind = "measured";
  tr.model = m.model_note;
  tr.world = dev.world();
  tr.step_end = (bounds[med].second - origin) * 1000;
  std::vector<report::Counter> memory(static_cast<std::size_t>(dev.world()));
  for (int r = 0; r < dev.world(); ++r) {
    memory[static_cast<std::size_t>(r)].name = "memory";
    memory[static_cast<std::size_t>(r)].rank = r;
  }
  for (std::size_t at = 0; at + sizeof(WireSpan) <= all.size(); at += sizeof(WireSpan)) {
    WireSpan w{};
    std::memcpy(&w, all.data() + at, sizeof(WireSpan));
    const program::Op& o = prog.ops[static_cast<std::size_t>(w.op)];
    report::Span sp;
    sp.rank = o.rank;
    sp.stream = o.stream;
    sp.category = o.category;
    sp.kind = o.kind;
    sp.micro_batch = o.micro_batch;
    sp.op = w.op;
    sp.start = (w.start_ns - origin) * 1000;
    sp.end = (w.end_ns - origin) * 1000;
    tr.spans.push_back(sp);
    memory[static_cast<std::size_t>(o.rank)].samples.emplace_back(sp.end, w.memory);
  }
  // A transfer is done when its data is at the receiver, as the simulator's send ends. A
  // library's send can return earlier, once it has buffered the data (Open MPI over TCP
  // hands 64 KiB to the socket and returns): the send's span runs to its receive's end.
  std::unordered_map<std::int64_t, std::int64_t> received;
  for (const report::Span& sp : tr.spans) {
    if (sp.kind == program::OpKind::recv) received.emplace(prog.ops[static_cast<std::size_t>(sp.op)].match, sp.end);
  }
  for (report::Span& sp : tr.spans) {
    if (sp.kind != program::OpKind::send) continue;
    const auto it = received.find(prog.ops[static_cast<std::size_t>(sp.op)].match);
    if (it != received.end()) sp.end = std::max(sp.end, it->second);
  }
  std::stable_sort(tr.spans.begin(), tr.spans.end(), [](const report::Span& a, const report::Span& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
  });
  for (auto& c : memory) {
    std::stable_sort(c.samples.begin(), c.samples.end());
    tr.counters.push_back(std::move(c));
  }
  return m;
}

}  // namespace parasim::exec
