// The Program's vocabulary: names of streams, categories and collectives, the plan's
// groups, and op names made on demand (program.hpp).
#include "program/program.hpp"

#include <iterator>

namespace parasim::program {

std::string_view to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::tp: return "tp-comm";
    case Stream::pp: return "pp-comm";
    case Stream::dp: return "dp-comm";
    case Stream::dp_gather: return "dp-gather";
    case Stream::to_host: return "to-host";
    case Stream::from_host: return "from-host";
    case Stream::host: return "host";
  }
  return "?";
}

std::string_view to_string(Category c) {
  switch (c) {
    case Category::forward: return "forward";
    case Category::backward: return "backward";
    case Category::recompute: return "recompute";
    case Category::optimizer: return "optimizer";
    case Category::tp_comm: return "tp";
    case Category::pp_comm: return "pp";
    case Category::dp_comm: return "dp";
    case Category::cp_comm: return "cp";
    case Category::ep_comm: return "ep";
    case Category::offload: return "offload";
    case Category::bn_comm: return "syncbn";
  }
  return "?";
}

std::string_view to_string(CollectiveOp c) {
  switch (c) {
    case CollectiveOp::all_reduce: return "all-reduce";
    case CollectiveOp::reduce_scatter: return "reduce-scatter";
    case CollectiveOp::all_gather: return "all-gather";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::all_to_all: return "all-to-all";
  }
  return "?";
}

std::string op_name(const Program& p, std::int64_t id) {
  const Op& o = p.ops[static_cast<std::size_t>(id)];
  const std::string mb = o.micro_batch >= 0 ? " mb" + std::to_string(o.micro_batch) : "";
  const std::string layer = o.layer >= 0 ? " L" + std::to_string(o.layer) : "";
  switch (o.kind) {
    case OpKind::compute: {
      static constexpr const char* what[] = {"layer", "attention", "mlp", "attention-core", "embedding", "lm-head",
                                             "optimizer"};
      const char* phase = o.category == Category::forward    ? "fwd "
                          : o.category == Category::backward ? "bwd "
                          : o.category == Category::recompute ? "recompute "
                                                               : "";
      static constexpr const char* piece[] = {"", " prepare", " column", " middle", " row", " wgrad", " block", " finish", " merge",
                                              " experts", " shared"};
      static_assert(std::size(piece) == static_cast<std::size_t>(LayerPiece::shared) + 1, "a name for every piece");
      const std::string step = o.step >= 0 ? " #" + std::to_string(o.step) : "";
      const char* host = o.stream == Stream::host ? "host " : "";
      return std::string(host) + phase + what[static_cast<int>(o.what)] + piece[static_cast<int>(o.piece)] + step + layer +
             mb;
    }
    case OpKind::copy: {
      // "offload grads L12 mb3", "fetch params lm-head"; Op::what names the unit.
      const std::string unit = o.what == ComputeWhat::embedding ? " embedding"
                               : o.what == ComputeWhat::lm_head ? " lm-head"
                                                                : layer;
      static constexpr const char* what[] = {"params", "grads", "activations"};
      return std::string(o.to_host ? "offload " : "fetch ") + what[static_cast<int>(o.copied)] + unit + mb;
    }
    case OpKind::send:
    case OpKind::recv:
      if (o.category == Category::cp_comm) {  // "cp ring #1 send kv L3 mb0 -> 2"; the gradients' "kv-grad"
        const char* what = o.gradient ? "kv-grad" : "kv";
        return std::string("cp ring #") + std::to_string(o.step) + (o.kind == OpKind::send ? " send " : " recv ") + what +
               layer + mb + (o.kind == OpKind::send ? " -> " : " <- ") + std::to_string(o.peer);
      }
      if (o.tp_role == TpRole::ring) {  // "tp ring #2 send mlp L3 mb0 -> 5"
        static constexpr const char* part[] = {"layer", "attention", "mlp", "core", "embedding", "head", "optimizer"};
        const char* grad = o.pass == Category::backward ? "-grad" : "";
        return std::string("tp ring #") + std::to_string(o.step) + (o.kind == OpKind::send ? " send " : " recv ") +
               part[static_cast<int>(o.what)] +
               grad + layer + mb + (o.kind == OpKind::send ? " -> " : " <- ") + std::to_string(o.peer);
      }
      return std::string(o.kind == OpKind::send ? "send " : "recv ") + (o.gradient ? "grad" : "act") + mb +
             (o.kind == OpKind::send ? " -> " : " <- ") + std::to_string(o.peer);
    case OpKind::collective: {
      const Group& g = p.groups[static_cast<std::size_t>(o.group)];
      const std::string dim = g.part == GroupPart::expert_data ? "expert-dp" : std::string(to_string(g.dim));
      if (o.category == Category::ep_comm) {  // "ep all-to-all dispatch L3 mb0", backward "... dispatch-grad ..."
        const char* grad = o.pass == Category::backward ? "-grad" : "";
        return std::string("ep all-to-all ") + (o.step == 0 ? "dispatch" : "combine") + grad + layer + mb;
      }
      if (o.category == Category::bn_comm) {  // "syncbn all-gather stats #1 L3 mb0", backward "... all-reduce grad-sums ..."
        return std::string("syncbn ") + std::string(to_string(o.collective)) +
               (o.pass == Category::backward ? " grad-sums #" : " stats #") + std::to_string(o.step) + layer + mb;
      }
      if (o.category == Category::dp_comm) {
        return dim + " " + std::string(to_string(o.collective)) + " bucket L" + std::to_string(o.layer) + "-" +
               std::to_string(o.layer_end - 1);
      }
      if (o.category == Category::pp_comm) return "embedding-gradient " + std::string(to_string(o.collective));
      if (o.tp_role == TpRole::replicated_grads) return dim + " " + std::string(to_string(o.collective)) + " norm gradients";
      if (o.tp_role == TpRole::pp_gather) {
        return dim + " " + std::string(to_string(o.collective)) + (o.gradient ? " recv grad" : " recv act") + mb;
      }
      if (o.tp_role == TpRole::gather_input) {
        // Sequence parallelism: the input of the op it serves, e.g. "tp all-gather mlp-in L3 mb0".
        static constexpr const char* part[] = {"layer", "attention", "mlp", "core", "embedding", "head", "optimizer"};
        const char* grad = o.pass == Category::backward ? "-grad" : "";
        return dim + " " + std::string(to_string(o.collective)) + " " + part[static_cast<int>(o.what)] + grad + "-in" +
               layer + mb;
      }
      // A block of a pipelined reduce-scatter (tensor-parallel overlap): "tp reduce-scatter #1 L3 mb0".
      const std::string block = o.step >= 0 ? " #" + std::to_string(o.step) : "";
      return dim + " " + std::string(to_string(o.collective)) + block + layer + mb;
    }
  }
  return "?";
}

std::vector<std::vector<int>> add_groups(const scenario::ParallelPlan& p, const scenario::ModelSpec& m, Program& prog) {
  const auto world = static_cast<std::size_t>(prog.world);
  std::vector<std::vector<int>> group_of(expert_dp_groups + 1, std::vector<int>(world, -1));
  // Adds `g` to the Program and records it as its members' group of kind `kind`.
  auto add = [&](Group g, std::size_t kind) {
    const int id = static_cast<int>(prog.groups.size());
    for (int member : g.ranks) group_of[kind][static_cast<std::size_t>(member)] = id;
    prog.groups.push_back(std::move(g));
  };
  for (scenario::Dim d : {scenario::Dim::tp, scenario::Dim::dp, scenario::Dim::pp, scenario::Dim::cp}) {
    if (d == scenario::Dim::cp && p.cp == 1) continue;
    const std::size_t kind = group_kind(d);
    for (int r = 0; r < prog.world; ++r) {
      if (group_of[kind][static_cast<std::size_t>(r)] >= 0) continue;
      Group g{d, {}};
      scenario::Coord c = coord_of(p, r);
      if (d == scenario::Dim::dp) {  // the gradients' group: dp x cp
        for (int i = 0; i < p.grad_ranks(); ++i) g.ranks.push_back(rank_of(p, at_grad_index(p, c, i)));
      } else {
        for (int i = 0; i < extent(p, d); ++i) {
          coordinate(c, d) = i;
          g.ranks.push_back(rank_of(p, c));
        }
      }
      add(std::move(g), kind);
    }
  }
  // Tied embeddings over several stages: the first stage's embedding and the last stage's
  // LM head are one matrix held twice; Megatron all-reduces their gradients between the
  // two ranks of each (tp, dp) position (its "embedding group").
  if (m.kind == scenario::ModelKind::transformer && m.tie_embeddings && p.pp > 1) {
    for (int r = 0; r < prog.world; ++r) {
      scenario::Coord c = coord_of(p, r);
      if (c.pp != 0) continue;
      c.pp = p.pp - 1;
      add(Group{scenario::Dim::pp, {r, rank_of(p, c)}}, tied_embedding_groups);
    }
  }
  // Hybrid sharding: dp lines cut into shard groups of shard_size() consecutive indices,
  // and the replica groups across them.
  if (p.hybrid_shard()) {
    const int n = p.shard_size();
    for (int r = 0; r < prog.world; ++r) {
      const scenario::Coord c = coord_of(p, r);
      const int i = grad_index(p, c);
      if (i % n == 0) {  // the first of its shard group
        Group g{scenario::Dim::dp, {}, GroupPart::shard};
        for (int k = 0; k < n; ++k) g.ranks.push_back(rank_of(p, at_grad_index(p, c, i + k)));
        add(std::move(g), shard_groups);
      }
      if (i < n) {  // the first of its replica group
        Group g{scenario::Dim::dp, {}, GroupPart::replica};
        for (int k = i; k < p.grad_ranks(); k += n) g.ranks.push_back(rank_of(p, at_grad_index(p, c, k)));
        add(std::move(g), replica_groups);
      }
    }
  }
  // Expert parallelism: ep consecutive grad indices exchange tokens; every ep-th holds the
  // same experts (their gradients' group, when there are several).
  if (p.ep > 1) {
    for (int r = 0; r < prog.world; ++r) {
      const scenario::Coord c = coord_of(p, r);
      const int i = grad_index(p, c);
      if (i % p.ep == 0) {
        Group g{scenario::Dim::dp, {}, GroupPart::expert};
        for (int k = 0; k < p.ep; ++k) g.ranks.push_back(rank_of(p, at_grad_index(p, c, i + k)));
        add(std::move(g), ep_groups);
      }
      if (i < p.ep && p.expert_grad_ranks() > 1) {
        Group g{scenario::Dim::dp, {}, GroupPart::expert_data};
        for (int k = i; k < p.grad_ranks(); k += p.ep) g.ranks.push_back(rank_of(p, at_grad_index(p, c, k)));
        add(std::move(g), expert_dp_groups);
      }
    }
  }
  // ZeRO-3: its gathers' own copy of each group it shards over (own communicators: the
  // gathers and the reduce-scatters run on two streams, in an order that differs by rank).
  if (p.zero == 3 && p.grad_ranks() > 1) {
    const std::size_t source = p.hybrid_shard() ? shard_groups : static_cast<std::size_t>(scenario::Dim::dp);
    for (int r = 0; r < prog.world; ++r) {
      if (group_of[gather_groups][static_cast<std::size_t>(r)] >= 0) continue;
      add(prog.groups[static_cast<std::size_t>(group_of[source][static_cast<std::size_t>(r)])], gather_groups);
    }
  }
  return group_of;
}

}  // namespace parasim::program
