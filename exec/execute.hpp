// Executing a scenario for real: the Program compiled for every rank, run step after step
// on this process's Device (one rank of the job), with warm-up steps first. Every rank
// calls execute(); rank 0 gets the job's figures and the measured Trace.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/device.hpp"
#include "program/program.hpp"
#include "report/trace.hpp"

namespace parasim::exec {

struct StepRecord {
  int index = 0;
  bool warmup = false;
  double seconds = 0.0;  // first op start to last op end over all ranks
  double loss = 0.0;     // mean per-token loss of the step's global batch
  double flops = 0.0;    // performed by all ranks
  bool skipped = false;     // fp16: the optimizer step was skipped (gradients overflowed)
  double loss_scale = 1.0;  // fp16: the loss scale after the step (1 in other precisions)
  double grad_norm = 0.0;   // the global gradient norm (before clipping; inf when skipped)
  double clip = 1.0;        // the factor clipping scaled the gradients by (1: not clipped)
  double learning_rate = 0.0;
  int largest_rank = -1;    // the rank whose own gradients were largest (or non-finite); -1: every rank's were not finite
  // That rank's gradient norm over the median of its data-parallel peers' (the ranks of
  // the same tp and pp coordinates, which hold the same parameters); 0 without peers. A
  // bad worker with finite gradients shows as a ratio far above 1.
  double largest_ratio = 0.0;
  std::string divergence;   // why the step counts as diverged (run.on_divergence), or ""
};

// run.on_divergence: stop. Every rank throws it at the same step (they see the same loss
// and norms); `parasim run` exits with status 5.
struct Diverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Why step `r` counts as diverged, given the losses of the steps before it: a non-finite
// loss, a non-finite gradient norm (not a skipped fp16 step), or a loss above `factor`
// times the median of the last 10 steps' (from the second step on); "" when it does not.
std::string divergence(const StepRecord& r, const std::vector<double>& earlier_losses, double factor);

struct RunOptions {
  int steps = 10;   // measured
  int warmup = 2;   // run first, not measured
  double stall_seconds = 60.0;
  std::function<void(const StepRecord&)> on_step;  // called on rank 0 after each step
  // A fault to inject, for testing that a failing rank ends the job: at the start of step
  // `fault_step` rank `fault_rank` throws ("raise") or exits at once ("exit").
  int fault_rank = -1;
  int fault_step = 0;
  std::string fault_kind;
};

struct Measurement {
  program::Program program;       // what ran; the trace's op ids refer to it
  std::vector<StepRecord> steps;  // warm-up and measured, in order
  report::Trace trace;            // rank 0: the measured step of median time
  int traced_step = -1;
  std::vector<double> peak_memory;  // bytes per rank (the device allocator's high-water mark)
  double median_seconds = 0.0;      // over the measured steps
  double mean_seconds = 0.0;
  double flops_per_step = 0.0;      // performed, all ranks
  // Expert parallelism: the rows the busiest rank's experts computed over the mean, averaged
  // over the measured steps (what model.moe_imbalance stands for); 0 without.
  double expert_load = 0.0;
  std::string model_note;           // how the model was run ("GPT decoder", or GEMM equivalents)
  std::string kernel_paths;         // rank 0's Device::kernel_paths() after the run ("" when none)
};

Measurement execute(const scenario::Scenario& s, Device& dev, const RunOptions& options);

}  // namespace parasim::exec
