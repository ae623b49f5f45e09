// What the compiler's tests share: a small GPT scenario, the Program's compute FLOPs, and
// a run of a Program under its execution rules with zero costs (deadlock check).
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "scenario/load.hpp"
#include "program/program.hpp"

namespace parasim::program::test {

using scenario::load_text;
using scenario::Scenario;

inline Scenario gpt(std::vector<std::string> sets) {
  // A small GPT on 2 x 8 GPUs; tests vary the plan through overrides.
  const std::string text = R"(cluster: {preset: hgx-h100, nodes: 2}
model: {layers: 8, hidden: 256, heads: 8, vocab: 1024, seq_len: 128}
training: {global_batch: 32, micro_batch: 2}
plan: {dp: 1}
)";
  return load_text(text, "c.yaml", sets);
}

inline double compute_flops(const Program& p) {
  double f = 0.0;
  for (const Op& o : p.ops) {
    if (o.kind == OpKind::compute && o.category != Category::optimizer) f += o.flops;
  }
  return f;
}

// Runs the program under its execution rules with zero costs; returns how many ops never
// completed (0 = it runs to the end without deadlock).
inline std::size_t unfinished(const Program& p) {
  const std::size_t n = p.ops.size();
  // Structure first: every dependency is an earlier op of the same rank.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::int64_t d : p.deps_of(static_cast<std::int64_t>(i))) {
      REQUIRE(d >= 0);
      REQUIRE(static_cast<std::size_t>(d) < i);
      REQUIRE(p.ops[static_cast<std::size_t>(d)].rank == p.ops[i].rank);
    }
  }
  std::vector<char> done(n, 0);
  std::vector<std::size_t> cursor(p.order.size() * stream_count, 0);
  // Per rank and stream, the op ids in program order.
  std::vector<std::vector<std::int64_t>> lanes(p.order.size() * stream_count);
  for (std::size_t r = 0; r < p.order.size(); ++r) {
    for (std::int64_t id : p.order[r]) {
      lanes[r * stream_count + static_cast<std::size_t>(p.ops[static_cast<std::size_t>(id)].stream)].push_back(id);
    }
  }
  std::map<std::int64_t, std::int64_t> send_of;  // match -> send op
  std::map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& o = p.ops[i];
    if (o.kind == OpKind::send) send_of[o.match] = static_cast<std::int64_t>(i);
    if (o.kind == OpKind::collective) members[o.match].push_back(static_cast<std::int64_t>(i));
  }
  auto deps_done = [&](std::int64_t id) {
    for (std::int64_t d : p.deps_of(id)) {
      if (!done[static_cast<std::size_t>(d)]) return false;
    }
    return true;
  };
  // The head of a serial lane, or any not-yet-done op of the pp lane (posted, independent).
  auto ready = [&](std::int64_t id) {
    const Op& o = p.ops[static_cast<std::size_t>(id)];
    if (!deps_done(id)) return false;
    if (o.kind == OpKind::recv) return static_cast<bool>(done[static_cast<std::size_t>(send_of.at(o.match))]);
    return true;
  };
  std::size_t completed = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
      auto& ids = lanes[lane];
      const bool serial = lane % stream_count != static_cast<std::size_t>(Stream::pp);
      for (std::size_t k = cursor[lane]; k < ids.size(); ++k) {
        const std::int64_t id = ids[k];
        if (done[static_cast<std::size_t>(id)]) continue;
        const Op& o = p.ops[static_cast<std::size_t>(id)];
        bool go = ready(id);
        if (go && o.kind == OpKind::collective) {
          // Every member must be at the head of its own lane and ready.
          for (std::int64_t m : members.at(o.match)) {
            const Op& mo = p.ops[static_cast<std::size_t>(m)];
            const auto& ml = lanes[static_cast<std::size_t>(mo.rank) * stream_count + static_cast<std::size_t>(mo.stream)];
            const std::size_t head = cursor[static_cast<std::size_t>(mo.rank) * stream_count + static_cast<std::size_t>(mo.stream)];
            go = go && head < ml.size() && ml[head] == m && ready(m);
          }
          if (go) {
            for (std::int64_t m : members.at(o.match)) {
              done[static_cast<std::size_t>(m)] = 1;
              ++cursor[static_cast<std::size_t>(p.ops[static_cast<std::size_t>(m)].rank) * stream_count +
                       static_cast<std::size_t>(p.ops[static_cast<std::size_t>(m)].stream)];
              ++completed;
            }
            progress = true;
          }
        } else if (go) {
          done[static_cast<std::size_t>(id)] = 1;
          ++completed;
          progress = true;
        }
        if (serial) break;
      }
      if (!serial) {
        while (cursor[lane] < ids.size() && done[static_cast<std::size_t>(ids[cursor[lane]])]) ++cursor[lane];
      } else if (cursor[lane] < ids.size() && done[static_cast<std::size_t>(ids[cursor[lane]])] &&
                 p.ops[static_cast<std::size_t>(ids[cursor[lane]])].kind != OpKind::collective) {
        ++cursor[lane];
      }
    }
  }
  return n - completed;
}

}  // namespace parasim::program::test
