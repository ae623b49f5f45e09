#include "sim/memory_counter.hpp"

#include "workload/memory.hpp"

namespace parasim::sim {

MemoryCounter::MemoryCounter(const scenario::Scenario& s, const program::Program& prog) {
  const workload::MemoryReport mem = workload::memory_per_rank(s);
  ranks_.resize(static_cast<std::size_t>(prog.world));
  for (int r = 0; r < prog.world; ++r) {
    const workload::MemoryBreakdown& b = mem.stages[static_cast<std::size_t>(scenario::coord_of(s.plan, r).pp)];
    RankMemory& m = ranks_[static_cast<std::size_t>(r)];
    m.now = b.total() - b.activations - b.logits;
    m.per_chunk = b.in_flight > 0 ? b.activations / b.in_flight : 0.0;
    m.logits = b.logits_in_flight > 0 ? b.logits / b.logits_in_flight : 0.0;
    m.samples.emplace_back(0, m.now);
  }
  for (const program::Op& o : prog.ops) {
    if (o.kind == program::OpKind::compute && o.category == program::Category::backward && o.micro_batch >= 0) {
      ++backward_left_[{o.rank, o.micro_batch, o.chunk}];
    }
  }
}

void MemoryCounter::add(int rank, double bytes, std::int64_t ps) {
  RankMemory& m = ranks_[static_cast<std::size_t>(rank)];
  m.now += bytes;
  if (!m.samples.empty() && m.samples.back().first == ps) {
    m.samples.back().second = m.now;
  } else {
    m.samples.emplace_back(ps, m.now);
  }
}

void MemoryCounter::on_start(const program::Op& o, std::int64_t ps) {
  if (o.category != program::Category::forward || o.micro_batch < 0) return;
  const RankMemory& m = ranks_[static_cast<std::size_t>(o.rank)];
  if (holding_.insert({o.rank, o.micro_batch, o.chunk}).second) add(o.rank, m.per_chunk, ps);
  if (o.what == program::ComputeWhat::lm_head) add(o.rank, m.logits, ps);
}

void MemoryCounter::on_end(const program::Op& o, std::int64_t ps) {
  if (o.category != program::Category::backward || o.micro_batch < 0) return;
  const RankMemory& m = ranks_[static_cast<std::size_t>(o.rank)];
  if (o.what == program::ComputeWhat::lm_head) add(o.rank, -m.logits, ps);
  const ChunkKey key{o.rank, o.micro_batch, o.chunk};
  if (--backward_left_[key] == 0 && holding_.erase(key) > 0) add(o.rank, -m.per_chunk, ps);
}

}  // namespace parasim::sim
