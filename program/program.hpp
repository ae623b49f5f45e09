// The Program: the one intermediate form both engines consume. For every rank, an ordered
// list of operations, each on a stream of that rank, with explicit dependencies.
//
// Execution rules, which the simulator and the executor both follow:
//   * compute, tp-comm, dp-comm and dp-gather streams run their ops one at a time in program order;
//   * to-host and from-host streams run their copies one at a time in program order, as a
//     device's two copy engines do, and the host stream the rank's host-side optimizer step;
//   * pp-comm ops (send / recv) are posted in program order but complete independently,
//     as non-blocking point-to-point does: a send starts once its dependencies are done, a
//     recv completes when the matching send's data has arrived (pairs share `match`);
//   * an op starts only after every op in its dependency list has completed;
//   * a collective starts when every member's op is ready (members share `match` and
//     `group`), and completes for all of them together.
//
// Ops are compact (no strings): names are made on demand by op_name(). Compute ops refer to
// a shared set of GEMM shapes (`gemms`, repeated `gemm_repeat` times) rather than owning one,
// and to the shared list of kernels a GPU implementation launches for them (`kernels`).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
#include "scenario/diagnostics.hpp"
#include "scenario/limits.hpp"
#include "scenario/placement.hpp"
#include "scenario/scenario.hpp"

namespace parasim::program {

// dp_gather: ZeRO-3's parameter all-gathers, on their own stream and communicators beside
// the gradients' reduce-scatters (as FSDP runs them), so that neither waits for the other.
// to_host / from_host: copies between the device and its host's memory (offloading, over
// the device's PCIe path); host: the rank's work on the host's cores (the offloaded
// optimizer step).
enum class Stream : std::uint8_t { compute, tp, pp, dp, dp_gather, to_host, from_host, host };
// copy: `bytes` between the rank's device and its node's host memory (Op::to_host says
// which way): an offloaded unit's gradients out, its parameters in.
enum class OpKind : std::uint8_t { compute, send, recv, collective, copy };
// What a copy carries: a unit's parameters or gradients, or a layer's stored activations.
enum class Copied : std::uint8_t { params, grads, activations };
// bn_comm: SyncBatchNorm's collectives over the dp group (a generic model's BatchNorm
// layers under TrainingSpec::sync_batch_norm): forward the gather of a BN layer's
// statistics, backward the sum of its gradient sums (Op::step: the BN layer within the
// model layer, Op::pass the pass they serve), each between two pieces of the layer's pass.
enum class Category : std::uint8_t {
  forward, backward, recompute, optimizer, tp_comm, pp_comm, dp_comm, cp_comm, ep_comm, offload, bn_comm
};
// all_to_all: every member sends each other member an equal share of its buffer (`bytes`,
// its own share staying), as expert parallelism's token dispatch and combine.
enum class CollectiveOp : std::uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all };
enum class ComputeWhat : std::uint8_t { layer, layer_attention, layer_mlp, attention_core, embedding, lm_head, optimizer };
// What a tensor-parallel collective does for the compute op it serves (Op::what, in pass
// Op::pass): sums its partial output (all-reduce, or reduce-scatter under sequence
// parallelism), gathers its input from the sequence shards (all-gather, sequence
// parallelism), gathers the vocabulary-parallel loss statistics, or sums the gradients of
// the tensors every tp rank holds whole but computes on its sequence shard only (one per
// step, sequence parallelism), or gathers a pipeline transfer that arrived in tp slices (Megatron's scatter-gather; the op's
// `layer` and `gradient` name the boundary, as the transfer's do).
// Under tensor-parallel communication overlap the layer halves' all-gathers are rings of
// point-to-point transfers instead (ring: a send or receive of one sequence block, Op::step
// saying which step).
enum class TpRole : std::uint8_t { none, sum, gather_input, loss_stats, replicated_grads, pp_gather, ring };
// Which part of a layer half a compute op runs: all of it, or under tensor-parallel
// communication overlap one of its pieces (workload/kernels.hpp, OverlapKernels): prepare, one
// block of the column GEMM (Op::step: the ring's step), middle, the row GEMM (forward one of
// its blocks, Op::step), the weight gradients under the reduce-scatter (backward). A
// reduce-scatter of the overlap carries the piece it sums (row) and forward its block.
//
// Under context parallelism the attention half runs as prepare (before the attention core:
// forward the layer norm and QKV GEMM; backward the projection's gradients), one block per
// ring step (the attention of this rank's queries against the keys and values of one cp
// rank, Op::step the step), backward after each later block a merge (the key and value
// gradients the ranks before sent, added to this rank's share), and finish (forward the
// projection and residual; backward the QKV GEMM's gradients and the layer norm's).
//
// Under expert parallelism the MLP half runs as prepare (forward the layer norm, router
// and the tokens' permutation into expert order; backward the residual's gradient and the
// output gradient's permutation), the all-to-all dispatch (Op::step 0), experts (the local
// experts' GEMMs), the all-to-all combine (Op::step 1), and finish (forward the weighted
// sum back into token order; backward the router's and the permutation's gradients and the
// layer norm's).
enum class LayerPiece : std::uint8_t { whole, prepare, column, middle, row, wgrad, block, finish, merge, experts, shared };

inline constexpr int stream_count = 8;
inline constexpr std::size_t category_count = 11;
std::string_view to_string(Stream s);
std::string_view to_string(Category c);
std::string_view to_string(CollectiveOp c);

struct Op {
  OpKind kind = OpKind::compute;
  Category category = Category::forward;
  Stream stream = Stream::compute;
  ComputeWhat what = ComputeWhat::layer;
  CollectiveOp collective = CollectiveOp::all_reduce;
  TpRole tp_role = TpRole::none;     // tp collectives
  Category pass = Category::forward;  // tp collectives: the pass of the op they serve
  std::int32_t rank = 0;
  std::int32_t micro_batch = -1;
  std::int16_t chunk = -1;
  LayerPiece piece = LayerPiece::whole;  // layer-half compute ops and ring transfers
  std::int16_t step = -1;                // ring step of a column or row piece, or of a transfer
  std::int32_t layer = -1;       // model layer (compute / tp collectives), or first layer of a bucket
  std::int32_t layer_end = -1;   // one past the last layer covered
  double flops = 0.0;            // compute
  double bytes = 0.0;            // compute: memory traffic; comm: payload per rank
  std::int32_t peer = -1;        // send / recv
  bool gradient = false;         // send / recv (and their tp gathers): gradients (backward) rather than activations
  bool to_host = false;          // copy: device to host memory (else host to device)
  Copied copied = Copied::params;  // copy: what it carries
  std::int32_t group = -1;       // collective: Program::groups index
  std::int64_t match = -1;       // send/recv pair id, or collective instance id
  std::int32_t gemms = -1;       // compute: Program::gemm_sets index
  std::int32_t gemm_repeat = 0;
  std::int32_t kernels = -1;     // compute: Program::kernel_sets index (what a GPU implementation launches)
  // The host waits for this op to complete before it issues the rank's next op (Megatron
  // synchronises the device after its pipeline transfers; PyTorch's SyncBatchNorm).
  bool host_sync = false;
  // The host waits for this op's dependencies to complete before it issues it (Megatron
  // reads the gradient norm and the overflow flag before the optimizer step).
  bool host_waits = false;
  std::uint32_t deps_begin = 0;  // Program::deps range
  std::uint32_t deps_count = 0;
};

// A group of ranks: every rank of one dimension's line (a dp line spans dp x cp: the ranks
// whose gradients are summed), or under hybrid sharding (ParallelPlan::hybrid_shard) part
// of a dp line: a shard group (consecutive grad_index()es) or a replica group (the ranks
// holding the same shard in each shard group); under expert parallelism an expert group
// (ep consecutive grad_index()es: the all-to-all's) or an expert data-parallel group (the
// ranks holding the same experts, every ep-th grad_index()).
enum class GroupPart : std::uint8_t { whole, shard, replica, expert, expert_data };
struct Group {
  scenario::Dim dim = scenario::Dim::dp;
  std::vector<int> ranks;
  GroupPart part = GroupPart::whole;
};

struct Program {
  int world = 0;
  std::vector<Op> ops;                           // global op ids
  std::vector<std::int64_t> deps;                // flat dependency lists
  std::vector<std::vector<std::int64_t>> order;  // per rank: op ids in the order its host issues them
                                                 // (each stream's in the order emitted)
  std::vector<Group> groups;
  std::vector<std::vector<workload::Gemm>> gemm_sets;
  std::vector<std::vector<workload::Kernel>> kernel_sets;
  std::int64_t collectives = 0;  // collective instances
  std::int64_t transfers = 0;    // send/recv pairs
  // A Program of one data-parallel replica (CompileOptions::one_replica) holds the ops of
  // the ranks with dp index 0 only; mirror_of[r] is the rank whose ops rank r's mirror
  // (the same tp and pp position). Empty when every rank is compiled. Groups are complete
  // either way: a data-parallel collective lists every replica's member.
  std::vector<std::int32_t> mirror_of;

  [[nodiscard]] bool one_replica() const { return !mirror_of.empty(); }

  [[nodiscard]] std::span<const std::int64_t> deps_of(std::int64_t op) const {
    const Op& o = ops[static_cast<std::size_t>(op)];
    return {deps.data() + o.deps_begin, o.deps_count};
  }
};

// Adds the plan's groups to `prog` (prog.world set): one per tp, dp and pp group, then for
// tied embeddings over several stages the pairs of first- and last-stage ranks of each
// (tp, dp) position (Megatron's embedding group). Returns, per kind of group (Dim's order,
// then tied_embedding_groups), each rank's group index, -1 where it has none.
inline constexpr std::size_t tied_embedding_groups = 3;
inline constexpr std::size_t shard_groups = 4;    // hybrid sharding's (else every rank -1)
inline constexpr std::size_t replica_groups = 5;
inline constexpr std::size_t gather_groups = 6;   // ZeRO-3's gathers: a copy of each shard group
inline constexpr std::size_t cp_groups = 7;       // context parallelism's rings
inline constexpr std::size_t ep_groups = 8;       // expert parallelism's all-to-alls
inline constexpr std::size_t expert_dp_groups = 9;  // the experts' gradient sums (ParallelPlan::expert_grad_ranks)
// The group kind of a dimension's lines: tp, dp (over dp x cp: the gradients' group), pp, cp.
inline constexpr std::size_t group_kind(scenario::Dim d) {
  return d == scenario::Dim::cp ? cp_groups : static_cast<std::size_t>(d);
}
std::vector<std::vector<int>> add_groups(const scenario::ParallelPlan& p, const scenario::ModelSpec& m, Program& prog);

struct CompileOptions {
  // Compile data-parallel replica 0 only (the others run the same ops on their own ranks).
  bool one_replica = false;
  // The most ops the Program may have (ProgramTooLarge past it): 0 for the cap
  // (scenario::limits::program_ops) or what the host's available memory holds at
  // limits::program_op_bytes an op, whichever is less; tests set it.
  long long max_ops = 0;
};

// A step whose Program would pass scenario::limits::program_ops: a ScenarioError at the
// key that contributes most (model.layers or training.global_batch), so that a command
// refuses it with exit 2 instead of running out of memory; the planner keeps such a
// plan's estimate.
class ProgramTooLarge : public scenario::ScenarioError {
 public:
  using ScenarioError::ScenarioError;
};

// Builds the Program of one training step. The scenario must have passed check(). Throws
// ProgramTooLarge past the op limit, having used at most the limit's memory.
Program compile(const scenario::Scenario& s, CompileOptions options = {});

// "fwd L12 mb3", "tp all-reduce L12 mb3", "send act mb3 -> 17", "dp all-reduce bucket L40-47"
std::string op_name(const Program& p, std::int64_t op);

}  // namespace parasim::program
