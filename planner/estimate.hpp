// The analytical tier: one training step's time from closed forms over the same cost
// models the event simulator uses (op durations from compute_model.hpp, collectives from
// the algorithms' uncontended estimates in collectives.hpp), so thousands of plans can be
// scored in the time the simulator takes for one.
//
// Per micro-batch, stage s costs W_s: its layers' forward, recompute and backward (each
// op as compute_seconds() times it; a tp collective after each half-layer, waited for;
// with a kernel model each pass takes the longer of its kernels plus collectives and the
// host's time to issue them, and with pipeline stages each chunk starts with the host
// issuing from scratch, as Megatron synchronises at every transfer),
// plus the embedding on the first stage and the LM head on the last. The pipeline takes
//   1F1B              sum_s W_s + (m - 1) max_s (W_s + n_s t_p2p) + 2 (pp - 1) t_p2p
//   GPipe             sum_s W_s + (m - 1) (max(max_s F_s, t_p2p) + max(max_s B_s, t_p2p)) + 2 (pp - 1) t_p2p
//   interleaved       (m + (pp - 1) / v) (max_s W_s + 2 t_p2p) + 2 (pp v - 1) t_p2p
// where t_p2p is one boundary's transfer (latency + bytes / route bottleneck, stretched by
// the pipelines sending at once over the same links) and n_s stage s's neighbours (1 for
// the first and last, 2 between): a 1F1B stage exchanges with the next stage after each
// forward (its activation out while a gradient comes in, the two directions at once) and
// with the previous one after each backward, so a two-stage cycle waits for one transfer
// and a middle stage's for two; interleaved, most of a stage's 2v transfers a micro-batch
// hide behind its other chunks' work (the simulator's interleaving), the pipeline's fill
// and drain pay each; GPipe's transfers stream behind the work, its forward phase (F: the
// forward part of W) and its backward phase each at the pace of the slower of the work
// and the link. Stage s ends its last backward sum_{s' < s} B_s' + s t_p2p before the
// pipeline does (B: the backward part of W); its gradients become ready through that
// backward, layer by layer from the last (interleaved: chunk c's in its own last
// backward, c rounds of pp chunk backwards before the end, as the cooldown runs them
// chunk by chunk), and go out in buckets of plan.bucket_size one after another on the dp
// stream (all-reduce, or reduce-scatter under ZeRO-1); then the sequence-parallel norm
// sum, the tied-embedding sum, the optimizer, and under ZeRO-1 the parameters'
// all-gathers. The step ends when the last stage's does. Offloading: the units' copies to
// and from host memory stretch a stage like ZeRO's traffic (the longer of its work and
// each direction's copies), the activations' stretch its passes (each direction against
// the micro-batch's work; on one stage the forward also waits for its copies out once per
// step), and the host's optimizer step and the weights' copy back follow the last
// backward.
//
// Collectives over a group that leaves its node share the NICs with the other groups of
// their dimension running at once: the estimate's transfer part (not its latency) is
// stretched by the most loaded link's count of concurrent ring edges over the group's own
// (1 inside a node). Concurrent: for dp every stage's groups (the stages' gradient
// reductions, fp32 under bf16 and long on a NIC, meet at the end of the step whatever
// their buckets' order); for pp every pipeline's; for tp the stage's, plus the other
// stages' in proportion to the time they spend in tp collectives while the pipeline is
// full.
//
// What it leaves out, and the simulator has: contention between dimensions (tp and dp
// on one link at the same time), the exact interleaving of sends with compute, and
// waiting on collective members that arrive late. Agreement with the simulator
// (tests/planner/estimate_test.cpp): within 5 % on every seed scenario's own plan; across the
// search spaces of three seed scenarios, a median error under 20 % per schedule and none
// off by 70 % or more (the worst, about 60 %, are plans whose pipeline or data
// parallelism crosses a slow network); within 10 % on LeNet and ResNet-18 with per-rank
// BatchNorm and with SyncBN (whose forward gathers stop the host: each piece after one
// costs its own device time or the host's issuing, whichever is longer).
// Hence the planner ranks by it but reports its best plans as the simulator scores them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "scenario/scenario.hpp"
#include "sim/compute_model.hpp"

namespace parasim::planner {

struct StepEstimate {
  double step_time = 0.0;        // seconds
  double pipeline = 0.0;         // forward and backward of every micro-batch, bubble included
  double bubble = 0.0;           // fraction of the step stage 0 spends waiting on the pipeline
  double tp_exposed = 0.0;       // seconds per step (tp collectives are waited for)
  double dp_exposed = 0.0;       // seconds after the pipeline until the optimizer can start
  double cp_exposed = 0.0;       // seconds per step the cp ring's transfers are waited for
  double ep_exposed = 0.0;       // seconds per step in the experts' all-to-alls (waited for)
  double offload_exposed = 0.0;  // seconds per step the copies to and from host memory add
  double syncbn_exposed = 0.0;   // seconds per step in SyncBN's collectives (waited for)
  double optimizer = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;
  std::string bottleneck;
};

class Estimator {
 public:
  // The cluster, profile and network of `base`; every scenario estimated must share them.
  explicit Estimator(const scenario::Scenario& base);
  ~Estimator();
  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;

  StepEstimate estimate(const scenario::Scenario& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parasim::planner
