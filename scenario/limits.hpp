// The documented limits on what a scenario may ask for (docs/reliability.md). Each is far
// past any real training run and keeps every figure parasim computes finite and every
// command bounded in time and memory; input past one is refused with exit 2 at the key
// that set it.
#pragma once

namespace parasim::scenario::limits {

// Files.
inline constexpr long long file_bytes = 4LL << 20;  // a scenario, preset, base or profile file
inline constexpr long long yaml_nodes = 200'000;    // values in one document, aliases expanded
inline constexpr int yaml_depth = 64;               // sections and lists inside each other
inline constexpr int extends_depth = 16;            // a chain of extends: from the scenario down
inline constexpr int extends_files = 64;            // files read through extends:, all told

// Cluster and plan.
inline constexpr long long gpus = 65'536;  // nodes x gpus_per_node, and plan --gpus

// Model.
inline constexpr int layers = 65'536;
inline constexpr int hidden = 1 << 20;
inline constexpr int ffn_hidden = 1 << 22;
inline constexpr int heads = 1 << 16;
inline constexpr int experts = 1 << 16;
inline constexpr int vocab = 1 << 24;
inline constexpr int seq_len = 1 << 22;
inline constexpr double generic_layer_count = 1e18;  // params, FLOPs, activations of one layer

// Training.
inline constexpr int global_batch = 1 << 24;
inline constexpr int micro_batches = 1 << 16;  // per pipeline per step: global_batch / (dp x micro_batch)
inline constexpr int steps = 1'000'000;        // run --steps and --warmup, each
// The simulated step's Program: ops of the ranks simulated (one replica where folded). A
// simulation holds about 290 bytes an op with the trace it leaves (5.9 M ops: 1.96 GB
// peak); below this cap the op count is also held to what the host's available memory
// takes (program::CompileOptions). Megatron-LM's GPT-3 175B example (tp 8, pp 16, 1,536
// micro-batches) has about 15 million.
inline constexpr long long program_ops = 64'000'000;
inline constexpr double program_op_bytes = 290.0;

// Quantities.
inline constexpr double bytes = 1152921504606846976.0;  // 1 EiB
inline constexpr double min_bandwidth = 1e3;            // 1 KB/s
inline constexpr double max_bandwidth = 1e18;           // 1 EB/s
inline constexpr double min_flop_rate = 1e6;            // 1 MFLOP/s (0: the device lacks the type)
inline constexpr double max_flop_rate = 1e18;           // 1 EFLOP/s per device
inline constexpr double max_duration = 60.0;            // a latency or per-call cost, seconds

// The whole run (training.tokens / training.steps, job:).
inline constexpr double run_tokens = 1e17;
inline constexpr int run_steps = 2'000'000'000;
inline constexpr double max_span = 1e10;  // a mean time between failures, an interval: about 317 years

}  // namespace parasim::scenario::limits
