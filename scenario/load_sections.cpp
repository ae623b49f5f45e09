// Readers for the model, training, plan, hardware and run sections: allowed keys, defaults,
// units and ranges (the cluster's: load_cluster.cpp).
// docs/scenario-format.md documents every key read here.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "scenario/limits.hpp"
#include "scenario/load.hpp"
#include "topology/units.hpp"

namespace parasim::scenario {

using topology::DeviceSpec;

namespace {

// Multi-head latent attention (model.kv_lora_rank > 0): the other keys take their
// DeepSeek defaults, and only with it.
void read_latent_attention(Reader& r, ModelSpec& m) {
  const char* keys[] = {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"};
  m.kv_lora_rank = r.integer("kv_lora_rank", 0, 0, limits::hidden);
  if (m.kv_lora_rank == 0) {
    for (const char* key : keys) {
      if (r.has(key) && r.number(key, 0.0, 0.0, 1e12) != 0.0) {
        r.fail(key, fmt::format("model.{} is a multi-head latent attention setting, but model.kv_lora_rank is 0 (no "
                                "latent attention); set model.kv_lora_rank",
                                key));
      }
    }
    return;
  }
  if (m.mlp != Mlp::swiglu) {
    r.fail("kv_lora_rank", "multi-head latent attention is modelled in DeepSeek's layout, without biases: it needs "
                           "model.mlp: swiglu");
  }
  if (r.has("kv_heads") && m.kv_heads != m.heads) {
    r.fail("kv_heads", "multi-head latent attention has no key/value heads of its own (every head's keys and values "
                       "come from the shared compression); leave model.kv_heads out");
  }
  m.q_lora_rank = r.integer("q_lora_rank", 0, 0, limits::hidden);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", m.head_dim(), 1, limits::hidden);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 64, 0, limits::hidden);
  m.v_head_dim = r.integer("v_head_dim", m.qk_nope_head_dim, 1, limits::hidden);
}

BatchNorm read_batch_norm(const Value& v, const Reader& layer, const GenericLayer& g, std::size_t i, LocationMap& where) {
  if (v.kind != Value::Kind::map) layer.fail("batch_norm", "expected a map {layers, channels, values}");
  Reader r(v, fmt::format("model.layers[{}].batch_norm", i), {"layers", "channels", "values"}, &where);
  BatchNorm bn;
  bn.layers = r.integer("layers", 1, 1, limits::layers);
  bn.channels = r.integer("channels", std::nullopt, 1, 1 << 24);
  bn.values = r.count("values", g.activations);
  if (bn.values > g.activations) {
    r.fail("values", fmt::format("the BatchNorm layers normalise at most the layer's {} stored values per sample",
                                 g.activations));
  }
  if (static_cast<double>(bn.layers) * bn.channels > bn.values) {
    r.fail("channels", fmt::format("{} BatchNorm layer(s) of {} channels need at least one value per channel of the "
                                   "{} normalised per sample",
                                   bn.layers, bn.channels, bn.values));
  }
  if (bn.params() >= g.params) {
    layer.fail("params", fmt::format("the layer's {} parameters must exceed its BatchNorm's {} (a scale and a shift "
                                     "per channel)",
                                     g.params, bn.params()));
  }
  return bn;
}

}  // namespace

ModelSpec read_model(const Value& v, LocationMap& where) {
  if (!v.is_map()) throw ScenarioError(v.loc, "model", fmt::format("expected a section of keys, got {}", v.kind_name()));
  const Entry* layers_entry = v.find("layers");
  const Entry* kind_entry = v.find("kind");
  ModelSpec m;
  m.kind = layers_entry != nullptr && layers_entry->value.kind == Value::Kind::sequence ? ModelKind::generic
                                                                                        : ModelKind::transformer;
  if (kind_entry != nullptr) {
    Value tmp;
    tmp.kind = Value::Kind::map;
    tmp.entries.push_back(*kind_entry);
    m.kind = Reader(tmp, "model", {"kind"}, nullptr)
                 .choice<ModelKind>("kind", std::nullopt,
                                    {{"transformer", ModelKind::transformer}, {"generic", ModelKind::generic}});
  }

  if (m.kind == ModelKind::generic) {
    Reader r(v, "model", {"preset", "name", "kind", "layers"}, &where);
    m.name = r.string("name", std::string("custom"));
    const Value* layers = r.get("layers");
    if (layers == nullptr || layers->kind != Value::Kind::sequence || layers->items.empty()) {
      r.fail("layers", "a generic model needs 'layers': a list of {name, params, forward_flops, activations}");
    }
    for (std::size_t i = 0; i < layers->items.size(); ++i) {
      Reader l(layers->items[i], fmt::format("model.layers[{}]", i),
               {"name", "params", "forward_flops", "activations", "batch_norm"}, &where);
      GenericLayer g;
      g.name = l.string("name", fmt::format("layer{}", i));
      g.params = l.count("params", std::nullopt);
      g.forward_flops = l.count("forward_flops", std::nullopt);
      g.activations = l.count("activations", std::nullopt);
      if (g.forward_flops <= 0.0) l.fail("forward_flops", "expected forward FLOPs per sample above zero");
      if (const Value* bn = l.get("batch_norm"); bn != nullptr) g.batch_norm = read_batch_norm(*bn, l, g, i, where);
      m.generic_layers.push_back(std::move(g));
    }
    return m;
  }

  Reader r(v, "model",
           {"preset", "name", "kind", "layers", "hidden", "heads", "kv_heads", "ffn_multiplier", "ffn_hidden", "vocab",
            "seq_len", "mlp", "tie_embeddings", "dropout", "experts", "top_k", "expert_ffn_hidden",
            "shared_expert_ffn_hidden", "capacity_factor", "moe_imbalance", "dense_layers", "q_lora_rank", "kv_lora_rank",
            "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
           &where);
  m.name = r.string("name", std::string("custom"));
  m.layers = r.integer("layers", std::nullopt, 1, limits::layers);
  m.hidden = r.integer("hidden", std::nullopt, 1, limits::hidden);
  m.heads = r.integer("heads", std::nullopt, 1, limits::heads);
  m.kv_heads = r.integer("kv_heads", m.heads, 1, limits::heads);
  m.vocab = r.integer("vocab", std::nullopt, 1, limits::vocab);
  m.seq_len = r.integer("seq_len", std::nullopt, 1, limits::seq_len);
  m.mlp = r.choice<Mlp>("mlp", Mlp::gelu, {{"gelu", Mlp::gelu}, {"swiglu", Mlp::swiglu}});
  m.tie_embeddings = r.boolean("tie_embeddings", true);
  m.dropout = r.number("dropout", m.mlp == Mlp::gelu ? 0.1 : 0.0, 0.0, 0.99);
  if (r.has("ffn_hidden") && r.has("ffn_multiplier")) {
    r.fail("ffn_multiplier", "give either ffn_hidden or ffn_multiplier, not both");
  }
  const double mult = r.number("ffn_multiplier", 4.0, 0.01, 1024.0);
  const double ffn = mult * m.hidden;
  if (!r.has("ffn_hidden") && ffn != std::floor(ffn)) {
    r.fail("ffn_multiplier", fmt::format("ffn_multiplier x hidden = {} is not a whole number", ffn));
  }
  if (!r.has("ffn_hidden") && ffn > limits::ffn_hidden) {
    r.fail("ffn_multiplier", fmt::format("ffn_multiplier x hidden = {} passes the limit of {} on the MLP width", ffn,
                                         limits::ffn_hidden));
  }
  m.ffn_hidden = r.integer("ffn_hidden", static_cast<int>(ffn), 1, limits::ffn_hidden);
  m.experts = r.integer("experts", 0, 0, limits::experts);
  // A dense model takes the routing settings only at their neutral values (what a dense
  // model's editor shows): top_k, expert_ffn_hidden, shared_expert_ffn_hidden and
  // capacity_factor 0, moe_imbalance 1.
  const char* dense = "is a mixture-of-experts setting, but model.experts is 0 (a dense MLP); set model.experts";
  for (const char* key :
       {"top_k", "expert_ffn_hidden", "shared_expert_ffn_hidden", "capacity_factor", "moe_imbalance", "dense_layers"}) {
    const double neutral = std::string_view(key) == "moe_imbalance" ? 1.0 : 0.0;
    if (m.experts == 0 && r.has(key) && r.number(key, neutral, 0.0, 1e12) != neutral) {
      r.fail(key, fmt::format("model.{} {}", key, dense));
    }
  }
  if (m.experts > 0) {
    m.top_k = r.integer("top_k", std::min(2, m.experts), 1, m.experts);
    m.expert_ffn_hidden = r.integer("expert_ffn_hidden", m.ffn_hidden, 1, limits::ffn_hidden);
    m.shared_expert_ffn_hidden = r.integer("shared_expert_ffn_hidden", 0, 0, limits::ffn_hidden);
    m.capacity_factor = r.number("capacity_factor", 0.0, 0.0, 1024.0);
    if (m.capacity_factor > 0.0 && m.capacity_factor < 1.0 / m.top_k) {
      r.fail("capacity_factor", fmt::format("a capacity factor below 1/top_k ({:.3g}) drops more tokens than the "
                                            "experts can ever take; 0 is dropless, 1 to 2 is usual",
                                            1.0 / m.top_k));
    }
    m.moe_imbalance = r.number("moe_imbalance", 1.0, 1.0, static_cast<double>(m.experts));
    m.dense_layers = r.integer("dense_layers", 0, 0, m.layers - 1);
  }
  read_latent_attention(r, m);
  return m;
}

TrainingSpec read_training(const Value& v, bool gpu, LocationMap& where) {
  Reader r(v, "training", {"framework", "global_batch", "micro_batch", "precision", "optimizer", "recompute", "learning_rate", "loss_scale",
            "loss_scale_window", "attention", "grad_dtype", "fp8_recipe", "grad_clip", "warmup_steps", "lr_decay",
            "decay_steps", "min_lr", "lr_scaling", "lr_reference_batch", "master_weights", "loss_scaling",
            "batch_norm", "compile", "tokens", "steps"},
           &where);
  TrainingSpec t;
  // The run's length: tokens (steps from them once the model's sequence is known,
  // from_document) or optimizer steps.
  if (r.has("tokens") && r.has("steps")) {
    r.fail("steps", "give the run's length once: training.tokens or training.steps, not both");
  }
  t.tokens = r.count("tokens", 0.0, 1.0, limits::run_tokens);
  t.total_steps = r.integer("steps", 0, 1, limits::run_steps);
  t.framework = r.choice<Framework>("framework", Framework::megatron_core,
                                    {{"megatron-core", Framework::megatron_core},
                                     {"nemo", Framework::nemo},
                                     {"megatron-lm", Framework::megatron_lm},
                                     {"megatron-deepspeed", Framework::megatron_deepspeed},
                                     {"pytorch-fsdp", Framework::pytorch_fsdp},
                                     {"torchtitan", Framework::torchtitan}});
  // torch.compile around the model (TorchTitan's [training] compile, off by default in its
  // train_configs): Inductor fuses the element-wise chains eager mode runs op by op
  // (workload::KernelPlan::compiled).
  t.compile = r.boolean("compile", false);
  t.global_batch = r.integer("global_batch", std::nullopt, 1, limits::global_batch);
  t.micro_batch = r.integer("micro_batch", 1);
  t.precision = r.choice<Dtype>("precision", Dtype::bf16,
                                {{"fp32", Dtype::fp32}, {"tf32", Dtype::tf32}, {"bf16", Dtype::bf16}, {"fp16", Dtype::fp16},
                                 {"fp8", Dtype::fp8}});
  t.fp8_recipe = r.choice<Fp8Recipe>("fp8_recipe", Fp8Recipe::delayed,
                                     {{"delayed", Fp8Recipe::delayed}, {"current", Fp8Recipe::current}});
  t.optimizer = r.choice<Optimizer>("optimizer", Optimizer::adamw,
                                    {{"adamw", Optimizer::adamw}, {"sgd", Optimizer::sgd}, {"adamw8bit", Optimizer::adamw8bit}});
  t.recompute = r.choice<Recompute>(
      "recompute", Recompute::none,
      {{"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full}});
  t.learning_rate = r.number("learning_rate", 1e-3, 1e-12, 10.0);
  // At most 2^32, Megatron-LM's initial scale (--initial-loss-scale), the largest any framework
  // starts from: a scale past fp16's range only overflows step after step until it halves.
  t.loss_scale = r.number("loss_scale", 65536.0, 1.0, 4294967296.0);
  t.loss_scale_window = r.integer("loss_scale_window", 1000);
  t.grad_clip = r.number("grad_clip", 0.0, 0.0, 1e12);
  t.master_weights = r.boolean("master_weights", true);
  if (!t.master_weights && topology::dtype_bytes(topology::storage_dtype(t.precision)) != 2) {
    r.fail("master_weights", fmt::format("fp32 master weights are kept only under 16-bit precision (bf16, fp16, fp8); "
                                         "precision is {}", topology::to_string(t.precision)));
  }
  t.loss_scaling = r.choice<bool>("loss_scaling", true, {{"dynamic", true}, {"none", false}});
  if (!t.loss_scaling && t.precision != Dtype::fp16) {
    r.fail("loss_scaling", fmt::format("loss scaling applies to fp16 only; precision is {}", topology::to_string(t.precision)));
  }
  t.sync_batch_norm = r.choice<bool>("batch_norm", false, {{"local", false}, {"sync", true}});
  t.warmup_steps = r.integer("warmup_steps", 0, 0);
  t.lr_decay = r.choice<LrDecay>("lr_decay", LrDecay::constant,
                                 {{"constant", LrDecay::constant}, {"linear", LrDecay::linear}, {"cosine", LrDecay::cosine}});
  t.decay_steps = r.integer("decay_steps", 0, 0);
  t.min_lr = r.number("min_lr", 0.0, 0.0, t.learning_rate);
  if (t.lr_decay != LrDecay::constant && t.decay_steps <= t.warmup_steps) {
    r.fail(r.has("decay_steps") ? "decay_steps" : "lr_decay",
           fmt::format("a {} decay needs decay_steps past warmup_steps ({})", t.lr_decay == LrDecay::linear ? "linear" : "cosine",
                       t.warmup_steps));
  }
  t.lr_scaling = r.choice<LrScaling>("lr_scaling", LrScaling::none,
                                     {{"none", LrScaling::none}, {"linear", LrScaling::linear}, {"sqrt", LrScaling::sqrt}});
  t.lr_reference_batch = r.integer("lr_reference_batch", t.lr_scaling == LrScaling::none ? 0 : std::optional<int>{}, 0);
  // Megatron-DeepSpeed's attention is its unfused core (CoreAttention: baddbmm, the fused
  // scale-mask-softmax, bmm) unless --use-flash-attn is given (megatron/arguments.py, off by
  // default), as in BLOOM's runs. TorchTitan calls PyTorch's scaled_dot_product_attention,
  // whose CUDA backends are tried flash (FlashAttention-2), memory-efficient, math, then
  // cuDNN: cuDNN's became opt-in after PyTorch 2.5 (pytorch/pytorch#138522; on a December
  // 2024 nightly SDPA ran 329 TFLOP/s on an H100 where its cuDNN backend ran 631,
  // pytorch/pytorch#142132). The other frameworks default to the device's best fused kernel.
  const bool unfused = !gpu || t.framework == Framework::megatron_deepspeed;
  const Attention fused_default = t.framework == Framework::torchtitan ? Attention::flash_v2 : Attention::flash;
  t.attention = r.choice<Attention>("attention", unfused ? Attention::naive : fused_default,
                                    {{"flash", Attention::flash},
                                     {"flash-v2", Attention::flash_v2},
                                     {"flash-v1", Attention::flash_v1},
                                     {"naive", Attention::naive}});
  // Megatron-LM keeps fp32 main gradients under bf16 (forced; fp8 trains on bf16 weights)
  // and the compute type's otherwise.
  const Dtype weights = topology::storage_dtype(t.precision);
  const Dtype storage = weights == Dtype::tf32 ? Dtype::fp32 : weights;
  t.grad_dtype = r.choice<Dtype>("grad_dtype", weights == Dtype::bf16 ? Dtype::fp32 : storage,
                                 {{"fp32", Dtype::fp32}, {"bf16", Dtype::bf16}, {"fp16", Dtype::fp16}});
  if (topology::dtype_bytes(t.grad_dtype) < topology::dtype_bytes(weights)) {
    r.fail("grad_dtype", fmt::format("the main gradients cannot be narrower than the {} weights", topology::to_string(t.precision)));
  }
  return t;
}

ParallelPlan read_plan(const Value& v, int cluster_gpus, Framework framework, LocationMap& where) {
  Reader r(v, "plan",
           {"dp", "tp", "pp", "cp", "ep", "virtual_stages", "schedule", "sequence_parallel", "pp_scatter_gather", "tp_comm_overlap", "zero", "shard_group", "bucket_size",
            "overlap_dp", "overlap_param_gather", "offload_optimizer", "offload_params", "offload_activations", "collective", "placement"},
           &where);
  ParallelPlan p;
  p.tp = r.integer("tp", 1);
  p.pp = r.integer("pp", 1);
  p.cp = r.integer("cp", 1);
  const long long tp_pp = static_cast<long long>(p.tp) * p.pp * p.cp;
  if (!r.has("dp") && cluster_gpus % tp_pp != 0) {
    r.fail("dp", fmt::format("dp is not given and tp x pp{} = {} does not divide the cluster's {} GPUs; set plan.dp",
                             p.cp > 1 ? " x cp" : "", tp_pp, cluster_gpus));
  }
  p.dp = r.integer("dp", static_cast<int>(std::max(1LL, cluster_gpus / tp_pp)));
  p.ep = r.integer("ep", 1);
  p.virtual_stages = r.integer("virtual_stages", 1);
  p.schedule = r.choice<Schedule>("schedule", p.virtual_stages > 1 ? Schedule::interleaved_1f1b : Schedule::one_f_one_b,
                                  {{"gpipe", Schedule::gpipe},
                                   {"1f1b", Schedule::one_f_one_b},
                                   {"interleaved-1f1b", Schedule::interleaved_1f1b}});
  p.sequence_parallel = r.boolean("sequence_parallel", false);
  p.pp_scatter_gather = r.boolean("pp_scatter_gather", true);
  p.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
  // NeMo's recipes shard the optimizer (distributed_fused_adam; nemo_defaults in load.cpp).
  p.zero = r.integer("zero", framework == Framework::nemo ? 1 : 0, 0, 3);
  p.shard_group = r.integer("shard_group", 0, 0, limits::gpus);
  p.bucket_bytes = r.bytes("bucket_size", 25.0 * 1024 * 1024);
  // DeepSpeed's pipeline engine reduces the gradients after the pipeline's flush
  // (TrainSchedule's last step: ReduceTiedGrads, ReduceGrads, then OptimizerStep;
  // deepspeed/runtime/pipe/schedule.py), never under the backward. Megatron-LM reduces them
  // after the backward unless --overlap-grad-reduce is given (megatron/training/arguments.py:
  // action='store_true', off by default), as import --megatron reads a script without it.
  p.overlap_dp = r.boolean("overlap_dp", !(framework == Framework::megatron_deepspeed && p.pp > 1) &&
                                             framework != Framework::megatron_lm);
  p.overlap_param_gather = r.boolean("overlap_param_gather", default_param_gather_overlap(framework, p));
  if (p.overlap_param_gather && p.zero != 1) {
    r.fail("overlap_param_gather", "overlapping the parameter all-gather needs the distributed optimizer (plan.zero: 1), "
                                   "whose all-gather it moves");
  }
  p.offload_optimizer = r.boolean("offload_optimizer", false);
  p.offload_params = r.boolean("offload_params", false);
  p.offload_activations = r.boolean("offload_activations", false);
  if (p.offload_params && !p.offload_optimizer) {
    r.fail("offload_params", "offloading the parameters needs the optimizer offloaded too (plan.offload_optimizer: "
                             "true): the host's optimizer step updates them in place (ZeRO-Infinity)");
  }
  p.collective = r.choice<Collective>("collective", Collective::automatic,
                                      {{"auto", Collective::automatic},
                                       {"ring", Collective::ring},
                                       {"tree", Collective::tree},
                                       {"hierarchical", Collective::hierarchical},
                                       {"nvls", Collective::nvls},
                                       {"direct", Collective::direct}});
  if (const Value* pl = r.get("placement"); pl != nullptr) {
    const std::string text = r.string("placement", std::nullopt);
    std::vector<Dim> dims;
    std::string word;
    auto flush = [&] {
      if (word.empty()) return;
      if (word == "tp") dims.push_back(Dim::tp);
      else if (word == "dp") dims.push_back(Dim::dp);
      else if (word == "pp") dims.push_back(Dim::pp);
      else if (word == "cp") dims.push_back(Dim::cp);
      else r.fail_value("placement", *pl, fmt::format("unknown dimension '{}': expected tp, cp, dp and pp", word));
      word.clear();
    };
    for (char ch : text) {
      if (ch == ',' || ch == '-' || ch == ' ' || ch == '>') flush();
      else word.push_back(ch);
    }
    flush();
    // Without cp its place is next to tp (Megatron's order: tp, cp, dp, pp).
    auto has = [&](Dim d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
    // (A list without tp, such as dp,dp,pp, is refused below, not given a cp past its end.)
    if (dims.size() == 3 && !has(Dim::cp) && has(Dim::tp)) {
      dims.insert(std::find(dims.begin(), dims.end(), Dim::tp) + 1, Dim::cp);
    }
    const bool perm = dims.size() == 4 && has(Dim::tp) && has(Dim::dp) && has(Dim::pp) && has(Dim::cp);
    if (!perm) {
      r.fail_value("placement", *pl,
                   fmt::format("expected tp, dp and pp (and cp) each once, innermost first (such as tp,dp,pp), got '{}'",
                               text));
    }
    std::copy(dims.begin(), dims.end(), p.placement.begin());
  }
  return p;
}

HardwareSpec read_hardware(const Value& v, LocationMap& where) {
  Reader r(v, "hardware", {"profile"}, &where);
  HardwareSpec h;
  if (!r.has("profile")) return h;
  const std::string given = r.string("profile", std::nullopt);
  // Relative to the file that named it.
  const Location at = r.location_of("profile");
  std::filesystem::path p(given);
  if (p.is_relative() && !at.file.starts_with("--set") && !at.file.starts_with("preset ")) {
    p = std::filesystem::path(at.file).parent_path() / p;
  }
  // Only a regular file: opening a FIFO blocks, and /dev/zero never ends.
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) {
    r.fail("profile", fmt::format("cannot read the device profile '{}' (looked for {})", given, p.string()));
  }
  if (!std::filesystem::is_regular_file(p, ec)) {
    r.fail("profile", fmt::format("the device profile '{}' is not a regular file (a directory, device, FIFO or socket)",
                                  given));
  }
  std::ifstream in(p);
  if (!in) r.fail("profile", fmt::format("cannot read the device profile '{}' (looked for {})", given, p.string()));
  h.profile = p.string();
  return h;
}

RunSpec read_run(const Value& v, const DeviceSpec& device, int world, LocationMap& where) {
  Reader r(v, "run", {"backend", "steps", "warmup", "seed", "on_divergence", "divergence_factor", "inject"}, &where);
  RunSpec run;
  const Backend natural = device.name == "cpu-core" ? Backend::cpu : Backend::cuda;
  run.backend = r.choice<Backend>("backend", natural, {{"cpu", Backend::cpu}, {"cuda", Backend::cuda}});
  run.steps = r.integer("steps", 10, 1, limits::steps);
  run.warmup = r.integer("warmup", 2, 0, limits::steps);
  run.seed = static_cast<std::uint64_t>(r.count("seed", 1234.0));
  run.on_divergence = r.choice<OnDivergence>(
      "on_divergence", OnDivergence::warn,
      {{"warn", OnDivergence::warn}, {"stop", OnDivergence::stop}, {"ignore", OnDivergence::ignore}});
  run.divergence_factor = r.number("divergence_factor", 3.0, 1.0, 1e12);
  if (const Value* list = r.get("inject"); list != nullptr && list->kind != Value::Kind::null) {
    if (list->kind != Value::Kind::sequence) r.fail("inject", "expected a list of {step, rank, kind, factor} entries");
    for (std::size_t i = 0; i < list->items.size(); ++i) {
      Reader f(list->items[i], fmt::format("run.inject[{}]", i), {"step", "rank", "kind", "factor"}, &where);
      Injection in;
      in.step = f.integer("step", 0, 0, run.warmup + run.steps);  // as run counts them; 0: every step
      in.rank = f.integer("rank", std::nullopt, 0, world - 1);
      in.kind = f.choice<InjectKind>("kind", std::nullopt,
                                     {{"scale", InjectKind::scale}, {"zero", InjectKind::zero}, {"nan", InjectKind::nan},
                                      {"random", InjectKind::random}, {"delay", InjectKind::delay}});
      const bool factored = in.kind == InjectKind::scale || in.kind == InjectKind::random || in.kind == InjectKind::delay;
      if (!factored && f.has("factor")) f.fail("factor", "applies to the scale, random and delay kinds only");
      in.factor = factored ? f.number("factor", std::nullopt, in.kind == InjectKind::delay ? 1.0 : -1e12, 1e12) : 1.0;
      run.inject.push_back(in);
    }
  }
  return run;
}

namespace {

// A power given in watts ("450W", "2.8 kW") or as a share of `reference` ("40%", 0.4).
double power_or_share(const Reader& r, std::string_view key, double fallback_share, double reference,
                      const char* of_what) {
  const Value* v = r.get(key);
  if (v == nullptr || v->kind == Value::Kind::null) return fallback_share * reference;
  if (!v->is_scalar()) r.fail_value(key, *v, "expected a power such as 450W or a share such as 40%");
  const std::string& text = v->scalar;
  const bool share = !text.empty() && (text.back() == '%' || text.find_first_not_of("0123456789.eE+- ") == std::string::npos);
  if (share) {
    const double f = r.fraction(key, std::nullopt, 1.0);
    if (reference <= 0.0) {
      r.fail_value(key, *v, fmt::format("a share needs {}, which is not known here: give watts (e.g. 450W)", of_what));
    }
    return f * reference;
  }
  return r.power(key, std::nullopt);
}

}  // namespace

JobSpec read_job(const Value& v, const topology::ClusterSpec& cluster, LocationMap& where) {
  Reader r(v, "job", {"failures", "checkpoint", "power", "price"}, &where);
  JobSpec j;
  static const Value empty = [] {
    Value e;
    e.kind = Value::Kind::map;
    return e;
  }();
  auto sub = [&](std::string_view key) -> const Value& {
    const Value* s = r.get(key);
    return s != nullptr && s->kind != Value::Kind::null ? *s : empty;
  };
  {
    Reader f(sub("failures"), r.key_path("failures"), {"device_mtbf", "node_mtbf", "restart"}, &where);
    j.device_mtbf = f.duration("device_mtbf", j.device_mtbf, limits::max_span);
    j.node_mtbf = f.duration("node_mtbf", j.node_mtbf, limits::max_span);
    if (j.device_mtbf < 60.0) f.fail("device_mtbf", "expected a mean time between failures of at least 1 min");
    if (j.node_mtbf < 60.0) f.fail("node_mtbf", "expected a mean time between failures of at least 1 min");
    j.restart = f.duration("restart", j.restart, 7.0 * 86400.0);
  }
  {
    Reader c(sub("checkpoint"), r.key_path("checkpoint"),
             {"interval", "steps", "mode", "optimizer", "sharded", "bandwidth", "node_bandwidth"}, &where);
    if (c.has("interval") && c.has("steps")) {
      c.fail("steps", "give the checkpoint interval once: checkpoint.interval (a time or auto) or checkpoint.steps");
    }
    if (const Value* iv = c.get("interval"); iv != nullptr && iv->is_scalar() && iv->scalar == "auto") {
      j.checkpoint_interval = 0.0;
    } else {
      j.checkpoint_interval = c.duration("interval", 0.0, limits::max_span);
      if (c.has("interval") && j.checkpoint_interval <= 0.0) {
        c.fail("interval", "expected auto (the Young / Daly optimum) or a time such as 30min");
      }
    }
    j.checkpoint_steps = c.integer("steps", 0, 1, limits::run_steps);
    j.checkpoint_mode =
        c.choice<CheckpointMode>("mode", CheckpointMode::sync, {{"sync", CheckpointMode::sync}, {"async", CheckpointMode::async}});
    j.save_optimizer = c.boolean("optimizer", true);
    j.sharded = c.boolean("sharded", true);
    j.storage_bandwidth = c.bandwidth("bandwidth", j.storage_bandwidth);
    j.node_storage_bandwidth = c.has("node_bandwidth") ? c.bandwidth("node_bandwidth", std::nullopt) : 0.0;
  }
  {
    Reader p(sub("power"), r.key_path("power"), {"busy", "communication", "idle", "node", "pue"}, &where);
    const topology::DeviceSpec& d = cluster.device;
    const double board = d.power_limit > 0.0 && (d.tdp <= 0.0 || d.power_limit < d.tdp) ? d.power_limit : d.tdp;
    j.power_busy = p.has("busy") ? p.power("busy", std::nullopt) : board;
    j.power_communication = power_or_share(p, "communication", 0.4, j.power_busy, "the busy power (job.power.busy)");
    // Idle inside a job the device stays in P0 with its memory held: an H100 reads 140-145 W
    // of 700 at 0 % utilisation so (docs/scenario-format.md, job.power.idle).
    j.power_idle = power_or_share(p, "idle", 0.2, j.power_busy, "the busy power (job.power.busy)");
    j.node_power = power_or_share(p, "node", 0.5, j.power_busy * cluster.gpus_per_node,
                                  "the busy power (job.power.busy)");
    if (j.power_communication > j.power_busy && j.power_busy > 0.0) {
      p.fail("communication", "expected at most the busy power (job.power.busy)");
    }
    if (j.power_idle > j.power_communication && j.power_busy > 0.0) {
      p.fail("idle", "expected at most the power while communicating (job.power.communication)");
    }
    j.pue = p.number("pue", 1.1, 1.0, 10.0);
  }
  j.price = r.number("price", 0.0, 0.0, 1e6);
  return j;
}

}  // namespace parasim::scenario
