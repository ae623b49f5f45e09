#include "planner/search.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "scenario/check.hpp"
#include "scenario/describe.hpp"
#include "scenario/diagnostics.hpp"
#include "workload/memory.hpp"
#include "program/program.hpp"

namespace parasim::planner {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// Placements that map ranks differently: every order of the dimensions larger than 1,
// innermost first, then the others in tp, cp, dp, pp order.
std::vector<std::array<scenario::Dim, 4>> placements(const scenario::ParallelPlan& p) {
  std::vector<scenario::Dim> big;
  std::vector<scenario::Dim> one;
  for (scenario::Dim d : {scenario::Dim::tp, scenario::Dim::cp, scenario::Dim::dp, scenario::Dim::pp})
    (extent(p, d) > 1 ? big : one).push_back(d);
  std::vector<std::array<scenario::Dim, 4>> out;
  std::sort(big.begin(), big.end());
  do {
    std::array<scenario::Dim, 4> a{};
    std::size_t i = 0;
    for (scenario::Dim d : big) a[i++] = d;
    for (scenario::Dim d : one) a[i++] = d;
    out.push_back(a);
  } while (std::next_permutation(big.begin(), big.end()));
  return out;
}

// Context-parallel degrees worth trying for `ranks` devices left after tp and pp: 1, and
// for sequences of 16K tokens or more (what context parallelism is for: shorter ones give
// each rank blocks too small to hide the ring behind) every divisor that keeps at least
// 8K positions per rank (Llama 3's long-context training: 128K over cp 16) and splits the
// sequence into 2·cp chunks.
std::vector<int> context_degrees(const scenario::Scenario& base, int ranks) {
  std::vector<int> out{1};
  const int s = base.model.seq_len;
  if (base.model.kind != scenario::ModelKind::transformer || s < 16384) return out;
  for (int cp : divisors(ranks)) {
    if (cp > 1 && s % (2 * cp) == 0 && s / cp >= 8192) out.push_back(cp);
  }
  return out;
}

bool valid(const scenario::Scenario& s) {
  try {
    check(s);
    return true;
  } catch (const scenario::ScenarioError&) {
    return false;
  }
}

}  // namespace

scenario::Scenario with_candidate(const scenario::Scenario& base, const Candidate& c) {
  scenario::Scenario s = base;
  s.plan = c.plan;
  s.plan.bucket_bytes = base.plan.bucket_bytes;
  s.plan.overlap_dp = base.plan.overlap_dp;
  s.plan.overlap_param_gather =
      s.plan.zero == 1 &&
      (base.plan.overlap_param_gather || scenario::default_param_gather_overlap(base.training.framework, s.plan));
  s.plan.collective = base.plan.collective;
  s.training.micro_batch = c.micro_batch;
  s.training.recompute = c.recompute;
  return s;
}

scenario::Scenario on_devices(const scenario::Scenario& base, int devices) {
  scenario::Scenario s = base;
  if (devices <= 0) return s;
  const int per_node = s.cluster.gpus_per_node;
  if (devices < per_node) {
    s.cluster.gpus_per_node = devices;
    s.cluster.nodes = 1;
  } else {
    s.cluster.nodes = (devices + per_node - 1) / per_node;
  }
  return s;
}

std::vector<Candidate> enumerate_plans(const scenario::Scenario& base, int devices, const std::function<void()>& poll) {
  const int n = devices > 0 ? devices : base.cluster.total_gpus();
  const bool transformer = base.model.kind == scenario::ModelKind::transformer;
  const int layers = base.model.layer_count();
  const topology::ClusterSpec& cl = base.cluster;
  const bool offload = cl.host.described() && cl.intra.fabric != topology::IntraFabric::shared_memory &&
                       (cl.intra.fabric == topology::IntraFabric::pcie || cl.host.link_bandwidth > 0.0);
  std::vector<Candidate> out;
  for (int tp : divisors(n)) {
    if (!transformer && tp > 1) break;
    if (transformer && (base.model.heads % tp != 0 || base.model.hidden % tp != 0)) continue;
    for (int pp : divisors(n / tp)) {
      if (pp > layers) break;
      // Uneven pipeline splits (a layer more on the first stages) only where each stage
      // keeps 3 layers or more, so that one layer more is a third at most.
      if (transformer && layers % pp != 0 && layers / pp < 3) continue;
      for (int cp : context_degrees(base, n / (tp * pp))) {
        const int dp = n / (tp * pp * cp);
        if (base.training.global_batch % dp != 0) continue;
        // ZeRO stages with the group each shards over (0: all dp ranks). Without dp they shard
        // nothing. check() refuses ZeRO-2/3 with a tied embedding over stages: skipped here
        // rather than have it throw for each. When dp spans nodes, ZeRO-2/3 also shard within
        // a node's dp ranks alone (hybrid sharding, FSDP's HYBRID_SHARD): the largest divisor
        // of dp whose shard group fits a node beside its tp ranks.
        std::vector<std::pair<int, int>> sharding{{0, 0}};
        int in_node = 1;
        for (int d : divisors(dp)) {
          if (d < dp && d * tp * cp <= base.cluster.gpus_per_node) in_node = d;
        }
        for (int zero = 1; dp * cp > 1 && zero <= 3; ++zero) {
          if (zero >= 2 && pp > 1 && transformer && base.model.tie_embeddings) continue;
          sharding.emplace_back(zero, 0);
          if (zero >= 2 && in_node >= 2 && dp * tp * cp > base.cluster.gpus_per_node) {
            sharding.emplace_back(zero, in_node * cp);
          }
        }
        // Expert parallelism (mixture of experts): each degree that divides the experts and
        // dp x cp; it leaves ZeRO-2/3 and hybrid sharding out (check).
        std::vector<int> eps{1};
        if (transformer && base.model.moe()) {
          for (int ep : divisors(dp * cp)) {
            if (ep > 1 && base.model.experts % ep == 0) eps.push_back(ep);
          }
        }
        for (int mb : divisors(base.training.global_batch / dp)) {
          const int micro_batches = base.training.global_batch / (dp * mb);
          struct Shape {
            scenario::Schedule schedule;
            int v;
          };
          // One stage or one micro-batch: GPipe runs what 1F1B runs.
          std::vector<Shape> shapes{{scenario::Schedule::one_f_one_b, 1}};
          if (pp > 1 && micro_batches > 1) shapes.push_back({scenario::Schedule::gpipe, 1});
          if (pp >= 2 && micro_batches % pp == 0 && layers % pp == 0) {
            for (int v : divisors(layers / pp)) {
              if (v >= 2) shapes.push_back({scenario::Schedule::interleaved_1f1b, v});
            }
          }
          for (const Shape& shape : shapes) {
            for (scenario::Recompute r :
                 {scenario::Recompute::none, scenario::Recompute::selective, scenario::Recompute::full}) {
              if (r == scenario::Recompute::selective && (!transformer || cp > 1)) continue;
              for (const auto& [zero, shard_group] : sharding) {
                for (int sp_mode = 0; sp_mode < 3; ++sp_mode) {  // no SP, SP, SP with tp communication overlap
                  const bool sp = sp_mode > 0;
                  if (sp && (tp == 1 || !transformer)) continue;
                  if (sp_mode == 2 && (cp > 1 || base.model.moe())) continue;  // not modelled together (check)
                  if (!sp && tp > 1 && base.model.moe()) continue;             // MoE with tp needs SP (check)
                  for (int ep : eps) {
                    if (ep > 1 && (zero >= 2 || shard_group > 0)) continue;
                    Candidate c;
                    c.plan.ep = ep;
                    c.plan.dp = dp;
                    c.plan.tp = tp;
                    c.plan.pp = pp;
                    c.plan.cp = cp;
                    c.plan.virtual_stages = shape.v;
                    c.plan.schedule = shape.schedule;
                    c.plan.sequence_parallel = sp;
                    c.plan.tp_comm_overlap = sp_mode == 2;
                    c.plan.zero = zero;
                    c.plan.shard_group = shard_group;
                    c.micro_batch = mb;
                    c.recompute = r;
                    for (const auto& place : placements(c.plan)) {
                      if (poll) poll();
                      c.plan.placement = place;
                      const scenario::Scenario cs = with_candidate(base, c);
                      if (!valid(cs)) continue;
                      out.push_back(c);
                      // Offloading, where the hosts are on the graph and the plan does not
                      // fit without it: the optimizer, then the parameters too.
                      if (!offload || workload::memory_per_rank(cs).fits()) continue;
                      // Or its activations (without recompute), or all of it. What check
                      // refuses is skipped here rather than have it throw for each.
                      const bool replicas = dp * cp > 1;
                      const bool tied = transformer && pp > 1 && base.model.tie_embeddings;
                      for (int mode = 1; mode <= 4; ++mode) {
                        Candidate o = c;
                        o.plan.offload_optimizer = mode != 3;
                        o.plan.offload_params = mode == 2 || mode == 4;
                        o.plan.offload_activations = mode >= 3;
                        if (o.plan.offload_activations && (r != scenario::Recompute::none || !transformer)) continue;
                        if (o.plan.offload_optimizer && (tied || (replicas && zero < 2))) continue;
                        if (o.plan.offload_params && replicas && zero != 3) continue;
                        if (valid(with_candidate(base, o))) out.push_back(o);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::string sharding_string(const scenario::ParallelPlan& p) {
  std::string out = std::to_string(p.zero);
  if (p.hybrid_shard()) out += fmt::format(" /{}", p.shard_size());
  if (p.offloads()) {
    std::vector<std::string> what;
    if (p.offload_optimizer) what.emplace_back("o");
    if (p.offload_params) what.emplace_back("p");
    if (p.offload_activations) what.emplace_back("a");
    out += fmt::format(" +off({})", fmt::join(what, ","));
  }
  return out;
}

std::string describe(const Candidate& c) {
  const scenario::ParallelPlan& p = c.plan;
  return fmt::format("dp {} tp {} pp {}{}{}{} {} mb {} recompute {} zero {}{}{}{}{}{} placement {}", p.dp, p.tp, p.pp,
                     p.cp > 1 ? fmt::format(" cp {}", p.cp) : "", p.ep > 1 ? fmt::format(" ep {}", p.ep) : "",
                     p.virtual_stages > 1 ? fmt::format(" x{}", p.virtual_stages) : "", to_string(p.schedule),
                     c.micro_batch, to_string(c.recompute), p.zero,
                     p.hybrid_shard() ? fmt::format(" shard {}", p.shard_size()) : "", p.sequence_parallel ? " sp" : "",
                     p.tp_comm_overlap ? " overlap" : "",
                     p.offload_optimizer ? (p.offload_params ? " offload optimizer+params" : " offload optimizer") : "",
                     p.offload_activations ? " offload activations" : "",
                     placement_string(p));
}

std::vector<std::string> overrides_of(const Candidate& c) {
  const scenario::ParallelPlan& p = c.plan;
  return {fmt::format("plan.dp={}", p.dp),
          fmt::format("plan.tp={}", p.tp),
          fmt::format("plan.pp={}", p.pp),
          fmt::format("plan.cp={}", p.cp),
          fmt::format("plan.ep={}", p.ep),
          fmt::format("plan.virtual_stages={}", p.virtual_stages),
          fmt::format("plan.schedule={}", to_string(p.schedule)),
          fmt::format("plan.sequence_parallel={}", p.sequence_parallel ? "true" : "false"),
          fmt::format("plan.tp_comm_overlap={}", p.tp_comm_overlap ? "true" : "false"),
          fmt::format("plan.zero={}", p.zero),
          fmt::format("plan.shard_group={}", p.hybrid_shard() ? p.shard_size() : 0),
          fmt::format("plan.offload_optimizer={}", p.offload_optimizer ? "true" : "false"),
          fmt::format("plan.offload_params={}", p.offload_params ? "true" : "false"),
          fmt::format("plan.offload_activations={}", p.offload_activations ? "true" : "false"),
          fmt::format("plan.placement={}", placement_string(p)),
          fmt::format("training.micro_batch={}", c.micro_batch),
          fmt::format("training.recompute={}", to_string(c.recompute))};
}

}  // namespace parasim::planner
