// Collectives decomposed into flows on the network, by algorithm.
//
// Buffer sizes follow nccl-tests: S is the per-rank buffer of an all-reduce, the output
// of an all-gather, the input of a reduce-scatter. Members are given in group order.
// Uncontended closed forms below use the link bandwidth B and the route latency a between
// two members (on a switch, every member has its own port of bandwidth B each way).
//
// ring          n ranks in a ring, pipelined as NCCL runs it: the buffer moves in many
//               small chunks, so every member streams to its successor at once. As flows,
//               one per ring edge, carrying steps · S/n bytes, after a pipeline fill of
//               steps - 1 hops; steps = n-1 for reduce-scatter and all-gather, 2(n-1) for
//               all-reduce:
//                 all-reduce  2(n-1)/n · S/B + 2(n-1)·a,  RS / AG  (n-1)/n · S/B + (n-1)·a
// tree          all-reduce as NCCL's double binary tree: tree A is the heap over group
//               positions (parent of i is (i-1)/2), tree B is its mirror (position i is
//               member n-1-i), so a member interior in one tree is a leaf in the other.
//               Each tree carries S/2. The reduction up and the broadcast down are
//               pipelined, so as flows every tree edge carries S/2 up and S/2 down at once,
//               after a pipeline fill of one hop per level each way (depth d = floor(log2 n)):
//                 2d·a + (most loaded port) / B, which is 2S/B for n >= 8 (a port carries
//                 four S/2 flows) and 3S/2B for n = 4.
//               Reduce-scatter and all-gather have no tree form (as in NCCL): ring.
// hierarchical  all-reduce over several nodes with the same number k > 1 of members on
//               each: ring reduce-scatter inside each node, ring all-reduce of the S/k
//               shards across nodes (k rings, one per local index), ring all-gather inside
//               each node, each phase after the previous one. Otherwise: ring.
// nvls          all-reduce inside one NVSwitch node reduced by the switch (NVLink SHARP):
//               every member sends its S to the switch and receives the reduced S back,
//               pipelined: a + S/B. Over several nodes: hierarchical; elsewhere or for
//               RS / AG: ring.
// direct        every member sends each other member its 1/n share at once:
//                 RS / AG  (n-1)/n · S/B + a,  all-reduce = RS then AG.
//               An all-to-all (S: each member's buffer, 1/n of it to each member) always
//               runs so, as NCCL's grouped sends: (n-1)/n · S/B + a, and under NCCL the
//               Simple ring's base latency and one hop (below).
// binomial      Open MPI's nonblocking collectives (coll/libnbc, which the CPU executor's
//               MPI_Iallreduce, MPI_Ireduce_scatter and MPI_Iallgatherv run): an
//               all-reduce is a binomial reduce to the first member, each of its
//               ceil(log2 n) rounds a phase in which member v (v mod 2^r = 2^(r-1))
//               sends all of S to v - 2^(r-1), then a binomial broadcast in which each
//               member, once it has S, sends it to all of its children at once (member
//               v's children are v + 2^s for 2^s > v); libnbc takes it whenever the buffer
//               is in place, as the executor's is. A reduce-scatter is the same reduce,
//               then the first member sends every other member its block at once. An
//               all-gather is direct. Uncontended, with n = 2: all-reduce 2 S/B,
//               reduce-scatter 3S/2B, all-gather S/2B.
// auto          under MPI (cluster.collectives: mpi, CPU ranks): libnbc's, binomial above.
//               Under NCCL as NCCL's tuner: estimate each applicable algorithm among ring, tree,
//               hierarchical and nvls and take the fastest (ties to the earlier). The
//               estimate of a phase is its latency steps plus the load of its most
//               loaded link over that link's bandwidth, with every flow of the phase on
//               its route (contention inside the collective counted, other traffic not).
//
// Under NCCL (cluster.collectives: nccl, the default on GPUs) a collective runs with one of
// NCCL's protocols, and its latency is NCCL's, not the links' (NCCL's tuning model,
// src/graph/tuning.cc: a base latency per algorithm and protocol plus a latency per step
// inside a node (NVLink or PCIe) and per step across nodes):
//   ring    base + (steps - inter steps)·intra + inter steps·inter, steps 2(n-1) for
//           all-reduce and n-1 for reduce-scatter / all-gather, inter steps likewise over nodes
//   tree    base + 2((n/nodes - 1)·intra + log2(nodes)·inter)
//   nvls    25 us (+ 18 us and the network's latency across nodes)
//   base    ring LL 6.6, LL128 14, Simple 8.4 us; tree 6.8, 14, 8.4 us
//   intra   NVLink: ring 0.6 / 1.9 / 3.4 us, tree 0.6 / 1.25 / 4 us; PCIe: ring 1 / 2.5 / 5.7 us
//   inter   ring 2.7 / 4 / 14 us, tree 5 / 8.5 / 14 us, plus the network latency (twice for Simple)
// and its flows carry the bytes the protocol puts on the wire: Simple all of the link's
// rate, LL128 0.92 of it (120 data bytes per 128), LL half (a flag per 4 data bytes), capped
// at 0.37 of a GPU's usable NVLink rate inside a node and 0.9 of a NIC across nodes. NVLS
// runs Simple at the switch's `nvls` share of the port rate, and only where the NVSwitch
// reduces (cluster.intra_node.nvls > 0: H100 generation on). For each call auto takes the
// fastest (algorithm, protocol) by these estimates, as NCCL's tuner does. A ring across
// nodes runs one channel per NIC (rail-aligned, as NCCL's rings over a DGX): with k members
// per node and N NICs, C = min(k, N) rings each carry S/C, ring c leaving and entering
// every node through the member on rail c (the last member of the node's segment hands its
// data to it over NVLink, as NCCL's PXN does), so all C NICs carry the inter-node steps.
// Hierarchical phases are pipelined (they run as one phase of all their flows).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "program/program.hpp"
#include "sim/network.hpp"

namespace parasim::sim {

enum class Algorithm { ring, tree, hierarchical, nvls, direct, binomial };
std::string_view to_string(Algorithm a);
enum class Protocol { simple, ll128, ll };
std::string_view to_string(Protocol p);

struct CollectiveCall {
  program::CollectiveOp op = program::CollectiveOp::all_reduce;
  std::vector<int> devices;  // group order
  double bytes = 0.0;
  int traffic = -1;  // whose bytes, for the network's accounting (Network::transfer)
};

// Whether `a` can run `c` as itself (rather than falling back).
bool applicable(Algorithm a, const topology::Cluster& cluster, const CollectiveCall& c);

// How one call runs: the algorithm, the protocol, the latency before its flows (NCCL's,
// or < 0: the links' own, as MPI) and the factor its flows' bytes are stretched by (the
// protocol's and NVLS's share of the link rate).
struct Choice {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  double latency = -1.0;
  double stretch = 1.0;
};

// NCCL's latency of algorithm `a` with protocol `p` for `c`, in seconds (the model above).
double nccl_latency(Algorithm a, Protocol p, const topology::Cluster& cluster, const CollectiveCall& c);

// The uncontended estimate described above, in seconds: by the links alone (`a`), or as
// `choice` runs it.
double estimate_seconds(Algorithm a, Network& net, const CollectiveCall& c);
double estimate_seconds(const Choice& choice, Network& net, const CollectiveCall& c);

// nccl-tests' bus factor: the bus bytes are bus_factor x S (all-reduce 2(n-1)/n, the
// others (n-1)/n).
double bus_factor(const CollectiveCall& c);
// Seconds the flows of `a` for `c` take at the links' rates, latencies left out.
double transfer_seconds(Algorithm a, Network& net, const CollectiveCall& c);

// How a plan's setting runs `c`, after fallbacks; auto chooses by estimate (and, under
// NCCL, the protocol too).
Choice choose(scenario::Collective setting, Network& net, const CollectiveCall& c);
// choose()'s algorithm.
Algorithm resolve(scenario::Collective setting, Network& net, const CollectiveCall& c);

// Runs `c` as `choice` says (its algorithm must be what choose() gives, or applicable);
// `done` runs when every member has its result.
void run_collective(Network& net, const Choice& choice, CollectiveCall c, std::function<void()> done);
// With the links' latencies and no protocol (tests).
void run_collective(Network& net, Algorithm a, CollectiveCall c, std::function<void()> done);

// Whether an algorithm's flows over a group are the same after shifting the members one
// position round the group (so a folded simulation can run one member's share of them).
// Folded, a collective across the replicas by another algorithm runs all of its flows,
// each standing for itself (network.hpp), which makes the folding approximate.
bool symmetric(Algorithm a, const Network& net, const CollectiveCall& c);
bool spans_replicas(const Network& net, const CollectiveCall& c);

// The ends of the flows run_collective() would start for `c` that stand for copies in the
// other replicas (replica 0's, folded; none of a collective that runs single flows).
std::vector<FlowEnds> flow_ends(Algorithm a, Network& net, const CollectiveCall& c);

// Shorthand for the ring, used by tests.
void ring_collective(Network& net, program::CollectiveOp op, std::vector<int> devices, double bytes,
                     std::function<void()> done);

// Remembers choose()'s answer per (setting, op, bytes, group): a step repeats the same
// calls on the same groups many times. `group` identifies c.devices (a Program group).
class AlgorithmCache {
 public:
  // Counts the use unless `count` is false (a look-ahead).
  const Choice& get(scenario::Collective setting, Network& net, const CollectiveCall& c, int group, bool count = true);
  // Instances per algorithm ("ring", "nvls", ...), and per protocol ("LL128", ...).
  [[nodiscard]] const std::map<std::string, std::uint64_t>& uses() const { return uses_; }
  [[nodiscard]] const std::map<std::string, std::uint64_t>& protocol_uses() const { return protocol_uses_; }

 private:
  std::map<std::tuple<int, int, double, int>, Choice> cache_;
  std::map<std::string, std::uint64_t> uses_;
  std::map<std::string, std::uint64_t> protocol_uses_;
};

}  // namespace parasim::sim
