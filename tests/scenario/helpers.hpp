// Scenario texts for the plan tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace parasim::scenario::test {

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

// A scratch directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir()
      : path(std::filesystem::temp_directory_path() /
             ("parasim-test-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

}  // namespace parasim::scenario::test
