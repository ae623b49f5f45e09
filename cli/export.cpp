// parasim export SCENARIO --megatron: the plan as Megatron-LM's pretrain_gpt.py arguments.
#include <iostream>

#include <fmt/format.h>

#include "cli/common.hpp"
#include "scenario/describe.hpp"
#include "topology/units.hpp"

namespace parasim::cli {

namespace {

// The arguments, one per line with a trailing backslash; what Megatron-LM cannot be told
// (or what it does its own way) as comment lines before them.
std::string megatron_arguments(const scenario::Scenario& s) {
  const scenario::ModelSpec& m = s.model;
  const scenario::TrainingSpec& t = s.training;
  const scenario::ParallelPlan& p = s.plan;
  std::vector<std::string> notes;
  std::vector<std::string> args;
  auto arg = [&args](std::string a) { args.push_back(std::move(a)); };
  if (m.kind != scenario::ModelKind::transformer) {
    throw UsageError(fmt::format("'{}' is a generic layer list: Megatron-LM trains transformers only", m.name));
  }
  // The model.
  arg(fmt::format("--num-layers {}", m.layers));
  arg(fmt::format("--hidden-size {}", m.hidden));
  arg(fmt::format("--ffn-hidden-size {}", m.ffn_hidden));
  arg(fmt::format("--num-attention-heads {}", m.heads));
  if (m.kv_heads != m.heads && !m.mla()) arg(fmt::format("--group-query-attention --num-query-groups {}", m.kv_heads));
  arg(fmt::format("--seq-length {} --max-position-embeddings {}", m.seq_len, m.seq_len));
  arg(fmt::format("--tokenizer-type NullTokenizer --vocab-size {}", m.vocab));
  if (m.mlp == scenario::Mlp::swiglu) {
    arg("--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear");
  }
  if (!m.tie_embeddings) arg("--untie-embeddings-and-output-weights");
  arg(fmt::format("--attention-dropout {:g} --hidden-dropout {:g}", m.dropout, m.dropout));
  if (m.mla()) {
    arg(fmt::format(
        "--multi-latent-attention --kv-lora-rank {} --qk-head-dim {} --qk-pos-emb-head-dim {} --v-head-dim {}",
        m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim));
    if (m.q_lora_rank > 0) arg(fmt::format("--q-lora-rank {}", m.q_lora_rank));
  }
  if (m.moe()) {
    arg(fmt::format(
        "--num-experts {} --moe-router-topk {} --moe-ffn-hidden-size {} --moe-token-dispatcher-type alltoall",
        m.experts, m.top_k, m.expert_ffn_hidden));
    if (m.shared_expert_ffn_hidden > 0)
      arg(fmt::format("--moe-shared-expert-intermediate-size {}", m.shared_expert_ffn_hidden));
    if (m.capacity_factor > 0.0) arg(fmt::format("--moe-expert-capacity-factor {:g}", m.capacity_factor));
    if (m.dense_layers > 0)
      arg(fmt::format("--moe-layer-freq '([0]*{}+[1]*{})'", m.dense_layers, m.layers - m.dense_layers));
    if (m.moe_imbalance > 1.0)
      notes.push_back(fmt::format("model.moe_imbalance {:g} is the router's doing, not an argument", m.moe_imbalance));
  }
  if (!scenario::megatron_kernels(t.framework)) {
    notes.push_back(fmt::format("training.framework {}: these are the same plan's Megatron-LM arguments, and Megatron-LM "
                                "runs it with its own kernels (fused gradient accumulation, its overlaps)",
                                scenario::to_string(t.framework)));
  }
  // The batch and precision.
  arg(fmt::format("--micro-batch-size {} --global-batch-size {}", t.micro_batch, t.global_batch));
  switch (t.precision) {
    case scenario::Dtype::bf16: arg("--bf16"); break;
    case scenario::Dtype::fp16: arg(fmt::format("--fp16 --initial-loss-scale {:g}", t.loss_scale)); break;
    case scenario::Dtype::fp8:
      arg(fmt::format("--bf16 --fp8-format hybrid --fp8-recipe {}",
                      t.fp8_recipe == scenario::Fp8Recipe::delayed ? "delayed" : "tensorwise"));
      break;
    case scenario::Dtype::tf32:
    case scenario::Dtype::fp32:
      notes.push_back(
          fmt::format("training.precision {}: neither --bf16 nor --fp16 (PyTorch decides TF32 for the matmuls)",
                      topology::to_string(t.precision)));
      break;
  }
  if (t.grad_dtype != scenario::Dtype::fp32 &&
      (t.precision == scenario::Dtype::bf16 || t.precision == scenario::Dtype::fp8)) {
    notes.push_back("training.grad_dtype bf16: Megatron-LM accumulates and reduces fp32 main gradients under --bf16");
  }
  if (scenario::fused(t.attention)) arg("--use-flash-attn");
  if (t.recompute == scenario::Recompute::selective) arg("--recompute-granularity selective");
  if (t.recompute == scenario::Recompute::full)
    arg("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  arg(t.optimizer == scenario::Optimizer::sgd ? "--optimizer sgd" : "--optimizer adam");
  if (t.optimizer == scenario::Optimizer::adamw8bit)
    notes.push_back("training.optimizer adamw8bit: bitsandbytes' 8-bit Adam, not a Megatron argument");
  arg(fmt::format("--lr {:g}", t.learning_rate));
  // The plan.
  arg(fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", p.tp, p.pp));
  if (p.cp > 1) arg(fmt::format("--context-parallel-size {}", p.cp));
  if (p.ep > 1) arg(fmt::format("--expert-model-parallel-size {}", p.ep));
  if (p.virtual_stages > 1)
    arg(fmt::format("--num-layers-per-virtual-pipeline-stage {}", m.layers / (p.pp * p.virtual_stages)));
  if (p.pp > 1 && m.layers % p.pp != 0) {
    const int base = m.layers / p.pp;
    notes.push_back(
        fmt::format("an uneven split ({} layers over {} stages): the first {} stages take {} layers, the others {}",
                    m.layers, p.pp, m.layers % p.pp, base + 1, base));
  }
  if (p.sequence_parallel) arg("--sequence-parallel");
  if (p.tp_comm_overlap) arg("--tp-comm-overlap");
  if (p.zero == 1) arg("--use-distributed-optimizer");
  if (p.zero >= 2) {
    arg(p.zero == 3 ? "--use-torch-fsdp2" : "--use-distributed-optimizer");
    if (p.zero == 2)
      notes.push_back("plan.zero 2: Megatron's distributed optimizer shards the optimizer only (ZeRO-1)");
  }
  if (p.shard_group > 0)
    notes.push_back(
        fmt::format("plan.shard_group {}: hybrid sharding (FSDP's HSDP) has no Megatron-LM argument", p.shard_group));
  if (p.overlap_dp) arg("--overlap-grad-reduce");
  if (p.overlap_param_gather) arg("--overlap-param-gather");
  arg(fmt::format("--ddp-bucket-size {:.0f}", p.bucket_bytes / topology::dtype_bytes(t.grad_dtype)));
  if (p.offload_optimizer) arg("--optimizer-cpu-offload");
  if (p.offload_params)
    notes.push_back("plan.offload_params: parameters in host memory (ZeRO-Infinity) have no Megatron-LM argument");
  if (p.offload_activations) arg(fmt::format("--cpu-offloading --cpu-offloading-num-layers {}", m.layers - 1));
  std::string out = fmt::format(
      "# {}: {} ranks (dp {} x tp {} x pp {}{}{}); data parallelism is what is left of the ranks\n", s.name, p.world(),
      p.dp, p.tp, p.pp, p.cp > 1 ? fmt::format(" x cp {}", p.cp) : "", p.ep > 1 ? fmt::format(", ep {}", p.ep) : "");
  for (const std::string& n : notes) out += "# note: " + n + "\n";
  for (std::size_t i = 0; i < args.size(); ++i) out += args[i] + (i + 1 < args.size() ? " \\\n" : "\n");
  return out;
}

}  // namespace

void add_export(CLI::App& app) {
  struct Args {
    ScenarioArgs scenario;
    bool megatron = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd =
      app.add_subcommand("export", "Print the scenario's plan as another tool's arguments (--megatron: Megatron-LM's)");
  args->scenario.add_to(*cmd);
  cmd->add_flag("--megatron", args->megatron, "Megatron-LM's pretrain_gpt.py arguments")->required();
  cmd->callback([args] { std::cout << megatron_arguments(args->scenario.load()); });
}

}  // namespace parasim::cli
