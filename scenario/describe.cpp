#include "scenario/describe.hpp"

#include <cmath>
#include <numbers>

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "topology/units.hpp"

namespace parasim::scenario {

std::string_view to_string(Optimizer o) {
  return o == Optimizer::adamw ? "adamw" : o == Optimizer::sgd ? "sgd" : "adamw8bit";
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string_view to_string(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved_1f1b: return "interleaved-1f1b";
  }
  return "?";
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::automatic: return "auto";
    case Collective::ring: return "ring";
    case Collective::tree: return "tree";
    case Collective::hierarchical: return "hierarchical";
    case Collective::nvls: return "nvls";
    case Collective::direct: return "direct";
  }
  return "?";
}

std::string_view to_string(Dim d) {
  switch (d) {
    case Dim::tp: return "tp";
    case Dim::dp: return "dp";
    case Dim::pp: return "pp";
    case Dim::cp: return "cp";
  }
  return "?";
}

std::string_view to_string(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }
std::string_view to_string(CheckpointMode m) { return m == CheckpointMode::sync ? "sync" : "async"; }
std::string_view to_string(Attention a) {
  switch (a) {
    case Attention::flash: return "flash";
    case Attention::flash_v2: return "flash-v2";
    case Attention::flash_v1: return "flash-v1";
    case Attention::naive: return "naive";
  }
  return "naive";
}
std::string_view to_string(Framework f) {
  switch (f) {
    case Framework::megatron_core: return "megatron-core";
    case Framework::megatron_lm: return "megatron-lm";
    case Framework::megatron_deepspeed: return "megatron-deepspeed";
    case Framework::pytorch_fsdp: return "pytorch-fsdp";
    case Framework::torchtitan: return "torchtitan";
    case Framework::nemo: return "nemo";
  }
  return "megatron-core";
}
std::string_view to_string(Fp8Recipe r) { return r == Fp8Recipe::delayed ? "delayed" : "current"; }

double learning_rate_at(const TrainingSpec& t, int k) {
  double lr = t.learning_rate;
  if (t.lr_scaling != LrScaling::none && t.lr_reference_batch > 0) {
    const double ratio = static_cast<double>(t.global_batch) / t.lr_reference_batch;
    lr *= t.lr_scaling == LrScaling::linear ? ratio : std::sqrt(ratio);
  }
  if (k < t.warmup_steps) return lr * (k + 1) / t.warmup_steps;
  if (t.lr_decay == LrDecay::constant || t.decay_steps <= t.warmup_steps) return lr;
  const double r = std::min(1.0, static_cast<double>(k + 1 - t.warmup_steps) / (t.decay_steps - t.warmup_steps));
  const double share = t.lr_decay == LrDecay::linear ? 1.0 - r : 0.5 * (1.0 + std::cos(std::numbers::pi * r));
  return t.min_lr + (lr - t.min_lr) * share;
}

std::string placement_string(const ParallelPlan& p) {
  std::string out;
  for (Dim d : p.placement) {
    if (d == Dim::cp && p.cp == 1) continue;  // without context parallelism its place is moot
    if (!out.empty()) out.push_back(',');
    out.append(to_string(d));
  }
  return out;
}

std::string layout_string(const ParallelPlan& p) {
  std::vector<std::string> notes;
  if (p.virtual_stages > 1) notes.push_back(fmt::format("v {}", p.virtual_stages));
  if (p.sequence_parallel && p.tp > 1) notes.emplace_back("sequence parallel");
  if (p.tp_comm_overlap && p.tp > 1) notes.emplace_back("tp comm overlap");
  if (p.ep > 1) notes.push_back(fmt::format("ep {}", p.ep));
  if (p.offload_optimizer) notes.emplace_back(p.offload_params ? "optimizer and parameters offloaded" : "optimizer offloaded");
  if (p.offload_activations) notes.emplace_back("activations offloaded");
  return fmt::format("dp {} x tp {} x pp {}{}{}", p.dp, p.tp, p.pp, p.cp > 1 ? fmt::format(" x cp {}", p.cp) : "",
                     notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, ", ")));
}

nlohmann::ordered_json to_json(const Scenario& s) {
  using nlohmann::ordered_json;
  const auto& c = s.cluster;
  ordered_json peak = ordered_json::object();
  for (topology::Dtype d : topology::all_dtypes) {
    if (c.device.supports(d)) peak[std::string(topology::to_string(d))] = c.device.peak(d);
  }
  ordered_json cluster = {
      {"name", c.name},
      {"nodes", c.nodes},
      {"gpus_per_node", c.gpus_per_node},
      {"device",
       {{"name", c.device.name}, {"peak_flops", peak}, {"memory_bytes", c.device.memory_bytes},
        {"memory_bandwidth", c.device.memory_bandwidth}, {"workspace_bytes", c.device.workspace_bytes},
        {"headroom", c.device.headroom}, {"tdp_watts", c.device.tdp}, {"power_limit_watts", c.device.power_limit}}},
      {"intra_node",
       {{"fabric", topology::to_string(c.intra.fabric)}, {"bandwidth", c.intra.bandwidth}, {"latency", c.intra.latency}}},
  };
  if (c.intra.fabric == topology::IntraFabric::pcie) cluster["intra_node"]["gpus_per_switch"] = c.intra.gpus_per_switch;
  if (c.nodes > 1 || c.wan) {
    cluster["inter_node"] = {{"nics_per_node", c.inter.nics_per_node},     {"nic_bandwidth", c.inter.nic_bandwidth},
                             {"latency", c.inter.latency},                 {"shape", topology::to_string(c.inter.shape)},
                             {"oversubscription", c.inter.oversubscription}, {"leaf_downlinks", c.inter.leaf_downlinks},
                             {"attach_bandwidth", c.inter.attach_bandwidth}, {"routing", topology::to_string(c.inter.routing)}};
  }
  if (c.host.described()) {
    cluster["host"] = {{"memory", c.host.memory}, {"memory_bandwidth", c.host.memory_bandwidth}};
    if (c.host.link_bandwidth > 0.0) {
      cluster["host"].update({{"link_bandwidth", c.host.link_bandwidth}, {"devices_per_link", c.host.devices_per_link},
                              {"latency", c.host.latency}});
    }
  }
  if (c.wan) {
    cluster["wan"] = {{"first_group_nodes", c.wan->first_group_nodes}, {"bandwidth", c.wan->bandwidth},
                      {"latency", c.wan->latency}};
  }

  const auto& m = s.model;
  ordered_json model = {{"name", m.name}, {"kind", to_string(m.kind)}, {"parameters", m.parameter_count()}};
  if (m.kind == ModelKind::transformer) {
    model.update({{"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads}, {"kv_heads", m.kv_heads},
                  {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab}, {"seq_len", m.seq_len}, {"mlp", to_string(m.mlp)},
                  {"tie_embeddings", m.tie_embeddings}});
    if (m.moe()) {
      model.update({{"experts", m.experts}, {"top_k", m.top_k}, {"expert_ffn_hidden", m.expert_ffn_hidden},
                    {"shared_expert_ffn_hidden", m.shared_expert_ffn_hidden},
                    {"capacity_factor", m.capacity_factor}, {"moe_imbalance", m.moe_imbalance},
                    {"dense_layers", m.dense_layers}, {"active_parameters", m.active_parameter_count()}});
    }
    if (m.mla()) {
      model.update({{"q_lora_rank", m.q_lora_rank}, {"kv_lora_rank", m.kv_lora_rank},
                    {"qk_nope_head_dim", m.qk_nope_head_dim}, {"qk_rope_head_dim", m.qk_rope_head_dim},
                    {"v_head_dim", m.v_head_dim}});
    }
  } else {
    ordered_json layers = ordered_json::array();
    for (const auto& l : m.generic_layers) {
      layers.push_back({{"name", l.name}, {"params", l.params}, {"forward_flops", l.forward_flops},
                        {"activations", l.activations}});
      if (l.batch_norm.layers > 0) {
        layers.back()["batch_norm"] = {{"layers", l.batch_norm.layers}, {"channels", l.batch_norm.channels},
                                       {"values", l.batch_norm.values}};
      }
    }
    model["layers"] = layers;
  }
  const auto& t = s.training;
  const auto& p = s.plan;
  ordered_json out = {
      {"name", s.name},
      {"description", s.description},
      {"source", s.source},
      {"cluster", cluster},
      {"model", model},
      {"training",
       {{"framework", to_string(t.framework)}, {"compile", t.compile}, {"global_batch", t.global_batch}, {"micro_batch", t.micro_batch}, {"micro_batches", s.micro_batches()},
        {"precision", topology::to_string(t.precision)}, {"optimizer", to_string(t.optimizer)},
        {"recompute", to_string(t.recompute)}, {"attention", to_string(t.attention)},
        {"grad_dtype", topology::to_string(t.grad_dtype)}, {"fp8_recipe", to_string(t.fp8_recipe)},
        {"batch_norm", t.sync_batch_norm ? "sync" : "local"}}},
      {"plan",
       {{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp}, {"cp", p.cp}, {"ep", p.ep}, {"virtual_stages", p.virtual_stages},
        {"schedule", to_string(p.schedule)}, {"sequence_parallel", p.sequence_parallel},
        {"pp_scatter_gather", p.pp_scatter_gather}, {"tp_comm_overlap", p.tp_comm_overlap}, {"zero", p.zero}, {"shard_group", p.shard_size()},
        {"bucket_bytes", p.bucket_bytes}, {"overlap_dp", p.overlap_dp}, {"overlap_param_gather", p.overlap_param_gather},
        {"offload_optimizer", p.offload_optimizer}, {"offload_params", p.offload_params},
        {"offload_activations", p.offload_activations}, {"collective", to_string(p.collective)},
        {"placement", placement_string(p)}, {"world", p.world()}}},
      {"hardware", {{"profile", s.hardware.profile}}},
      {"run", {{"backend", to_string(s.run.backend)}, {"steps", s.run.steps}, {"warmup", s.run.warmup},
               {"seed", s.run.seed}}},
  };
  out["training"]["steps"] = s.training.total_steps;
  if (s.training.tokens > 0.0) out["training"]["tokens"] = s.training.tokens;
  const JobSpec& j = s.job;
  out["job"] = {{"failures", {{"device_mtbf", j.device_mtbf}, {"node_mtbf", j.node_mtbf}, {"restart", j.restart}}},
                {"checkpoint",
                 {{"interval", j.checkpoint_steps > 0 || j.checkpoint_interval > 0.0 ? nlohmann::ordered_json(j.checkpoint_interval)
                                                                                   : nlohmann::ordered_json("auto")},
                  {"steps", j.checkpoint_steps},
                  {"mode", to_string(j.checkpoint_mode)},
                  {"optimizer", j.save_optimizer},
                  {"sharded", j.sharded},
                  {"bandwidth", j.storage_bandwidth},
                  {"node_bandwidth", j.node_storage_bandwidth}}},
                {"power",
                 {{"busy", j.power_busy},
                  {"communication", j.power_communication},
                  {"idle", j.power_idle},
                  {"node", j.node_power},
                  {"pue", j.pue}}},
                {"price", j.price}};
  return out;
}

std::string describe(const Scenario& s) {
  namespace u = units;
  const auto& c = s.cluster;
  const auto& m = s.model;
  const auto& t = s.training;
  const auto& p = s.plan;
  std::string out = fmt::format("scenario  {}{}\n", s.name, s.description.empty() ? "" : "  -  " + s.description);
  out += fmt::format("cluster   {}: {} node(s) x {} {} = {} devices, {} {} ({}), {} {} per device\n", c.name, c.nodes,
                     c.gpus_per_node, c.device.name, c.total_gpus(), u::format_bytes(c.device.memory_bytes),
                     "memory", u::format_bandwidth(c.device.memory_bandwidth), topology::to_string(c.intra.fabric),
                     u::format_bandwidth(c.intra.bandwidth));
  if (c.device.clock_factor() < 1.0) {
    out += fmt::format("power     capped at {:.0f} W of the board's {:.0f} W: compute at {:.1f} % of its clock\n",
                       c.device.power_limit, c.device.tdp, 100.0 * c.device.clock_factor());
  }
  if (c.nodes > 1 || c.wan) {
    const std::string routing = c.inter.shape == topology::NetworkShape::single_switch
                                    ? std::string()
                                    : fmt::format(" ({} routing)", topology::to_string(c.inter.routing));
    out += fmt::format("network   {} x {} NICs per node, {}{}, latency {}\n", c.inter.nics_per_node,
                       u::format_bandwidth(c.inter.nic_bandwidth), topology::to_string(c.inter.shape), routing,
                       u::format_duration(c.inter.latency));
  }
  if (c.wan) {
    out += fmt::format("wan       nodes 0-{} | {}-{} joined at {}, latency {}\n", c.wan->first_group_nodes - 1,
                       c.wan->first_group_nodes, c.nodes - 1, u::format_bandwidth(c.wan->bandwidth),
                       u::format_duration(c.wan->latency));
  }
  if (m.kind == ModelKind::transformer) {
    out += fmt::format("model     {}: {} parameters, {} layers, hidden {}, {} heads{}, seq {}, vocab {}{}\n", m.name,
                       u::format_count(m.parameter_count()), m.layers, m.hidden, m.heads,
                       m.mla() ? fmt::format(" (latent attention, ranks {} / {})", m.q_lora_rank, m.kv_lora_rank) : "",
                       m.seq_len, m.vocab,
                       m.moe() ? fmt::format(", {} experts (top {}{}{}, {} parameters active)", m.experts, m.top_k,
                                             m.shared_expert_ffn_hidden > 0 ? ", and shared" : "",
                                             m.dense_layers > 0 ? fmt::format("; the first {} layers dense", m.dense_layers)
                                                                : "",
                                             u::format_count(m.active_parameter_count()))
                               : "");
  } else {
    out += fmt::format("model     {}: {} parameters, {} generic layers\n", m.name, u::format_count(m.parameter_count()),
                       m.layer_count());
  }
  out += fmt::format("training  global batch {}, micro-batch {} ({} per pipeline), {} ({} gradients), {}, recompute {}, "
                     "{} attention\n",
                     t.global_batch, t.micro_batch, s.micro_batches(), topology::to_string(t.precision),
                     topology::to_string(t.grad_dtype), to_string(t.optimizer), to_string(t.recompute),
                     to_string(t.attention));
  out += fmt::format("plan      dp {} x tp {} x pp {}{} = {} devices{}, schedule {}{}, ZeRO-{}{}{}, buckets {}, "
                     "collective {}, placement {}\n",
                     p.dp, p.tp, p.pp, p.cp > 1 ? fmt::format(" x cp {}", p.cp) : "", p.world(),
                     p.ep > 1 ? fmt::format(", experts over ep {}", p.ep) : "", to_string(p.schedule),
                     p.virtual_stages > 1 ? fmt::format(" (v = {})", p.virtual_stages) : "", p.zero,
                     p.hybrid_shard() ? fmt::format(" in shard groups of {}", p.shard_size()) : "",
                     p.offload_optimizer ? (p.offload_params ? ", optimizer and parameters offloaded to host memory"
                                                             : ", optimizer offloaded to host memory")
                                         : p.offload_activations ? ", activations offloaded to host memory"
                                                                 : "",
                     u::format_bytes(p.bucket_bytes), to_string(p.collective), placement_string(p));
  // The whole run, where its length is given (job:).
  if (t.total_steps > 0) {
    const JobSpec& j = s.job;
    const std::string length = t.tokens > 0.0 ? fmt::format("{} tokens = {} steps", u::format_count(t.tokens), t.total_steps)
                                              : fmt::format("{} steps", t.total_steps);
    const std::string interval = j.checkpoint_steps > 0      ? fmt::format("every {} steps", j.checkpoint_steps)
                                 : j.checkpoint_interval > 0 ? "every " + u::format_span(j.checkpoint_interval)
                                                             : std::string("at Daly's interval");
    out += fmt::format("run       {}; failures: a device every {}, a node every {}, restart {}; checkpoints {}, {}, {}{}, "
                       "{}\n",
                       length, u::format_span(j.device_mtbf), u::format_span(j.node_mtbf), u::format_span(j.restart),
                       interval, to_string(j.checkpoint_mode), j.sharded ? "sharded" : "one replica writes",
                       j.save_optimizer ? "" : ", weights only", u::format_bandwidth(j.storage_bandwidth));
    if (j.has_power()) {
      out += fmt::format("power     {:.0f} W computing, {:.0f} W communicating, {:.0f} W idle a device, {:.0f} W a node's other "
                         "parts, PUE {:.3g}{}\n",
                         j.power_busy, j.power_communication, j.power_idle, j.node_power, j.pue,
                         j.price > 0.0 ? fmt::format("; {:.4g} per device-hour", j.price) : "");
    }
  }
  return out;
}

}  // namespace parasim::scenario
