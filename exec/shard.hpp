// One rank's part of the model under a plan, on a Device: its parameters, gradients and
// AdamW state in flat buffers, the activations of its micro-batches, and one method per
// compute op of the Program. The runner (runner.hpp) calls them in the Program's order and
// asks for the buffer of each communication op.
//
// Two models implement it: GptShard, the GPT decoder sharded as Megatron does
// (gpt_shard.hpp), and GenericShard, a generic layer list run as GEMM equivalents
// (generic_shard.hpp). What they share lives here: the flat parameter layout by layer slot,
// data-parallel buckets cut at slot boundaries (and ZeRO-1's share of each), the optimizer
// step, mixed-precision weights, and the map from local parameters to the full model's
// (add_to_full), which the correctness tests sum over ranks.
//
// Mixed precision (bf16 / fp16): fp32 master weights and gradients, a copy of the weights
// in 16 bits (two bytes a parameter; w() unpacks the two layer slots in use to fp32),
// activations and the gradients of the logits and between layers rounded to 16 bits where
// they are stored (a GPT layer's stored activations packed into two bytes until its
// backward), fp32 arithmetic inside kernels (as tensor cores accumulate in fp32), so that
// the values are those of 16-bit training; GEMMs run in the plan's precision
// (Device::set_gemm_precision). fp16 adds dynamic loss scaling: the loss gradient is
// scaled by loss_scale(); optimizer_step() skips the step and halves the scale when any
// rank's gradients overflowed, else unscales them, steps, and doubles the scale after
// loss_scale_window overflow-free steps.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/device.hpp"
#include "program/program.hpp"

namespace parasim::exec {

// Why the executor cannot run this scenario, or "" when it can.
std::string unsupported_reason(const scenario::Scenario& s);

class Shard {
 public:
  struct View {
    float* data = nullptr;
    std::int64_t count = 0;
  };

  virtual ~Shard() = default;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // The lowest layer of each of this rank's data-parallel buckets (the Program's dp
  // collectives: under ZeRO-2/3 one per unit), and of its experts' buckets (expert
  // parallelism: summed over the ranks holding the same experts); allocates the optimizer
  // state, which ZeRO shards by bucket. Call once.
  void set_buckets(std::vector<int> lowest_layers, std::vector<int> expert_lowest_layers = {});
  // Zeroes gradients and loads the step's synthetic batch.
  void begin_step(std::int64_t step);
  // After the step's last op: reads the step's losses from the device in one download
  // (loss_rows) and sums them into loss_sum().
  void end_step();

  // --- compute ops ---------------------------------------------------------------------------
  virtual void embedding_forward(int mb) = 0;
  virtual void embedding_backward(int mb) = 0;
  // part: layer (a whole layer), layer_attention or layer_mlp (tp > 1).
  virtual void layer_forward(int layer, int mb, program::ComputeWhat part, bool recompute) = 0;
  virtual void layer_backward(int layer, int mb, program::ComputeWhat part) = 0;
  virtual void recompute_attention_core(int layer, int mb);
  // Under tensor-parallel communication overlap: one piece of a layer half (Op::piece,
  // step, what, category, layer, micro_batch; workload/kernels.hpp, OverlapKernels).
  virtual void layer_piece(const program::Op& op);
  virtual void head_forward(int mb);
  virtual void head_backward(int mb);
  void optimizer_step();

  // --- communication buffers ------------------------------------------------------------------
  // A tensor parallel collective (its role, and the compute op it serves: Op::tp_role,
  // what, pass, layer, micro_batch): its buffer, and what to do once it completes.
  virtual View tp_buffer(const program::Op& collective);
  virtual void tp_finish(const program::Op& collective);
  // The sequence block a ring transfer of the overlap sends or receives.
  virtual View ring_block(const program::Op& transfer);
  // What enters layer `boundary` (activations), or its gradient.
  virtual View boundary(int boundary, int mb, bool gradient) = 0;
  virtual void release_boundary(int boundary, int mb, bool gradient) = 0;
  // A ring's transfer sent (ring_block's data is no longer read): its buffer may go.
  virtual void ring_sent(const program::Op& /*send*/) {}
  // Data-parallel buckets, named by their lowest layer (-1: the embedding) and whether they
  // hold experts (expert parallelism's buckets, in a region of their own after the dense
  // parameters): the gradients (all-reduce, reduce-scatter) or the master parameters
  // (ZeRO-1 all-gather) they cover.
  View bucket(int lowest_layer, bool params, bool experts = false);
  // Per rank of the group that shares it (ZeRO's shard group, or the experts' holders).
  [[nodiscard]] std::vector<std::int64_t> bucket_parts(int lowest_layer, bool experts = false) const;
  // This rank's part of a bucket's gradients: what hybrid sharding sums over the replicas.
  View owned_part(int lowest_layer, bool experts = false);
  void bucket_gathered(int lowest_layer, bool experts = false);
  // After a bucket's reduce-scatter: under ZeRO-2/3 (a unit's, every micro-batch) the other
  // ranks' shares are zeroed, so that the next micro-batch's gradients accumulate into
  // them afresh and this rank's share holds the running sum alone.
  void bucket_reduced(int lowest_layer);
  // SyncBN's collectives (Category::bn_comm, a generic model's): forward every member's
  // statistics of the BN layer (this rank's block written by the piece before, at its
  // grad_index; all-gathered in place), backward its two per-channel gradient sums
  // (all-reduced). The piece after reads them.
  virtual View batch_norm_buffer(const program::Op& collective);
  // The tied embedding's gradient (first stage: the embedding, last stage: the head copy).
  virtual View tied_embedding_grads();
  // Expert parallelism's all-to-alls over the ep group (Category::ep_comm; Op::step 0 the
  // dispatch, 1 the combine; Op::pass): what is sent to and received from each member, in
  // floats. Before a forward dispatch, the rows of each expert this rank sends (experts in
  // order: each member's back to back), and then those each member sends this rank for
  // each of its experts (member after member).
  struct Exchange {
    const float* send = nullptr;
    std::vector<std::int64_t> send_counts;
    float* recv = nullptr;
    std::vector<std::int64_t> recv_counts;
  };
  virtual std::vector<float> expert_counts(const program::Op& dispatch);
  virtual void expert_counts_received(const program::Op& dispatch, std::span<const float> counts);
  virtual Exchange exchange(const program::Op& all_to_all);

  // --- results -----------------------------------------------------------------------------------
  // Sum of per-token (per-sample) losses and their count this rank computed in the step.
  [[nodiscard]] double loss_sum() const { return loss_sum_; }
  [[nodiscard]] double loss_tokens() const { return loss_tokens_; }
  // Expert parallelism: the token rows this rank's experts computed in the step's forward,
  // per layer and micro-batch (layer · micro-batches + micro-batch; 0 for layers elsewhere).
  [[nodiscard]] const std::vector<double>& expert_rows() const { return expert_rows_; }
  [[nodiscard]] std::int64_t param_count() const { return param_count_; }
  // Adds this rank's canonical share of the parameters or gradients into a buffer in the
  // full model's layout: each value has exactly one owner over the job, so a sum over ranks
  // rebuilds the full tensor.
  void add_to_full(std::span<float> full, bool grads) const;
  [[nodiscard]] std::int64_t full_param_count() const { return full_count_; }
  // fp16's dynamic loss scaling: the current scale (1 in other precisions), and whether
  // the last optimizer step was skipped for overflow.
  [[nodiscard]] double loss_scale() const { return loss_scale_; }
  [[nodiscard]] bool last_step_skipped() const { return last_skipped_; }
  // The global gradient norm of the last optimizer step (over every rank's gradients, each
  // value once, after fp16's unscaling, before clipping: what Megatron reports), and the
  // factor clipping scaled the gradients by (1: none).
  [[nodiscard]] double grad_norm() const { return grad_norm_; }
  // The sum of squares of this rank's own gradients before their data-parallel reduction
  // (on a CPU rank, or with faults injected; else its part of the reduced norm): the rank
  // whose gradients are largest or non-finite.
  [[nodiscard]] double source_grad_norm2() const { return source_norm2_; }
  [[nodiscard]] double clip_factor() const { return clip_factor_; }
  // Optimizer steps taken (skipped fp16 steps not counted): what the learning rate's
  // schedule counts.
  [[nodiscard]] int optimizer_steps() const { return step_; }
  // run.inject: before a data-parallel reduction of a bucket's gradients (`v`), this rank's
  // injected fault of the step, if any (the optimizer step applies it when there is none).
  void before_reduce(View v);
  // 16-bit main gradients (training.grad_dtype bf16 / fp16): what a backward op of layer
  // slot `slot` (-1 the embedding, L the head) accumulated, and what a reduction summed
  // (`v`), rounded to that type, as Megatron keeps them. No-op for fp32 gradients.
  void gradients_accumulated(int slot);
  void gradients_reduced(View v);

  // fp8 under delayed scaling: the tensors (a linear layer's input, weight or output
  // gradient) whose amax history and scale this rank keeps.
  [[nodiscard]] std::size_t fp8_tensors() const { return fp8_slot_.size(); }

 protected:
  Shard(Device& dev, const scenario::Scenario& s, int rank);

  // A block of rows of a tensor: `rows` x `cols` values at local[offset], row stride
  // local_stride, coming from full[full_offset] with row stride full_stride.
  struct Piece {
    std::size_t local = 0, local_stride = 0, full = 0, full_stride = 0, rows = 0, cols = 0;
    bool canonical = true;  // this rank reports it (replicas report once)
    bool unique = true;     // among the model-parallel ranks (tp, pp), this rank holds it alone or first
  };
  // An expert's tensor (expert parallelism) has one holder in each ep group: the first
  // group's reports it.
  void add_piece(std::size_t local, std::size_t local_stride, std::size_t from, std::size_t from_stride,
                 std::size_t rows, std::size_t cols, bool canonical, bool expert = false) {
    const bool first = expert ? expert_index_ == 0 : grad_index_ == 0;
    pieces_.push_back({local, local_stride, from, from_stride, rows, cols, canonical && first, canonical});
  }
  // Allocates param_count_ parameters and gradients, fills the parameters through pieces_
  // with `value(i)`, the full model's parameter i (on several threads for a large shard,
  // one upload), and the 16-bit copy under mixed precision.
  void init_parameters(const std::function<float(std::size_t)>& value);
  void init_parameters(std::span<const float> full) {
    init_parameters([full](std::size_t i) { return full[i]; });
  }
  virtual void load_batch(std::int64_t step) = 0;

  // The compute weights at `offset`: the fp32 parameters, or under 16-bit storage the
  // 16-bit copy's values, unpacked a layer slot at a time (weight_range()).
  float* w(std::size_t offset) const { return half_weights_ ? unpacked_weights(offset) : weights_->f() + offset; }
  float* g(std::size_t offset) const { return grads_.f() + offset; }
  Buffer& need(Buffer& b, std::size_t floats);
  // At least `floats` (a new buffer when b is smaller): for sizes that vary, as the rows
  // routed to a rank's experts do.
  Buffer& fit(Buffer& b, std::size_t floats);
  // Rounds to the stored type (bf16 / fp16; bf16 under fp8).
  void round(float* p, std::size_t n);
  // fp8: a linear layer's GEMM operand (rows x cols, contiguous) as Transformer Engine feeds
  // it (E5M2 for a gradient), in scratch `slot` (0 or 1: the GEMM's first or second
  // operand); other precisions: x itself. `linear`: the layer's weight (its offset), which
  // with the operand's role (its input, its weight, the gradient of its output) names the
  // tensor whose scale delayed scaling keeps.
  const float* fp8_in(const float* x, int rows, int cols, bool gradient, int slot, std::size_t linear);
  // Where micro-batch mb's `rows` per-token (per-sample) losses go on the device. They stay
  // there until end_step() reads the whole step's at once and sums them in the order they
  // were written, so the host never waits for a micro-batch's loss (as Megatron keeps its
  // losses on the GPU until the step's end). `counted`: whether this rank's losses count
  // (the LM head's tp rank 0 of the last stage; the others write and are not read).
  float* loss_rows(int mb, std::size_t rows, bool counted);
  // The factor of the loss gradient: the loss scale over the step's tokens (samples).
  [[nodiscard]] float loss_gradient_scale(double count) const { return static_cast<float>(loss_scale_ / count); }

  Device& dev_;
  scenario::Dtype precision_;
  scenario::Dtype storage_;  // what tensors are stored in: the precision, or bf16 under fp8
  // dp_: the ranks whose gradients are summed (dp x cp), grad_index_ this rank's place among
  // them; dp_index_: its data-parallel replica (which samples it trains on).
  int dp_ = 1, grad_index_ = 0, dp_index_ = 0, stage_ = 0, pp_ = 1;
  int shard_ = 1, shard_index_ = 0;  // ZeRO's shard group (plan.shard_group; dp x cp without one)
  // Expert parallelism: this rank's place in its ep group (which experts it holds), and the
  // group of ranks holding the same experts (dp x cp / ep) and its place there.
  int ep_ = 1, ep_index_ = 0, expert_group_ = 1, expert_index_ = 0;
  int micro_batches_ = 1, b_ = 1;
  bool first_stage_ = false, last_stage_ = false;
  scenario::Recompute recompute_ = scenario::Recompute::none;
  int zero_ = 0;
  std::uint64_t seed_ = 0;
  int global_batch_ = 1;
  double lr_ = 1e-3;
  std::vector<int> layers_held_;  // the layers of this rank's chunks, ascending
  int model_layers_ = 0;

  std::int64_t param_count_ = 0, full_count_ = 0;
  Buffer params_, grads_;
  const Buffer* weights_ = nullptr;         // params_, or rounded_ under mixed precision
  std::map<int, std::size_t> slot_offset_;  // first offset of each layer slot (-1 .. L)
  // Expert parallelism: the experts' region, [expert_begin_, param_count_), by layer slot.
  std::map<int, std::size_t> expert_slot_offset_;
  std::size_t expert_begin_ = 0;
  [[nodiscard]] std::size_t dense_end() const {
    return expert_slot_offset_.empty() ? static_cast<std::size_t>(param_count_) : expert_begin_;
  }
  std::vector<Piece> pieces_;
  double loss_sum_ = 0.0, loss_tokens_ = 0.0;
  std::vector<double> expert_rows_;

 private:
  void refresh_weights(std::size_t begin, std::size_t end);
  std::pair<std::size_t, std::size_t> bucket_range(int lowest_layer, bool experts) const;

  Buffer step_losses_;  // micro-batches x loss_stride_ floats, for the run
  std::size_t loss_stride_ = 0;
  std::vector<std::pair<int, std::size_t>> losses_written_;  // counted (micro-batch, rows), in order
  std::vector<float> losses_host_;

  // Under 16-bit storage the compute weights are rounded_, two bytes each, which w()
  // serves from an fp32 copy of the two layer slots used last (a slot's range: from its
  // first offset to the next slot's, dense and expert regions alike). An op touches at
  // most two slots at once (the LM head: its norm and the tied embedding). The copies go
  // stale when refresh_weights() writes their range.
  float* unpacked_weights(std::size_t offset) const;
  [[nodiscard]] std::pair<std::size_t, std::size_t> weight_range(std::size_t offset) const;
  bool half_weights_ = false;
  struct Unpacked {
    std::size_t begin = 0, end = 0;  // empty: none
    Buffer data;
    std::uint64_t used = 0;
  };
  mutable std::array<Unpacked, 2> unpacked_;
  mutable std::uint64_t uses_ = 0;
  mutable std::vector<std::size_t> range_starts_;  // built at the first use

  Buffer adam_m_, adam_v_, rounded_;
  bool eight_bit_ = false;  // training.optimizer adamw8bit: adam_m_, adam_v_ hold a byte per value
  Buffer m_max_, v_max_;    // and these their blocks' maxima
  Buffer fp8_scratch_[2];
  // fp8 delayed scaling (training.fp8_recipe: delayed, Transformer Engine's DelayedScaling
  // with its defaults: a history of 1,024 amaxes, the scale from their maximum, margin 0):
  // per tensor, its slot in fp8_amax_ (this step's amax, on the device), its amax history
  // and its scale (1 until a step has recorded one). The scales change after each step
  // (update_fp8_scales), from the amaxes of the steps before.
  void update_fp8_scales();
  bool fp8_delayed_ = false;
  std::map<std::pair<std::size_t, int>, std::size_t> fp8_slot_;  // (linear, role) -> slot
  Buffer fp8_amax_;
  static constexpr std::size_t fp8_history_length = 1024;
  std::vector<std::vector<float>> fp8_history_;
  std::vector<float> fp8_scale_;
  std::vector<int> bucket_lows_, expert_lows_;              // this rank's dp buckets, highest first
  std::vector<std::pair<std::size_t, std::size_t>> owned_;  // ZeRO: ranges this rank updates
  int step_ = 0;
  scenario::TrainingSpec training_;
  // The global gradient norm: the local ranges whose squares this rank adds (its owned
  // gradients, each value counted on one rank of the job), built at the first step.
  std::vector<std::pair<std::size_t, std::size_t>> norm_ranges_;
  bool norm_ready_ = false;
  void compute_norm_ranges();
  double grad_norm_ = 0.0, local_norm2_ = 0.0, clip_factor_ = 1.0;
  std::vector<scenario::Injection> injections_;  // this rank's gradient faults (run.inject)
  std::int64_t step_index_ = 0;
  bool injected_ = false;  // this step's fault applied
  bool source_tracked_ = false;
  double source_norm2_ = 0.0;
  void inject(View v);
  double loss_scale_ = 1.0;
  int scale_window_ = 1000, good_steps_ = 0;
  bool last_skipped_ = false;
};

// What the executor runs for the scenario's model, for every output of a run: "GPT
// decoder", or the generic model's GEMM equivalents.
std::string model_description(const scenario::Scenario& s);

// The shard of `rank` for the scenario's model (GptShard or GenericShard).
std::unique_ptr<Shard> make_shard(Device& dev, const scenario::Scenario& s, int rank);

}  // namespace parasim::exec
