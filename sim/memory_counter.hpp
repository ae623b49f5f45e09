// The simulator's memory counter per rank (Trace counters "memory"): the stage's static
// memory (workload/memory.hpp), plus one micro-batch's activations for a model chunk from the
// start of its first forward op to the end of its last backward op, plus the logits from
// the LM head's forward to its backward.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "program/program.hpp"

namespace parasim::sim {

class MemoryCounter {
 public:
  MemoryCounter(const scenario::Scenario& s, const program::Program& prog);
  // A compute op starting or ending at `ps` picoseconds.
  void on_start(const program::Op& o, std::int64_t ps);
  void on_end(const program::Op& o, std::int64_t ps);
  // Rank r's samples (time in ps, bytes), handed over.
  std::vector<std::pair<std::int64_t, double>> take(int rank) {
    return std::move(ranks_[static_cast<std::size_t>(rank)].samples);
  }

 private:
  using ChunkKey = std::tuple<int, int, int>;  // rank, micro-batch, chunk
  struct RankMemory {
    double now = 0.0;
    double per_chunk = 0.0;
    double logits = 0.0;
    std::vector<std::pair<std::int64_t, double>> samples;
  };
  void add(int rank, double bytes, std::int64_t ps);

  std::vector<RankMemory> ranks_;
  std::map<ChunkKey, int> backward_left_;
  std::set<ChunkKey> holding_;
};

}  // namespace parasim::sim
