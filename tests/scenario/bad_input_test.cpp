// Bad scenarios: each case breaks one thing in a valid scenario and states the error it
// must produce: the key named, the line pointed at, and words of the message.
#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;
using parasim::scenario::test::good;

namespace {

std::string replace(const std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("test case edits text that is not there: " + from);
  std::string out = text;
  out.replace(at, from.size(), to);
  return out;
}

// Inserts `lines` after the line that reads `line`.
std::string after(const std::string& line, const std::string& lines) { return replace(good, line + "\n", line + "\n" + lines); }

struct Case {
  std::string name;
  std::string text;
  std::string key;   // dotted key the error names
  int line;          // 0: not checked
  std::vector<std::string> says;
  std::vector<std::string> overrides = {};
  std::string file = "bad.yaml";
};

const std::string cnn = "cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 64}\n";
const std::string custom_device_head = R"(cluster:
  gpus_per_node: 4
  intra_node: {fabric: nvswitch, bandwidth: 100 GB/s}
)";

std::vector<Case> make_cases() {
  return {
    // YAML itself
    {"YAML syntax error", replace(good, "  tp: 2", "  tp: [2"), "", 28, {"YAML syntax error"}},
    {"duplicate key", after("  tp: 2", "  tp: 4\n"), "plan.tp", 28, {"duplicate key", "first set on line 27"}},
    {"scenario is a list", "- a\n- b\n", "", 1, {"a scenario is a section of keys, got a list"}},
    {"empty value", replace(good, "  tp: 2", "  tp:"), "plan.tp", 27, {"a value is required here"}},
    {"list where a value belongs", replace(good, "  tp: 2", "  tp: [2, 4]"), "plan.tp", 27,
     {"expected a single value, got a list"}},
    {"value where a section belongs", replace(good, "plan:\n  dp: 4\n  tp: 2\n  pp: 2\n", "plan: fast\n"), "plan", 25,
     {"expected a section of keys, got a single value"}},
    // unknown and missing keys
    {"unknown top-level key", good + "plann:\n  tp: 2\n", "plann", 29, {"unknown key 'plann'", "did you mean 'plan'"}},
    {"unknown attention", after("  precision: bf16", "  attention: flashy\n"), "training.attention", 25,
     {"flashy", "flash", "naive"}},
    {"gradients narrower than the weights", replace(replace(good, "  precision: bf16", "  precision: fp32"), "  micro_batch: 2",
                                                       "  micro_batch: 2\n  grad_dtype: bf16"),
     "training.grad_dtype", 24, {"cannot be narrower than the fp32 weights"}},
    {"NVLS on a mesh", replace(replace(good, "    fabric: nvswitch", "    fabric: nvlink-mesh"), "    latency: 2us",
                               "    latency: 2us\n    nvls: 0.7"),
     "cluster.intra_node.nvls", 10, {"in-switch reductions need the nvswitch fabric"}},
    {"link efficiency above 1", after("    latency: 2us", "    efficiency: 1.2\n"), "cluster.intra_node.efficiency", 10,
     {"1.2"}},
    {"unknown collective library", after("  gpus_per_node: 8", "  collectives: gloo\n"), "cluster.collectives", 5,
     {"gloo", "nccl", "mpi"}},
    {"unknown cluster key", replace(good, "  gpus_per_node: 8", "  gpu_per_node: 8"), "cluster.gpu_per_node", 4,
     {"did you mean 'gpus_per_node'", "allowed keys:"}},
    {"unknown network key", after("    shape: fat-tree", "    nic_bw: 100Gbps\n"), "cluster.inter_node.nic_bw", 15,
     {"unknown key 'nic_bw'"}},
    {"unknown model key", after("  seq_len: 2048", "  hidden_size: 2048\n"), "model.hidden_size", 21,
     {"unknown key 'hidden_size'"}},
    {"missing gpus_per_node", replace(good, "  gpus_per_node: 8\n", ""), "cluster.gpus_per_node", 3,
     {"missing required key 'gpus_per_node'"}},
    {"missing training section", replace(good, "training:\n  global_batch: 64\n  micro_batch: 2\n  precision: bf16\n", ""),
     "training", 0, {"missing required section 'training'"}},
    {"missing global_batch", replace(good, "  global_batch: 64\n", ""), "training.global_batch", 22,
     {"missing required key 'global_batch'"}},
    {"missing device", replace(good, "  device: h100-sxm\n", ""), "cluster.device", 3, {"missing required key 'device'"}},
    {"network missing on a multi-node cluster",
     replace(good, "  inter_node:\n    nics_per_node: 8\n    nic_bandwidth: 400Gbps\n    latency: 4us\n    shape: fat-tree\n", ""),
     "cluster.inter_node", 3, {"a cluster of 2 nodes needs an 'inter_node' section"}},
    // numbers and units
    {"word for a count", replace(good, "  nodes: 2", "  nodes: two"), "cluster.nodes", 3,
     {"expected an integer from 1 to 65536, got 'two'"}},
    {"zero nodes", replace(good, "  nodes: 2", "  nodes: 0"), "cluster.nodes", 3, {"expected an integer from 1 to 65536, got '0'"}},
    {"absurd cluster size", replace(good, "  nodes: 2", "  nodes: 100000000"), "cluster.nodes", 3,
     {"expected an integer from 1 to 65536, got '100000000'"}},
    {"degrees whose product overflows", replace(replace(good, "  dp: 4", "  dp: 1000000000"), "  tp: 2", "  tp: 1000000000"),
     "plan.dp", 26, {"= 2000000000000000000 devices, but the cluster has 16"}},
    {"fractional tp", replace(good, "  tp: 2", "  tp: 1.5"), "plan.tp", 27, {"expected a positive integer of at most 1,073,741,824, got '1.5'"}},
    {"negative dp", replace(good, "  dp: 4", "  dp: -4"), "plan.dp", 26, {"expected a positive integer of at most 1,073,741,824, got '-4'"}},
    {"tp past the integer limit", replace(good, "  tp: 2", "  tp: 2147483648"), "plan.tp", 27,
     {"expected a positive integer of at most 1,073,741,824, got '2147483648'"}},
    {"bandwidth without unit", replace(good, "bandwidth: 450 GB/s", "bandwidth: 450"), "cluster.intra_node.bandwidth", 8,
     {"needs a unit", "bits or bytes"}},
    {"unknown bandwidth unit", replace(good, "400Gbps", "400 Gbits"), "cluster.inter_node.nic_bandwidth", 12,
     {"unknown bandwidth unit 'Gbits'"}},
    {"zero bandwidth", replace(good, "400Gbps", "0Gbps"), "cluster.inter_node.nic_bandwidth", 12,
     {"expected a bandwidth from 1 KB/s to 1 EB/s, got '0Gbps'"}},
    {"latency without unit", replace(good, "latency: 2us", "latency: 2"), "cluster.intra_node.latency", 9,
     {"needs a unit", "2us"}},
    {"bucket size without unit", after("  pp: 2", "  bucket_size: 25\n"), "plan.bucket_size", 29, {"needs a unit", "25MB"}},
    {"oversubscription below one", after("    shape: fat-tree", "    oversubscription: 0.5\n"),
     "cluster.inter_node.oversubscription", 15, {"expected a number from 1 to 1024"}},
    // choices
    {"unknown fabric", replace(good, "fabric: nvswitch", "fabric: nvswich"), "cluster.intra_node.fabric", 7,
     {"expected one of nvswitch, nvlink-mesh, pcie, shared-memory", "did you mean 'nvswitch'"}},
    {"unknown network shape", replace(good, "shape: fat-tree", "shape: fattree"), "cluster.inter_node.shape", 14,
     {"did you mean 'fat-tree'"}},
    {"unknown precision", replace(good, "precision: bf16", "precision: bf8"), "training.precision", 24,
     {"expected one of fp32, tf32, bf16, fp16", "did you mean 'bf16'"}},
    {"unknown optimizer", after("  precision: bf16", "  optimizer: adam\n"), "training.optimizer", 25,
     {"did you mean 'adamw'"}},
    {"unknown recompute", after("  precision: bf16", "  recompute: partial\n"), "training.recompute", 25,
     {"expected one of none, selective, full"}},
    {"unknown schedule", after("  pp: 2", "  schedule: 1f1b-interleaved\n"), "plan.schedule", 29,
     {"expected one of gpipe, 1f1b, interleaved-1f1b"}},
    {"unknown collective", after("  pp: 2", "  collective: rings\n"), "plan.collective", 29, {"did you mean 'ring'"}},
    {"nvls without an NVSwitch", after("  pp: 2", "  collective: nvls\n"), "plan.collective", 29,
     {"collective nvls reduces inside an NVSwitch", "fabric is pcie"}, {"cluster.intra_node.fabric=pcie"}},
    {"ZeRO stage 4", after("  pp: 2", "  zero: 4\n"), "plan.zero", 29, {"expected an integer from 0 to 3, got '4'"}},
    {"shard group not dividing dp", after("  pp: 2", "  zero: 1\n  shard_group: 3\n"), "plan.shard_group", 30,
     {"shard_group 3 must divide dp"}},
    {"shard group without ZeRO", after("  pp: 2", "  shard_group: 2\n"), "plan.shard_group", 29,
     {"but plan.zero is 0"}},
    {"ZeRO-3 with a tied embedding over stages", after("  pp: 2", "  zero: 3\n"), "plan.zero", 29,
     {"ZeRO-3 with pp 2 needs an untied LM head", "model.tie_embeddings: false"}},
    {"parameter gather overlap without the distributed optimizer", after("  pp: 2", "  overlap_param_gather: true\n"),
     "plan.overlap_param_gather", 29, {"needs the distributed optimizer (plan.zero: 1)"}},
    {"not a boolean", after("  pp: 2", "  sequence_parallel: maybe\n"), "plan.sequence_parallel", 29,
     {"expected true or false"}},
    {"placement missing a dimension", after("  pp: 2", "  placement: tp,dp\n"), "plan.placement", 29,
     {"expected tp, dp and pp (and cp) each once"}},
    // Three dimensions without tp once wrote cp past the list's end (a corrupted heap).
    {"placement without tp", after("  pp: 2", "  placement: dp,dp,pp\n"), "plan.placement", 29,
     {"expected tp, dp and pp (and cp) each once"}},
    {"placement of one dimension thrice", after("  pp: 2", "  placement: pp,pp,pp\n"), "plan.placement", 29,
     {"expected tp, dp and pp (and cp) each once"}},
    {"context parallelism past the devices", after("  pp: 2", "  cp: 2\n"), "plan.dp", 26,
     {"dp x tp x pp x cp = 4 x 2 x 2 x 2 = 32 devices, but the cluster has 16"}},
    {"context parallelism not dividing the sequence", replace(after("  pp: 2", "  cp: 2\n"), "  dp: 4", "  dp: 2"),
     "plan.cp", 29, {"2 x cp = 4 chunks: seq_len 2050 is not divisible by 4"}, {"model.seq_len=2050"}},
    {"context parallelism with the unfused attention",
     replace(replace(after("  pp: 2", "  cp: 2\n"), "  dp: 4", "  dp: 2"), "  precision: bf16\n",
             "  precision: bf16\n  attention: naive\n"),
     "training.attention", 25, {"ring attention", "training.attention must be flash"}},
    {"context parallelism with selective recompute",
     replace(replace(after("  pp: 2", "  cp: 2\n"), "  dp: 4", "  dp: 2"), "  precision: bf16\n",
             "  precision: bf16\n  recompute: selective\n"),
     "training.recompute", 25, {"selective recompute", "not modelled under context parallelism"}},
    {"context parallelism on a generic model", cnn + "plan: {cp: 2}\n", "plan.cp", 4,
     {"context parallelism splits sequences, which needs a transformer model"}},
    {"placement with an unknown dimension", after("  pp: 2", "  placement: tp,ep,pp\n"), "plan.placement", 29,
     {"unknown dimension 'ep'"}},
    // offloading
    {"parameters offloaded without the optimizer", after("  pp: 2", "  offload_params: true\n"), "plan.offload_params", 29,
     {"needs the optimizer offloaded too"}},
    {"offloading without the hosts on the graph", replace(good, "  pp: 2\n", "  pp: 1\n  zero: 2\n  offload_optimizer: true\n"),
     "plan.offload_optimizer", 30, {"add a cluster.host section", "link_bandwidth"}},
    {"offloading over dp without ZeRO-2",
     replace(after("    shape: fat-tree", "  host: {memory: 1TB, memory_bandwidth: 300GB/s, link_bandwidth: 25GB/s}\n"),
             "  pp: 2\n", "  pp: 2\n  offload_optimizer: true\n"),
     "plan.zero", 0, {"needs ZeRO-2 or -3"}},
    {"a host link bandwidth without a unit",
     after("    shape: fat-tree", "  host: {memory: 1TB, memory_bandwidth: 300GB/s, link_bandwidth: 25}\n"),
     "cluster.host.link_bandwidth", 15, {"needs a unit"}},
    {"a host section without its memory", after("    shape: fat-tree", "  host: {memory_bandwidth: 300GB/s}\n"),
     "cluster.host.memory", 15, {"missing required key 'memory'"}},
    // mixture of experts
    {"expert parallelism without experts", after("  pp: 2", "  ep: 2\n"), "plan.ep", 29,
     {"splits the experts of a mixture-of-experts model"}},
    {"a routing setting on a dense model", after("  seq_len: 2048", "  top_k: 2\n"), "model.top_k", 21,
     {"is a mixture-of-experts setting, but model.experts is 0"}},
    {"a capacity below one token copy in top_k", after("  seq_len: 2048", "  experts: 8\n  capacity_factor: 0.25\n"),
     "model.capacity_factor", 22, {"capacity factor below 1/top_k"}},
    {"experts with tp but no sequence parallelism", after("  seq_len: 2048", "  experts: 8\n"),
     "plan.sequence_parallel", 27, {"need sequence parallelism"}},
    {"ep not dividing the experts",
     replace(after("  pp: 2", "  sequence_parallel: true\n  ep: 4\n"), "  seq_len: 2048\n", "  seq_len: 2048\n  experts: 6\n"),
     "plan.ep", 31, {"ep 4 must divide the 6 experts"}},
    {"ep not dividing dp",
     replace(after("  pp: 2", "  sequence_parallel: true\n  ep: 8\n"), "  seq_len: 2048\n", "  seq_len: 2048\n  experts: 8\n"),
     "plan.ep", 31, {"ep 8 must divide dp 4"}},
    {"ZeRO-2 with expert parallelism",
     replace(after("  pp: 2", "  sequence_parallel: true\n  ep: 2\n  zero: 2\n"), "  seq_len: 2048\n",
             "  seq_len: 2048\n  experts: 8\n  tie_embeddings: false\n"),
     "plan.zero", 33, {"ZeRO-2 with expert parallelism is not modelled"}},
    {"unknown mlp", after("  seq_len: 2048", "  mlp: relu\n"), "model.mlp", 21, {"expected one of gelu, swiglu"}},
    // dense first layers, multi-head latent attention
    {"dense first layers on a dense model", after("  seq_len: 2048", "  dense_layers: 2\n"), "model.dense_layers", 21,
     {"is a mixture-of-experts setting, but model.experts is 0"}},
    {"every layer dense", after("  seq_len: 2048", "  experts: 8\n  dense_layers: 24\n"), "model.dense_layers", 22,
     {"23"}},
    {"a latent attention setting without its rank", after("  seq_len: 2048", "  q_lora_rank: 512\n"), "model.q_lora_rank",
     21, {"is a multi-head latent attention setting, but model.kv_lora_rank is 0"}},
    {"latent attention with a GeLU MLP", after("  seq_len: 2048", "  kv_lora_rank: 512\n"), "model.kv_lora_rank", 21,
     {"needs model.mlp: swiglu"}},
    {"latent attention with its own key/value heads", after("  seq_len: 2048", "  mlp: swiglu\n  kv_lora_rank: 512\n  kv_heads: 4\n"),
     "model.kv_heads", 23, {"no key/value heads of its own"}},
    {"latent attention with context parallelism",
     replace(after("  seq_len: 2048", "  mlp: swiglu\n  kv_lora_rank: 512\n"), "  dp: 4", "  dp: 2\n  cp: 2\n"), "plan.cp",
     0, {"context parallelism with multi-head latent attention is not modelled"}, {"training.attention=flash"}},
    {"unknown model kind", after("  seq_len: 2048", "  kind: cnn\n"), "model.kind", 21,
     {"expected one of transformer, generic"}},
    // presets
    {"unknown device preset", replace(good, "device: h100-sxm", "device: h100-sxn"), "cluster.device", 5,
     {"unknown device preset 'h100-sxn'", "did you mean 'h100-sxm'", "known presets:"}},
    {"unknown cluster preset", "cluster: dgx-h10\nmodel: gpt3-13b\ntraining: {global_batch: 8}\n", "cluster", 1,
     {"unknown cluster preset 'dgx-h10'", "did you mean 'dgx-h100'"}},
    {"unknown model preset", "cluster: dgx-h100\nmodel: gpt3-175\ntraining: {global_batch: 8}\n", "model", 2,
     {"unknown model preset 'gpt3-175'", "did you mean 'gpt3-175b'"}},
    {"device without memory",
     custom_device_head + "  device: {peak: {bf16: 100 TFLOPS}, memory_bandwidth: 1 TB/s}\nmodel: tiny-gpt\ntraining: "
                          "{global_batch: 4}\n",
     "cluster.device.memory", 4, {"missing required key 'memory'"}},
    {"device without the training precision",
     custom_device_head + "  device: {peak: {fp32: 10 TFLOPS}, memory: 16GiB, memory_bandwidth: 1 TB/s}\n"
                          "model: tiny-gpt\ntraining: {global_batch: 4, precision: bf16}\n",
     "training.precision", 6, {"device custom has no bf16 rate"}},
    {"device with no rate at all",
     custom_device_head + "  device: {peak: {}, memory: 16GiB, memory_bandwidth: 1 TB/s}\nmodel: tiny-gpt\n"
                          "training: {global_batch: 4}\n",
     "cluster.device.peak", 4, {"at least one data type"}},
    {"power limit without the board's",
     custom_device_head + "  device: {peak: {bf16: 100 TFLOPS}, memory: 16GiB, memory_bandwidth: 1 TB/s, power_limit: 300W}\n"
                          "model: tiny-gpt\ntraining: {global_batch: 4}\n",
     "cluster.device.power_limit", 4, {"needs the board's own (tdp"}},
    {"power without a unit",
     custom_device_head + "  device: {peak: {bf16: 100 TFLOPS}, memory: 16GiB, memory_bandwidth: 1 TB/s, tdp: 300 V}\n"
                          "model: tiny-gpt\ntraining: {global_batch: 4}\n",
     "cluster.device.tdp", 4, {"300 V"}},
    // fabric options
    {"gpus_per_switch outside PCIe", after("    latency: 2us", "    gpus_per_switch: 2\n"),
     "cluster.intra_node.gpus_per_switch", 10, {"applies only to the pcie fabric"}},
    {"oversubscription on a single switch",
     replace(good, "    shape: fat-tree", "    shape: single-switch\n    oversubscription: 2"),
     "cluster.inter_node.oversubscription", 15, {"applies only to the fat-tree and rail-optimized"}},
    {"routing on a single switch", replace(good, "    shape: fat-tree", "    shape: single-switch\n    routing: ecmp"),
     "cluster.inter_node.routing", 15, {"applies only to the fat-tree and rail-optimized"}},
    {"unknown routing", replace(good, "    shape: fat-tree", "    shape: fat-tree\n    routing: adaptive"),
     "cluster.inter_node.routing", 15, {"expected one of ecmp, destination", "adaptive"}},
    {"WAN that leaves a site empty", good + "  \n", "", 0, {}},  // placeholder replaced below
    // model shape against the plan
    {"hidden not divisible by heads", replace(good, "  heads: 16", "  heads: 15"), "model.hidden", 17,
     {"hidden 2048 is not divisible by heads 15"}},
    {"kv_heads not dividing heads", after("  heads: 16", "  kv_heads: 5\n"), "model.kv_heads", 19,
     {"kv_heads 5 must divide heads 16"}},
    {"ffn given twice", after("  heads: 16", "  ffn_hidden: 8192\n  ffn_multiplier: 4\n"), "model.ffn_multiplier", 20,
     {"either ffn_hidden or ffn_multiplier"}},
    {"plan larger than the cluster", replace(good, "  dp: 4", "  dp: 8"), "plan.dp", 26,
     {"dp x tp x pp = 8 x 2 x 2 = 32 devices, but the cluster has 16"}},
    {"heads not divisible by tp", replace(replace(good, "  dp: 4", "  dp: 2"), "  tp: 2", "  tp: 3"), "plan.tp", 27,
     {"heads 16 are not divisible by tp 3"}},
    {"fewer layers than pipeline stages", replace(good, "  layers: 24", "  layers: 1"), "plan.pp", 28,
     {"layers 1 cannot fill pp x virtual_stages = 2 x 1 = 2 stages"}},
    {"global batch not divisible", replace(good, "global_batch: 64", "global_batch: 60"), "training.global_batch", 22,
     {"global_batch 60 is not divisible by dp x micro_batch = 4 x 2 = 8"}},
    {"dp cannot fill the cluster", replace(replace(good, "  dp: 4\n", ""), "  tp: 2", "  tp: 3"), "plan.dp", 26,
     {"dp is not given and tp x pp = 6 does not divide the cluster's 16 GPUs"}},
    {"sequence parallel with an odd sequence",
     replace(after("  pp: 2", "  sequence_parallel: true\n"), "seq_len: 2048", "seq_len: 2047"),
     "plan.sequence_parallel", 29, {"seq_len 2047 is not divisible by tp 2"}},
    {"tp communication overlap without sequence parallelism", after("  pp: 2", "  tp_comm_overlap: true\n"),
     "plan.tp_comm_overlap", 29, {"needs tp > 1 and plan.sequence_parallel: true", "without sequence parallelism"}},
    {"tp communication overlap across nodes",
     after("  pp: 2", "  sequence_parallel: true\n  tp_comm_overlap: true\n  placement: dp,pp,tp\n"), "plan.tp_comm_overlap", 30,
     {"over NVLink inside a node", "span nodes (tp 2 on 8 devices per node, placement dp,pp,tp)"}},
    {"tp communication overlap on a layer list", cnn + "plan: {dp: 4, tp_comm_overlap: true}\n", "plan.tp_comm_overlap", 4,
     {"needs a transformer model"}},
    {"tensor parallel on a layer list", cnn + "plan: {tp: 2, dp: 4}\n", "plan.tp", 4,
     {"tensor parallelism needs a transformer model"}},
    {"generic layer without FLOPs",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 10, activations: 5}\ntraining: {global_batch: 8}\n",
     "model.layers[0].forward_flops", 4, {"missing required key 'forward_flops'"}},
    // BatchNorm in generic layers
    {"BatchNorm normalising more than the layer stores",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 100, forward_flops: 50, activations: 5,\n"
     "       batch_norm: {channels: 2, values: 6}}\ntraining: {global_batch: 8}\n",
     "model.layers[0].batch_norm.values", 5, {"at most the layer's 5 stored values per sample"}},
    {"BatchNorm with more channels than values",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 100, forward_flops: 50, activations: 5,\n"
     "       batch_norm: {layers: 2, channels: 3}}\ntraining: {global_batch: 8}\n",
     "model.layers[0].batch_norm.channels", 5, {"2 BatchNorm layer(s) of 3 channels", "at least one value per channel"}},
    {"BatchNorm's scales and shifts beyond the layer's parameters",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 10, forward_flops: 50, activations: 5,\n"
     "       batch_norm: {channels: 5}}\ntraining: {global_batch: 8}\n",
     "model.layers[0].params", 4, {"must exceed its BatchNorm's 10"}},
    {"BatchNorm given as a number",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 10, forward_flops: 50, activations: 5,\n"
     "       batch_norm: 4}\ntraining: {global_batch: 8}\n",
     "model.layers[0].batch_norm", 5, {"expected a map {layers, channels, values}"}},
    {"BatchNorm without channels",
     "cluster: dgx-a100\nmodel:\n  layers:\n    - {name: a, params: 100, forward_flops: 50, activations: 5,\n"
     "       batch_norm: {layers: 1}}\ntraining: {global_batch: 8}\n",
     "model.layers[0].batch_norm.channels", 5, {"missing required key 'channels'"}},
    {"unknown BatchNorm mode", "cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 64, batch_norm: global}\n",
     "training.batch_norm", 3, {"global", "local", "sync"}},
    // schedules
    {"interleaved without virtual stages", after("  pp: 2", "  schedule: interleaved-1f1b\n"), "plan.virtual_stages", 26,
     {"needs virtual_stages of at least 2"}},
    {"virtual stages without interleaving", after("  pp: 2", "  virtual_stages: 2\n  schedule: 1f1b\n"),
     "plan.virtual_stages", 29, {"virtual_stages 2 needs schedule interleaved-1f1b"}},
    {"interleaved with micro-batches not a multiple of pp",
     replace(after("  pp: 2", "  virtual_stages: 2\n"), "global_batch: 64", "global_batch: 24"), "training.global_batch",
     22, {"micro-batches per pipeline (3", "multiple of pp 2"}},
    {"interleaved without a pipeline",
     replace(replace(after("  pp: 2", "  virtual_stages: 2\n"), "  pp: 2", "  pp: 1"), "  dp: 4", "  dp: 8"),
     "plan.schedule", 26, {"needs pp of at least 2"}},
    // run and hardware
    {"unknown backend", good + "run:\n  backend: rocm\n", "run.backend", 30, {"expected one of cpu, cuda"}},
    {"zero steps", good + "run:\n  steps: 0\n", "run.steps", 30, {"expected an integer from 1 to 1000000"}},
    {"missing profile file", good + "hardware:\n  profile: nope.yaml\n", "hardware.profile", 30,
     {"cannot read the device profile 'nope.yaml'"}},
    {"missing extends file", "extends: nothere.yaml\n" + good, "extends", 1, {"cannot open 'nothere.yaml'"}},
    // overrides
    {"override without '='", good, "", 0, {"expected KEY=VALUE"}, {"plan.tp"}, "--set plan.tp"},
    {"override of an unknown key", good, "plan.tpp", 1, {"unknown key 'tpp'", "did you mean 'tp'"}, {"plan.tpp=4"},
     "--set plan.tpp=4"},
    {"override with a bad value", good, "plan.tp", 1, {"expected a positive integer of at most 1,073,741,824, got 'four'"}, {"plan.tp=four"},
     "--set plan.tp=four"},
  };
}

}  // namespace

TEST_CASE("every bad scenario is rejected with file, line, key and the reason", "[load][errors]") {
  std::vector<Case> all = make_cases();
  // A WAN needs a node on each side.
  all.erase(std::remove_if(all.begin(), all.end(), [](const Case& c) { return c.says.empty(); }), all.end());
  all.push_back({"WAN that leaves a site empty", good.substr(0, good.find("model:")) +
                                                     "  wan: {first_group_nodes: 2, bandwidth: 10Gbps, latency: 5ms}\n" +
                                                     good.substr(good.find("model:")),
                 "cluster.wan.first_group_nodes", 15, {"expected from 1 to 1"}});
  all.push_back({"WAN without latency", good.substr(0, good.find("model:")) + "  wan: {bandwidth: 10Gbps}\n" +
                                            good.substr(good.find("model:")),
                 "cluster.wan.latency", 15, {"missing required key 'latency'"}});
  // cluster.degraded and cluster.jitter, on line 15 (after the cluster's keys).
  auto degraded = [&](const std::string& lines) {
    return good.substr(0, good.find("model:")) + lines + good.substr(good.find("model:"));
  };
  all.push_back({"degraded link that does not exist", degraded("  degraded:\n    - {link: n1.nic9, factor: 0.5}\n"),
                 "cluster.degraded[0].link", 16, {"no link is named 'n1.nic9'", "did you mean 'n1.nic0'"}});
  all.push_back({"degraded entry naming two things", degraded("  degraded:\n    - {rank: 3, node: 0, factor: 0.5}\n"),
                 "cluster.degraded[0].rank", 16, {"name one of rank", "node", "link"}});
  all.push_back({"degraded entry naming nothing", degraded("  degraded:\n    - {factor: 0.5}\n"),
                 "cluster.degraded[0].factor", 16, {"name one of rank"}});
  // Factors naming one device or link multiply; a product past the single factor's range
  // ended the simulation with "event scheduled in the past".
  all.push_back({"degraded factors multiplying below 0.001 on a device",
                 degraded("  degraded:\n    - {rank: 9, factor: 0.01}\n    - {node: 1, factor: 0.05}\n"),
                 "cluster.degraded[1].factor", 17, {"device 9", "0.0005", "multiply", "at least 0.001"}});
  all.push_back({"degraded factors multiplying below 0.001 on a link",
                 degraded("  degraded:\n    - {link: n1.nic0, factor: 0.02}\n    - {link: n1.nic0, factor: 0.02}\n"),
                 "cluster.degraded[1].factor", 17, {"link 'n1.gpu0 -> n1.nic0'", "0.0004", "multiply"}});
  all.push_back({"degraded rank past the cluster", degraded("  degraded:\n    - {rank: 16, factor: 0.5}\n"),
                 "cluster.degraded[0].rank", 16, {"from 0 to 15"}});
  all.push_back({"degraded factor above 1", degraded("  degraded:\n    - {node: 1, factor: 2}\n"),
                 "cluster.degraded[0].factor", 16, {"0.001", "1"}});
  all.push_back({"degraded as a single value", degraded("  degraded: rank3\n"), "cluster.degraded", 15,
                 {"expected a list"}});
  all.push_back({"jitter without sigma", degraded("  jitter: {seed: 4}\n"), "cluster.jitter.sigma", 15,
                 {"missing required key 'sigma'"}});
  all.push_back({"a list index past the end", degraded("  degraded:\n    - {rank: 3, factor: 0.5}\n"), "cluster.degraded.1",
                 0, {"index 1 is past the list's end: it has 1 entry"}, {"cluster.degraded.1.factor=0.2"},
                 "--set cluster.degraded.1.factor=0.2"});
  // The optimizer's schedule and the run's faults.
  all.push_back({"a decay without its end", after("  precision: bf16", "  lr_decay: cosine\n"), "training.lr_decay", 25,
                 {"a cosine decay needs decay_steps past warmup_steps"}});
  all.push_back({"lr scaling without a reference batch", after("  precision: bf16", "  lr_scaling: sqrt\n"),
                 "training.lr_reference_batch", 0, {"missing required key 'lr_reference_batch'"}});
  all.push_back({"an injection on a rank past the plan", good + "run:\n  inject: [{step: 1, rank: 16, kind: nan}]\n",
                 "run.inject[0].rank", 0, {"from 0 to 15"}});
  all.push_back({"an unknown injection", good + "run:\n  inject: [{step: 1, rank: 1, kind: explode}]\n",
                 "run.inject[0].kind", 0, {"explode", "scale, zero, nan, random, delay"}});
  all.push_back({"a factor on a zeroing", good + "run:\n  inject: [{step: 1, rank: 1, kind: zero, factor: 2}]\n",
                 "run.inject[0].factor", 0, {"applies to the scale, random and delay kinds only"}});
  all.push_back({"an injection past the run's steps", good + "run:\n  steps: 3\n  warmup: 1\n  inject: [{step: 5, rank: 1, kind: nan}]\n",
                 "run.inject[0].step", 0, {"from 0 to 4"}});
  all.push_back({"no master weights in fp32", replace(good, "  precision: bf16", "  precision: fp32\n  master_weights: false"),
                 "training.master_weights", 25, {"only under 16-bit precision", "precision is fp32"}});
  all.push_back({"no loss scaling under bf16", after("  precision: bf16", "  loss_scaling: none\n"), "training.loss_scaling", 25,
                 {"applies to fp16 only"}});
  all.push_back({"an unknown divergence action", good + "run:\n  on_divergence: panic\n", "run.on_divergence", 0,
                 {"warn, stop, ignore"}});
  REQUIRE(all.size() >= 40);

  for (const Case& c : all) {
    DYNAMIC_SECTION(c.name) {
      try {
        (void)load_text(c.text, "bad.yaml", c.overrides);
        FAIL("accepted: " << c.name);
      } catch (const ScenarioError& e) {
        INFO(e.what());
        CHECK(e.key() == c.key);
        CHECK(e.where().file == c.file);
        if (c.line > 0) {
          CHECK(e.where().line == c.line);
          CHECK(e.where().column > 0);
        }
        for (const std::string& fragment : c.says) CHECK_THAT(e.what(), Catch::Matchers::Contains(fragment));
      }
    }
  }
}

TEST_CASE("the valid scenario behind the bad cases loads", "[load][errors]") {
  CHECK_NOTHROW(load_text(good, "good.yaml"));
}
