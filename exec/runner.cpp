#include "exec/runner.hpp"
#include "exec/watchdog.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "workload/schedule.hpp"

namespace parasim::exec {

using program::Category;
using program::CollectiveOp;
using program::ComputeWhat;
using program::Op;
using program::OpKind;
using program::Stream;

Runner::Runner(Device& dev, const scenario::Scenario& s, const program::Program& prog, Shard& shard,
               double stall_seconds)
    : dev_(dev), s_(s), prog_(prog), shard_(shard), stall_seconds_(stall_seconds), rank_(dev.rank()) {
  if (prog.one_replica()) throw std::invalid_argument("the executor runs a Program of every rank, not a folded one");
  state_.assign(prog.ops.size(), 0);
  span_of_.assign(prog.ops.size(), 0);
  begin_.assign(prog.ops.size(), 0);
  end_.assign(prog.ops.size(), 0);
  std::vector<int> buckets, expert_buckets;
  for (std::int64_t id : prog.order[static_cast<std::size_t>(rank_)]) {
    const Op& o = prog.ops[static_cast<std::size_t>(id)];
    queue_[static_cast<int>(o.stream)].push_back(id);
    if (o.kind == OpKind::collective && o.category == Category::dp_comm) {
      (experts(o) ? expert_buckets : buckets).push_back(o.layer);
    }
  }
  shard_.set_buckets(buckets, expert_buckets);
  // Communicators for this rank's groups, created in the Program's group order on every
  // rank (so creations never cross), keyed by the group index.
  comm_of_group_.assign(prog.groups.size(), -1);
  for (std::size_t g = 0; g < prog.groups.size(); ++g) {
    const auto& ranks = prog.groups[g].ranks;
    if (ranks.size() < 2 || std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) continue;
    comm_of_group_[g] = dev_.comm_create(ranks, static_cast<int>(g));
  }
  // A communicator per pipeline pair where the backend wants one, created in the order of
  // (lower rank, higher rank) on every rank, so that creations never wait on each other.
  if (dev_.wants_pair_comms()) {
    std::vector<std::pair<int, int>> pairs;
    for (std::int64_t id : prog.order[static_cast<std::size_t>(rank_)]) {
      const Op& o = prog.ops[static_cast<std::size_t>(id)];
      if (o.kind != OpKind::send && o.kind != OpKind::recv) continue;
      pairs.emplace_back(std::min(rank_, o.peer), std::max(rank_, o.peer));
    }
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    const int key = static_cast<int>(prog.groups.size());  // one at a time: one key serves
    for (const auto& [lo, hi] : pairs) {
      const std::array<int, 2> members{lo, hi};
      dev_.pair_with(lo == rank_ ? hi : lo, dev_.comm_create(members, key));
    }
  }
}

bool Runner::ready(std::int64_t op) const {
  for (std::int64_t d : prog_.deps_of(op)) {
    const std::uint8_t st = state_[static_cast<std::size_t>(d)];
    if (st == 2) continue;
    if (st == 1 && prog_.ops[static_cast<std::size_t>(d)].kind == OpKind::compute) continue;  // waited for on the device
    return false;
  }
  return true;
}

// The layer whose input crosses the pipeline boundary: the end of the sender's chunk for
// activations, its start for gradients.
int Runner::boundary_of(const Op& o) const {
  const int sender = o.kind == OpKind::send ? rank_ : o.peer;
  const int stage = scenario::coord_of(s_.plan, sender).pp;
  const auto [first, last] =
      workload::chunk_layers(s_.model.layer_count(), s_.plan.pp, s_.plan.virtual_stages, stage, o.chunk);
  return o.gradient ? first : last;
}

bool Runner::experts(const Op& o) const {
  return o.kind == OpKind::collective &&
         prog_.groups[static_cast<std::size_t>(o.group)].part == program::GroupPart::expert_data;
}

bool Runner::moe_tp(const Op& o) const {
  return o.category == Category::tp_comm && s_.model.moe() && o.what == ComputeWhat::layer_mlp;
}

// The experts' token exchanges: expert parallelism's all-to-alls, and with tp the rows'
// gather and their results' sum over tp. A forward pass's dispatch and gather first tell
// each member how many rows of each expert follow (Megatron-Core's token counts, exchanged
// before the tokens: a host sync there too): the dispatch each member its experts' counts,
// the gather every member all of them.
Request Runner::exchange_tokens(const Op& o, Comm comm, int members) {
  const bool gather = o.category == Category::tp_comm && o.collective == CollectiveOp::all_gather;
  if (o.pass != Category::backward && (gather || (o.category == Category::ep_comm && o.step == 0))) {
    std::vector<float> counts = shard_.expert_counts(o);
    const std::size_t n = counts.size();
    const std::size_t all = gather ? n * static_cast<std::size_t>(members) : n;
    if (counts_.floats() < n + all) counts_ = dev_.allocate_floats(n + all);
    float* in = counts_.f();
    float* out = counts_.f() + n;
    if (gather) {  // in place: this rank's block among the members'
      const auto& ranks = prog_.groups[static_cast<std::size_t>(o.group)].ranks;
      const auto me = static_cast<std::size_t>(std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin());
      dev_.upload(out + me * n, counts.data(), n * sizeof(float));
      const std::vector<std::int64_t> sizes(static_cast<std::size_t>(members), static_cast<std::int64_t>(n));
      dev_.wait(dev_.all_gather(out, sizes, comm));
    } else {
      const std::vector<std::int64_t> sizes(static_cast<std::size_t>(members), static_cast<std::int64_t>(n) / members);
      dev_.upload(in, counts.data(), n * sizeof(float));
      dev_.wait(dev_.all_to_all(in, sizes, out, sizes, comm));
    }
    std::vector<float> received(all);
    dev_.download(received.data(), out, all * sizeof(float));
    shard_.expert_counts_received(o, received);
  }
  const Shard::Exchange x = shard_.exchange(o);
  switch (o.collective) {
    case CollectiveOp::all_gather: return dev_.all_gather(x.recv, x.recv_counts, comm);
    case CollectiveOp::reduce_scatter: return dev_.reduce_scatter(x.recv, x.recv_counts, comm);
    default: return dev_.all_to_all(x.send, x.send_counts, x.recv, x.recv_counts, comm);
  }
}

int Runner::tag_of(const Op& o) const {
  return (o.micro_batch * s_.plan.virtual_stages + o.chunk) * 2 + (o.gradient ? 1 : 0);
}

void Runner::run_compute(const Op& o) {
  switch (o.what) {
    case ComputeWhat::embedding:
      if (o.category == Category::forward) {
        shard_.embedding_forward(o.micro_batch);
      } else {
        shard_.embedding_backward(o.micro_batch);
      }
      return;
    case ComputeWhat::layer:
    case ComputeWhat::layer_attention:
    case ComputeWhat::layer_mlp:
      if (o.piece != program::LayerPiece::whole) {
        shard_.layer_piece(o);
      } else if (o.category == Category::backward) {
        shard_.layer_backward(o.layer, o.micro_batch, o.what);
      } else {
        shard_.layer_forward(o.layer, o.micro_batch, o.what, o.category == Category::recompute);
      }
      return;
    case ComputeWhat::attention_core: shard_.recompute_attention_core(o.layer, o.micro_batch); return;
    case ComputeWhat::lm_head:
      if (o.category == Category::forward) {
        shard_.head_forward(o.micro_batch);
      } else {
        shard_.head_backward(o.micro_batch);
      }
      return;
    case ComputeWhat::optimizer: shard_.optimizer_step(); return;
  }
}

int Runner::gradient_slot(const Op& o) const {
  if (o.category != Category::backward) return no_slot;
  switch (o.what) {
    case ComputeWhat::embedding: return -1;
    case ComputeWhat::layer:
    case ComputeWhat::layer_attention:
    case ComputeWhat::layer_mlp:
    case ComputeWhat::lm_head: return o.layer;
    case ComputeWhat::attention_core:
    case ComputeWhat::optimizer: return no_slot;
  }
  return no_slot;
}

void Runner::start(std::int64_t id, std::vector<InFlight>& flying) {
  const Op& o = prog_.ops[static_cast<std::size_t>(id)];
  const auto i = static_cast<std::size_t>(id);
  state_[i] = 1;
  span_of_[i] = spans_.size();
  spans_.push_back({id, 0, 0, 0.0});
  dev_.set_stream(o.kind == OpKind::compute ? Stream::compute : o.stream);
  for (std::int64_t d : prog_.deps_of(id)) {
    if (state_[static_cast<std::size_t>(d)] == 1) dev_.wait_event(end_[static_cast<std::size_t>(d)]);
  }
  begin_[i] = dev_.record();
  if (o.kind == OpKind::compute) {
    if (delay_ > 1.0) {
      // run.inject's straggler: the op, then a wait of (factor - 1) times its time.
      dev_.synchronize();
      const std::int64_t t0 = dev_.now_ns();
      run_compute(o);
      dev_.synchronize();
      const auto wait = static_cast<std::int64_t>(static_cast<double>(dev_.now_ns() - t0) * (delay_ - 1.0));
      std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    } else {
      run_compute(o);
    }
    // 16-bit main gradients: what the op accumulated, rounded (Shard::gradients_accumulated).
    if (const int slot = gradient_slot(o); slot != no_slot) shard_.gradients_accumulated(slot);
    end_[i] = dev_.record();
    if (dev_.done(end_[i])) {
      finish(id, dev_.event_time_ns(end_[i]));
    } else {
      flying.push_back({id, -1, end_[i]});
    }
    return;
  }
  Request r = -1;
  if (o.kind == OpKind::send || o.kind == OpKind::recv) {
    // A pipeline transfer, or a block of a tensor-parallel overlap's ring or of context
    // parallelism's (whose tag is their own: a ring's neighbours are never pipeline
    // neighbours nor the other ring's, and a pair's messages of one tag match in the order
    // posted, which is the Program's on both ends).
    const bool ring = is_ring(o);
    const Shard::View v = ring ? shard_.ring_block(o) : shard_.boundary(boundary_of(o), o.micro_batch, o.gradient);
    // The cp ring's gradients are a stream of their own: posted in another order than the
    // keys and values they interleave with.
    const int tag = !ring ? tag_of(o) : o.category == Category::cp_comm && o.gradient ? ring_tag - 1 : ring_tag;
    r = o.kind == OpKind::send ? dev_.send(v.data, v.count, o.peer, tag) : dev_.recv(v.data, v.count, o.peer, tag);
  } else {
    const Comm comm = comm_of_group_[static_cast<std::size_t>(o.group)];
    const int members = static_cast<int>(prog_.groups[static_cast<std::size_t>(o.group)].ranks.size());
    Shard::View v;
    std::vector<std::int64_t> parts;
    if (o.category == Category::ep_comm || moe_tp(o)) {
      flying.push_back({id, exchange_tokens(o, comm, members), 0});
      return;
    }
    if (o.category == Category::tp_comm || o.category == Category::bn_comm) {
      v = o.category == Category::tp_comm ? shard_.tp_buffer(o) : shard_.batch_norm_buffer(o);
      parts.assign(static_cast<std::size_t>(members), v.count / members);
    } else if (o.category == Category::dp_comm &&
               prog_.groups[static_cast<std::size_t>(o.group)].part == program::GroupPart::replica) {
      v = shard_.owned_part(o.layer);  // hybrid sharding: the shard, summed over the replicas
    } else if (o.category == Category::dp_comm) {
      v = shard_.bucket(o.layer, o.collective == CollectiveOp::all_gather, experts(o));
      parts = shard_.bucket_parts(o.layer, experts(o));
      if (o.collective != CollectiveOp::all_gather) shard_.before_reduce(v);  // run.inject
    } else {
      v = shard_.tied_embedding_grads();
    }
    switch (o.collective) {
      case CollectiveOp::all_reduce: r = dev_.all_reduce(v.data, v.count, comm); break;
      case CollectiveOp::reduce_scatter: r = dev_.reduce_scatter(v.data, parts, comm); break;
      case CollectiveOp::all_gather: r = dev_.all_gather(v.data, parts, comm); break;
      case CollectiveOp::broadcast:
      case CollectiveOp::all_to_all: throw std::logic_error("the Program has no broadcast or all-to-all the executor runs");
    }
  }
  flying.push_back({id, r, 0});
}

void Runner::finish(std::int64_t id, std::int64_t end_ns) {
  const Op& o = prog_.ops[static_cast<std::size_t>(id)];
  dev_.set_stream(Stream::compute);  // what follows a completion runs on the compute stream
  if (o.kind == OpKind::collective) {
    if (o.category == Category::tp_comm) shard_.tp_finish(o);
    if (o.category == Category::dp_comm && o.collective == CollectiveOp::all_gather) {
      shard_.bucket_gathered(o.layer, experts(o));
    }
    if (o.category == Category::dp_comm && o.collective != CollectiveOp::all_gather &&
        prog_.groups[static_cast<std::size_t>(o.group)].part != program::GroupPart::replica) {
      shard_.gradients_reduced(shard_.bucket(o.layer, false, experts(o)));  // summed in the gradients' type
    }
    if (o.category == Category::dp_comm && o.collective == CollectiveOp::reduce_scatter) shard_.bucket_reduced(o.layer);
  } else if (o.kind == OpKind::send && is_ring(o)) {
    shard_.ring_sent(o);
  } else if (o.kind == OpKind::send) {
    shard_.release_boundary(boundary_of(o), o.micro_batch, o.gradient);
  }
  state_[static_cast<std::size_t>(id)] = 2;
  ++done_;
  OpSpan& sp = spans_[span_of_[static_cast<std::size_t>(id)]];
  sp.start_ns = dev_.event_time_ns(begin_[static_cast<std::size_t>(id)]);
  sp.end_ns = end_ns > 0 ? std::max(end_ns, sp.start_ns) : dev_.now_ns();
  sp.memory = static_cast<double>(dev_.in_use());
}

void Runner::stalled(const std::vector<InFlight>& flying, const std::vector<std::size_t>& next) const {
  std::string waits;
  for (const InFlight& f : flying) waits += fmt::format("\n  in flight: {}", program::op_name(prog_, f.op));
  for (int s = 0; s < program::stream_count; ++s) {
    const auto& q = queue_[s];
    if (next[static_cast<std::size_t>(s)] < q.size()) {
      waits += fmt::format("\n  next on {}: {}", to_string(static_cast<Stream>(s)),
                           program::op_name(prog_, q[next[static_cast<std::size_t>(s)]]));
    }
  }
  std::cerr << fmt::format("error: rank {} made no progress for {:.0f} s (a peer rank died or stopped){}\n", rank_,
                           stall_seconds_, waits);
  std::cerr.flush();
  dev_.abort_all(1);
  std::abort();  // not reached
}

void Runner::gather_parameters() {
  // ZeRO-3 holds only its share after the optimizer: one gather of each unit.
  const bool sharded = s_.plan.zero == 3 && s_.plan.grad_ranks() > 1;
  if (!s_.plan.defers_param_gather() && !sharded) return;
  std::vector<int> gathered;
  for (std::int64_t id : prog_.order[static_cast<std::size_t>(rank_)]) {
    const Op& o = prog_.ops[static_cast<std::size_t>(id)];
    if (o.category != Category::dp_comm || o.collective != CollectiveOp::all_gather) continue;
    if (std::find(gathered.begin(), gathered.end(), o.layer) != gathered.end()) continue;
    gathered.push_back(o.layer);
    const Shard::View v = shard_.bucket(o.layer, true);
    dev_.set_stream(Stream::dp);
    dev_.wait(dev_.all_gather(v.data, shard_.bucket_parts(o.layer), comm_of_group_[static_cast<std::size_t>(o.group)]));
    dev_.set_stream(Stream::compute);
    shard_.bucket_gathered(o.layer);
  }
}

StepTiming Runner::step(std::int64_t index) {
  shard_.begin_step(index);
  delay_ = 1.0;
  for (const scenario::Injection& in : s_.run.inject) {
    if (in.kind == scenario::InjectKind::delay && in.rank == rank_ && (in.step == 0 || in.step == index + 1))
      delay_ *= in.factor;
  }
  for (std::int64_t id : prog_.order[static_cast<std::size_t>(rank_)]) state_[static_cast<std::size_t>(id)] = 0;
  spans_.clear();
  dev_.forget_events();
  done_ = 0;
  dev_.barrier();
  const double flops0 = dev_.flops();
  StepTiming timing;
  timing.start_ns = dev_.now_ns();

  std::vector<std::size_t> next(program::stream_count, 0);
  std::vector<InFlight> flying;
  const std::size_t total = prog_.order[static_cast<std::size_t>(rank_)].size();
  std::int64_t last_progress = timing.start_ns;
  const auto stall_ns = static_cast<std::int64_t>(stall_seconds_ * 1e9);
  auto busy = [&](Stream s) {
    return std::any_of(flying.begin(), flying.end(), [&](const InFlight& f) {
      return f.request >= 0 && prog_.ops[static_cast<std::size_t>(f.op)].stream == s;
    });
  };
  while (done_ < total) {
    bool progressed = false;
    // Completions.
    for (std::size_t i = 0; i < flying.size();) {
      std::int64_t completed = 0;
      const bool compute = flying[i].request < 0;
      const bool finished = compute ? dev_.done(flying[i].end) : dev_.test(flying[i].request, &completed);
      if (finished) {
        finish(flying[i].op, compute ? dev_.event_time_ns(flying[i].end) : completed);
        progressed = true;
        flying[i] = flying.back();
        flying.pop_back();
      } else {
        ++i;
      }
    }
    // Communication: tp, dp and dp-gather one at a time, pp as far as dependencies allow, the
    // transfers posted together issued as one group (a send and a receive of one 1F1B
    // step progress together).
    for (Stream s : {Stream::tp, Stream::dp, Stream::dp_gather, Stream::pp}) {
      auto& q = queue_[static_cast<int>(s)];
      std::size_t& n = next[static_cast<std::size_t>(s)];
      bool grouped = false;
      while (n < q.size() && (s == Stream::pp || !busy(s)) && ready(q[n])) {
        if (s == Stream::pp && !grouped) {
          dev_.group_begin();
          grouped = true;
        }
        start(q[n++], flying);
        progressed = true;
      }
      if (grouped) dev_.group_end();
    }
    // One compute op.
    {
      auto& q = queue_[static_cast<int>(Stream::compute)];
      std::size_t& n = next[static_cast<std::size_t>(Stream::compute)];
      if (n < q.size() && ready(q[n])) {
        start(q[n++], flying);
        progressed = true;
      }
    }
    const std::int64_t now = dev_.now_ns();
    if (progressed) {
      last_progress = now;
      watchdog::progress();
    } else if (now - last_progress > stall_ns) {
      stalled(flying, next);
    }
  }
  dev_.synchronize();
  shard_.end_step();  // the step's losses, read once it is over
  timing.end_ns = timing.start_ns;
  for (const OpSpan& sp : spans_) timing.end_ns = std::max(timing.end_ns, sp.end_ns);
  timing.spans = spans_;
  timing.flops = dev_.flops() - flops0;
  return timing;
}

}  // namespace parasim::exec
