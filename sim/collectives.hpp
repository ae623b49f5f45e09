// Collectives decomposed into flows on the network, by algorithm.
//
// Buffer sizes follow nccl-tests: S is the per-rank buffer of an all-reduce, the output
// of an all-gather, the input of a reduce-scatter.
//
// ring  n ranks in a ring, each step every rank sends one S/n chunk to its successor and
//       the step ends when all chunks have arrived. Reduce-scatter and all-gather take
//       n-1 steps, all-reduce 2(n-1) (reduce-scatter then all-gather). Uncontended, with
//       link bandwidth B and latency a per hop:
//         all-reduce      2(n-1)/n · S/B + 2(n-1)·a
//         reduce-scatter / all-gather  (n-1)/n · S/B + (n-1)·a
#pragma once

#include <functional>
#include <vector>

#include "plan/program.hpp"
#include "sim/network.hpp"

namespace parasim::sim {

void ring_collective(Network& net, plan::CollectiveOp op, std::vector<int> devices, double bytes,
                     std::function<void()> done);

}  // namespace parasim::sim
