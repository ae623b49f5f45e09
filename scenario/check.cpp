#include "scenario/check.hpp"

#include <fmt/format.h>

#include "scenario/describe.hpp"
#include "scenario/limits.hpp"
#include "scenario/placement.hpp"

namespace parasim::scenario {

Location key_location(const Scenario& s, const std::string& key) {
  static const LocationMap none;
  const LocationMap& locations = s.locations ? *s.locations : none;
  auto it = locations.find(key);
  Location at = it != locations.end() ? it->second : Location{s.source, 0, 0};
  // A defaulted key has no line of its own: point at its section.
  if (at.line == 0) {
    const auto dot = key.rfind('.');
    if (auto sec = locations.find(key.substr(0, dot)); dot != std::string::npos && sec != locations.end()) {
      at = sec->second;
    }
  }
  return at;
}

SizeKey program_size_key(const Scenario& s) {
  if (s.model.layer_count() >= s.micro_batches()) return {"model.layers", "lower model.layers"};
  return {"training.global_batch", "lower training.global_batch or raise training.micro_batch"};
}

namespace {

class Checker {
 public:
  explicit Checker(const Scenario& s) : s_(s) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw ScenarioError(key_location(s_, key), key, message);
  }

  void require(bool ok, const std::string& key, const std::string& message) const {
    if (!ok) fail(key, message);
  }

 private:
  const Scenario& s_;
};

// Transformer Engine's userbuffers exchange tp blocks over NVLink (CUDA IPC): every tp group
// inside one node. Groups have the same shape, so rank 0's tells.
bool tp_inside_node(const Scenario& s) {
  const ParallelPlan& p = s.plan;
  const int per_node = s.cluster.gpus_per_node;
  const int first_node = rank_of(p, Coord{0, 0, 0, 0}) / per_node;
  for (int i = 1; i < p.tp; ++i) {
    if (rank_of(p, Coord{i, 0, 0, 0}) / per_node != first_node) return false;
  }
  return true;
}

}  // namespace

bool tp_overlap_possible(const Scenario& s) {
  const ParallelPlan& p = s.plan;
  const ModelSpec& m = s.model;
  return m.kind == ModelKind::transformer && !m.moe() && !m.mla() && p.tp > 1 && p.sequence_parallel && p.cp == 1 &&
         p.world() <= s.cluster.total_gpus() && tp_inside_node(s);
}

void check(const Scenario& s) {
  const Checker c(s);
  const ParallelPlan& p = s.plan;
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const int gpus = s.cluster.total_gpus();

  c.require(gpus <= limits::gpus, "cluster.nodes",
            fmt::format("{} nodes x {} devices = {} devices passes the limit of {}", s.cluster.nodes,
                        s.cluster.gpus_per_node, gpus, limits::gpus));
  // 64-bit products: each degree may be up to 2^30 before this check.
  const long long world = static_cast<long long>(p.dp) * p.tp * p.pp * p.cp;
  c.require(world <= gpus, "plan.dp",
            fmt::format("dp x tp x pp{} = {} x {} x {}{} = {} devices, but the cluster has {} ({} nodes x {})",
                        p.cp > 1 ? " x cp" : "", p.dp, p.tp, p.pp, p.cp > 1 ? fmt::format(" x {}", p.cp) : "", world,
                        gpus, s.cluster.nodes, s.cluster.gpus_per_node));
  c.require(s.cluster.device.supports(t.precision), "training.precision",
            fmt::format("device {} has no {} rate in its peak table{}", s.cluster.device.name, to_string(t.precision),
                        t.precision == Dtype::fp8 ? " (FP8 tensor cores came with Hopper and Ada: H100, H200, L40S, B200)"
                                                  : ""));

  if (m.kind == ModelKind::transformer) {
    c.require(m.hidden % m.heads == 0, "model.hidden",
              fmt::format("hidden {} is not divisible by heads {}", m.hidden, m.heads));
    c.require(m.kv_heads <= m.heads && m.heads % m.kv_heads == 0, "model.kv_heads",
              fmt::format("kv_heads {} must divide heads {}", m.kv_heads, m.heads));
    c.require(m.heads % p.tp == 0, "plan.tp", fmt::format("heads {} are not divisible by tp {}", m.heads, p.tp));
    c.require(m.hidden % p.tp == 0, "plan.tp", fmt::format("hidden {} is not divisible by tp {}", m.hidden, p.tp));
    c.require(m.kv_heads % p.tp == 0, "plan.tp",
              fmt::format("kv_heads {} are not divisible by tp {} (each rank needs whole key/value heads)", m.kv_heads,
                          p.tp));
    c.require(m.ffn_hidden % p.tp == 0, "plan.tp",
              fmt::format("the MLP width {} is not divisible by tp {}", m.ffn_hidden, p.tp));
    // An uneven split gives the first layers mod (pp x virtual_stages) slices one layer more
    // (Megatron's uneven pipeline split; DeepSeek-V3's 61 layers over 16 stages).
    c.require(m.layers >= static_cast<long long>(p.pp) * p.virtual_stages, "plan.pp",
              fmt::format("layers {} cannot fill pp x virtual_stages = {} x {} = {} stages (each needs a layer)",
                          m.layers, p.pp, p.virtual_stages, p.pp * p.virtual_stages));
    c.require(p.virtual_stages == 1 || m.layers % (static_cast<long long>(p.pp) * p.virtual_stages) == 0, "plan.pp",
              fmt::format("layers {} are not divisible by pp x virtual_stages = {} x {} = {} (an interleaved schedule "
                          "needs equal chunks)",
                          m.layers, p.pp, p.virtual_stages, p.pp * p.virtual_stages));
    if (m.mla()) {
      c.require(p.cp == 1, "plan.cp",
                "context parallelism with multi-head latent attention is not modelled (its ring would carry the "
                "up-projected keys and values); use cp: 1");
      c.require(!p.tp_comm_overlap, "plan.tp_comm_overlap",
                "tensor-parallel communication overlap is not modelled for multi-head latent attention; turn it off");
    }
    c.require(!p.sequence_parallel || m.seq_len % p.tp == 0, "plan.sequence_parallel",
              fmt::format("sequence parallelism splits the sequence over tp: seq_len {} is not divisible by tp {}",
                          m.seq_len, p.tp));
    if (p.cp > 1) {
      // Load-balanced causal chunks: the sequence in 2·cp equal chunks, under sequence
      // parallelism each rank's b·s/cp rows split again over tp.
      c.require(m.seq_len % (2 * p.cp) == 0, "plan.cp",
                fmt::format("context parallelism splits the sequence into 2 x cp = {} chunks: seq_len {} is not "
                            "divisible by {}",
                            2 * p.cp, m.seq_len, 2 * p.cp));
      c.require(!p.sequence_parallel || (m.seq_len / p.cp) % p.tp == 0, "plan.sequence_parallel",
                fmt::format("sequence parallelism splits each cp rank's {} positions over tp {}: not divisible",
                            m.seq_len / p.cp, p.tp));
      c.require(fused(t.attention), "training.attention",
                "context parallelism runs ring attention, which is FlashAttention's (Transformer Engine's): "
                "training.attention must be flash");
      c.require(!p.tp_comm_overlap, "plan.tp_comm_overlap",
                "tensor-parallel communication overlap together with context parallelism is not modelled; turn one off");
      c.require(t.recompute != Recompute::selective, "training.recompute",
                "selective recompute (the attention core again) is not modelled under context parallelism, where "
                "FlashAttention keeps no s x s tensors anyway; use none or full");
    }
    if (m.moe()) {
      c.require(m.expert_ffn_hidden % p.tp == 0, "plan.tp",
                fmt::format("the experts' MLP width {} is not divisible by tp {}", m.expert_ffn_hidden, p.tp));
      c.require(!p.tp_comm_overlap, "plan.tp_comm_overlap",
                "tensor-parallel communication overlap is not modelled for mixture-of-experts layers; turn it off");
      c.require(m.shared_expert_ffn_hidden % p.tp == 0, "plan.tp",
                fmt::format("the shared experts' MLP width {} is not divisible by tp {}", m.shared_expert_ffn_hidden,
                            p.tp));
      c.require(p.tp == 1 || p.sequence_parallel, "plan.sequence_parallel",
                fmt::format("mixture-of-experts layers with tp {} need sequence parallelism (as Megatron-Core requires: "
                            "each tp rank routes its own share of the tokens); set plan.sequence_parallel: true",
                            p.tp));
    }
    c.require(!p.tp_comm_overlap || (p.tp > 1 && p.sequence_parallel), "plan.tp_comm_overlap",
              fmt::format("overlapping tensor-parallel communication with the GEMMs needs tp > 1 and "
                          "plan.sequence_parallel: true (it overlaps sequence parallelism's all-gathers and "
                          "reduce-scatters); the plan has tp {}{}",
                          p.tp, p.sequence_parallel ? "" : " without sequence parallelism"));
    if (p.tp_comm_overlap && p.world() <= gpus) {
      c.require(tp_inside_node(s), "plan.tp_comm_overlap",
                fmt::format("tensor-parallel communication overlap exchanges its blocks over NVLink inside a node "
                            "(Transformer Engine's userbuffers), but the tp groups of this plan span nodes (tp {} on "
                            "{} devices per node, placement {}); keep tp within a node or turn the overlap off",
                            p.tp, s.cluster.gpus_per_node, placement_string(p)));
    }
  } else {
    c.require(p.tp == 1, "plan.tp",
              fmt::format("tensor parallelism needs a transformer model; '{}' is a generic layer list (use tp: 1)",
                          m.name));
    c.require(!p.sequence_parallel, "plan.sequence_parallel", "sequence parallelism needs a transformer model");
    c.require(!p.tp_comm_overlap, "plan.tp_comm_overlap", "tensor-parallel communication overlap needs a transformer model");
    c.require(p.cp == 1, "plan.cp",
              fmt::format("context parallelism splits sequences, which needs a transformer model; '{}' is a generic "
                          "layer list (use cp: 1)",
                          m.name));
    c.require(m.layer_count() >= static_cast<long long>(p.pp) * p.virtual_stages, "plan.pp",
              fmt::format("{} layers cannot fill pp x virtual_stages = {} stages", m.layer_count(),
                          static_cast<long long>(p.pp) * p.virtual_stages));
  }

  if (p.ep > 1) {
    c.require(m.moe(), "plan.ep",
              fmt::format("expert parallelism {} splits the experts of a mixture-of-experts model, but '{}' has none "
                          "(model.experts); use ep: 1",
                          p.ep, m.name));
    c.require(m.experts % p.ep == 0, "plan.ep",
              fmt::format("ep {} must divide the {} experts of each layer (each rank holds experts / ep of them)", p.ep,
                          m.experts));
    c.require(p.grad_ranks() % p.ep == 0, "plan.ep",
              fmt::format("ep {} must divide {} {} (expert parallelism groups ranks that hold the same dense weights)",
                          p.ep, p.cp > 1 ? "dp x cp =" : "dp", p.grad_ranks()));
    c.require(p.zero <= 1, "plan.zero",
              fmt::format("ZeRO-{} with expert parallelism is not modelled (each expert's gradients are summed over "
                          "its own group); use plan.zero: 0 or 1 (the distributed optimizer, as Megatron-Core runs "
                          "mixture-of-experts models)",
                          p.zero));
    c.require(!p.overlap_param_gather, "plan.overlap_param_gather",
              "overlapping the parameter all-gather with expert parallelism is not modelled; turn it off");
    c.require(p.shard_group == 0, "plan.shard_group", "hybrid sharding with expert parallelism is not modelled; "
                                                      "remove plan.shard_group");
  }

  const long long per_step = static_cast<long long>(p.dp) * t.micro_batch;
  c.require(t.global_batch % per_step == 0, "training.global_batch",
            fmt::format("global_batch {} is not divisible by dp x micro_batch = {} x {} = {}", t.global_batch, p.dp,
                        t.micro_batch, per_step));

  const long long micro_batches = t.global_batch / per_step;
  c.require(micro_batches <= limits::micro_batches, "training.global_batch",
            fmt::format("{} micro-batches per pipeline per step (global_batch / (dp x micro_batch)) pass the limit of "
                        "{}; raise micro_batch or dp",
                        micro_batches, limits::micro_batches));

  // The simulated step's ops, from below: each layer of each micro-batch runs a forward and
  // a backward on each of its tp x cp ranks, and under tp two collectives each way. Past the
  // cap, refused here at once; nearer, the Program's own count refuses it as it is built
  // (program::ProgramTooLarge), within the host's available memory.
  {
    const double per_layer = p.tp > 1 ? 6.0 : 2.0;
    const double floor_ops = per_layer * m.layer_count() * static_cast<double>(micro_batches) * p.tp * p.cp;
    const SizeKey size = program_size_key(s);
    c.require(floor_ops <= static_cast<double>(limits::program_ops), size.key,
              fmt::format("the simulated step has at least {:.0f} ops ({} layers x {} micro-batches per pipeline x tp {}{}, "
                          "forward and backward{}), past the simulator's limit of {}; {}",
                          floor_ops, m.layer_count(), micro_batches, p.tp, p.cp > 1 ? fmt::format(" x cp {}", p.cp) : "",
                          p.tp > 1 ? ", tp's collectives" : "", limits::program_ops, size.advice));
  }

  // The step's compute at the device's peak rate bounds it from below: past the simulated
  // clock's range (int64 picoseconds, 106 days) nothing can be simulated. Name the key
  // that makes it so.
  if (const double peak = s.cluster.device.peak(t.precision); peak > 0.0) {
    double per_sample = 0.0;  // forward FLOPs
    std::string culprit = "model";
    if (m.kind == ModelKind::transformer) {
      const double h = m.hidden;
      const double seq = m.seq_len;
      per_sample = static_cast<double>(m.layers) * seq * (24.0 * h * h + 4.0 * seq * h);
      culprit = 24.0 * h > 4.0 * seq ? "model.hidden" : "model.seq_len";
    } else {
      for (const GenericLayer& l : m.generic_layers) per_sample += l.forward_flops;
      culprit = "model.layers";
    }
    const double seconds = 3.0 * per_sample * t.global_batch / static_cast<double>(world) / peak;
    c.require(seconds < 1e6, culprit,
              fmt::format("one step is at least {:.3g} s of compute on each device at its peak rate, past what the "
                          "simulator can represent (106 days); a real step takes seconds",
                          seconds));
  }

  if (p.shard_group > 0) {
    c.require(p.zero >= 1, "plan.shard_group",
              fmt::format("shard_group {} shards the ZeRO stage's state, but plan.zero is 0", p.shard_group));
    c.require(p.shard_group >= 2 && p.grad_ranks() % p.shard_group == 0, "plan.shard_group",
              fmt::format("shard_group {} must divide {} {} and be at least 2 (the ranks each shard group spans)",
                          p.shard_group, p.cp > 1 ? "dp x cp =" : "dp", p.grad_ranks()));
  }

  // ZeRO-2/3 shard the gradients unit by unit; a tied embedding on two stages would need
  // its two halves' shards summed between them (Megatron's embedding group), which the
  // sharded units do not model.
  c.require(p.zero < 2 || p.pp == 1 || m.kind != ModelKind::transformer || !m.tie_embeddings, "plan.zero",
            fmt::format("ZeRO-{} with pp {} needs an untied LM head (model.tie_embeddings: false, as Llama's): the "
                        "tied embedding's gradient is summed between the first and last stages, which sharded units "
                        "do not do; or use plan.zero: 1",
                        p.zero, p.pp));

  if (p.offloads()) {
    const std::string key = p.offload_optimizer ? "plan.offload_optimizer" : "plan.offload_activations";
    const topology::ClusterSpec& cl = s.cluster;
    const bool shared = cl.intra.fabric == topology::IntraFabric::shared_memory;
    c.require(!shared, key,
              "CPU ranks (the shared-memory fabric) hold everything in host memory already: there is nothing to offload");
    const bool own_links = cl.intra.fabric != topology::IntraFabric::pcie;
    c.require(shared || (cl.host.described() && (!own_links || cl.host.link_bandwidth > 0.0)), key,
              fmt::format("offloading needs the hosts on the cluster graph: add a cluster.host section (memory, "
                          "memory_bandwidth{})",
                          own_links ? ", link_bandwidth: each device's PCIe link to host memory" : ""));
    c.require(!p.offload_activations || (t.recompute == Recompute::none && m.kind == ModelKind::transformer),
              "plan.offload_activations",
              fmt::format("offloading activations needs a transformer trained without recompute (training.recompute is "
                          "{}): recomputing brings the activations back anyway, and its passes would need every "
                          "layer's at once",
                          to_string(t.recompute)));
    c.require(!p.offload_optimizer || p.grad_ranks() == 1 || p.zero >= 2, "plan.zero",
              fmt::format("offloading the optimizer with {} {} needs ZeRO-2 or -3 (plan.zero: 2 or 3): each unit's "
                          "gradients are reduce-scattered and leave the device as they are produced (ZeRO-Offload)",
                          p.cp > 1 ? "dp x cp =" : "dp", p.grad_ranks()));
    c.require(!p.offload_params || p.grad_ranks() == 1 || p.zero == 3, "plan.zero",
              fmt::format("offloading the parameters with {} {} needs ZeRO-3 (plan.zero: 3): each rank copies its "
                          "shard in, then the unit is all-gathered (ZeRO-Infinity)",
                          p.cp > 1 ? "dp x cp =" : "dp", p.grad_ranks()));
  }

  c.require(!p.offload_optimizer || p.pp == 1 || m.kind != ModelKind::transformer || !m.tie_embeddings,
            "plan.offload_optimizer",
            fmt::format("offloading the optimizer with pp {} needs an untied LM head (model.tie_embeddings: false): the "
                        "tied embedding's gradient is summed between the first and last stages, which units leaving "
                        "the device one by one do not do",
                        p.pp));

  c.require(p.collective != Collective::nvls || s.cluster.intra.fabric == topology::IntraFabric::nvswitch, "plan.collective",
            fmt::format("collective nvls reduces inside an NVSwitch, but the cluster's intra_node fabric is {}",
                        topology::to_string(s.cluster.intra.fabric)));

  if (p.schedule == Schedule::interleaved_1f1b) {
    c.require(p.pp >= 2, "plan.schedule", "the interleaved-1f1b schedule needs pp of at least 2");
    c.require(p.virtual_stages >= 2, "plan.virtual_stages",
              "the interleaved-1f1b schedule needs virtual_stages of at least 2 (1 is plain 1f1b)");
    const int mb = s.micro_batches();
    c.require(mb % p.pp == 0, "training.global_batch",
              fmt::format("interleaved-1f1b needs the micro-batches per pipeline ({} = global_batch / (dp x "
                          "micro_batch)) to be a multiple of pp {}",
                          mb, p.pp));
  } else {
    c.require(p.virtual_stages == 1, "plan.virtual_stages",
              fmt::format("virtual_stages {} needs schedule interleaved-1f1b (schedule is {})", p.virtual_stages,
                          to_string(p.schedule)));
  }
}

}  // namespace parasim::scenario
