// Scenario texts for the plan tests.
#pragma once

#include <string>

namespace parasim::plan::test {

// A valid scenario; each bad-input case breaks one thing in it.
inline const std::string good = R"(name: base
cluster:
  nodes: 2
  gpus_per_node: 8
  device: h100-sxm
  intra_node:
    fabric: nvswitch
    bandwidth: 450 GB/s
    latency: 2us
  inter_node:
    nics_per_node: 8
    nic_bandwidth: 400Gbps
    latency: 4us
    shape: fat-tree
model:
  layers: 24
  hidden: 2048
  heads: 16
  vocab: 51200
  seq_len: 2048
training:
  global_batch: 64
  micro_batch: 2
  precision: bf16
plan:
  dp: 4
  tp: 2
  pp: 2
)";

}  // namespace parasim::plan::test
