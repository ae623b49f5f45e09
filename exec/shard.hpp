// One rank's part of the GPT decoder under a plan, on a Device: the layers of its pipeline
// chunks sharded over tensor parallel ranks as Megatron does (QKV and the first MLP GEMM
// split by columns, the attention output and second MLP GEMM by rows, so each half-layer
// ends in a partial sum over tp), the vocabulary slice of the embedding on the first stage
// and of the tied LM head on the last, their gradients and the AdamW state.
//
// The operations are the Program's: the runner calls one method per compute op and asks
// for the buffer of each communication op. A tensor parallel sum closes its half-layer:
// once it completes, tp_finish() applies what follows the sum (bias and residual add
// forward; the layer norm's backward and the residual add backward).
//
// Parameters are initialised from the full model (Gpt<float> with the run's seed) and
// sliced, so every plan starts from the same weights and, step by step, computes the same
// gradients to rounding: the correctness test of every parallel mode.
//
// Mixed precision (bf16 / fp16) is emulated: fp32 master weights and gradients, a copy of
// the weights rounded to 16 bits for compute, activations rounded to 16 bits where they are
// stored, fp32 arithmetic inside kernels (as tensor cores accumulate in fp32).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "exec/device.hpp"
#include "exec/model/gpt.hpp"
#include "plan/program.hpp"

namespace parasim::exec {

// Why the executor cannot run this scenario, or "" when it can.
std::string unsupported_reason(const plan::Scenario& s);

class GptShard {
 public:
  struct View {
    float* data = nullptr;
    std::int64_t count = 0;
  };

  GptShard(Device& dev, const plan::Scenario& s, int rank);
  // The lowest layer of each of this rank's data-parallel buckets (the Program's dp
  // collectives); allocates the optimizer state, which ZeRO-1 shards by bucket. Call once.
  void set_buckets(std::vector<int> lowest_layers);

  // Zeroes gradients and loads the step's tokens (the synthetic batch of `step`).
  void begin_step(std::int64_t step);

  // --- compute ops ---------------------------------------------------------------------------
  void embedding_forward(int mb);
  void embedding_backward(int mb);
  // part: layer (a whole layer, tp = 1), layer_attention or layer_mlp (tp > 1).
  void layer_forward(int layer, int mb, plan::ComputeWhat part, bool recompute);
  void layer_backward(int layer, int mb, plan::ComputeWhat part);
  void recompute_attention_core(int layer, int mb);
  void head_forward(int mb);
  void head_backward(int mb);
  void optimizer_step();

  // --- communication buffers ------------------------------------------------------------------
  // A tensor parallel collective following compute op `after`: its buffer, and what to do
  // once it completes.
  View tp_buffer(const plan::Op& after);
  void tp_finish(const plan::Op& after);
  // The residual stream entering layer `boundary` (activations), or its gradient.
  View boundary(int boundary, int mb, bool gradient);
  void release_boundary(int boundary, int mb, bool gradient);
  // Data-parallel buckets, named by their lowest layer (-1: the embedding): the gradients
  // (all-reduce, reduce-scatter) or the master parameters (ZeRO-1 all-gather) they cover.
  View bucket(int lowest_layer, bool params);
  [[nodiscard]] std::vector<std::int64_t> bucket_parts(int lowest_layer) const;
  void bucket_gathered(int lowest_layer);
  // The tied embedding's gradient (first stage: the embedding, last stage: the head copy).
  View tied_embedding_grads();

  // --- results -----------------------------------------------------------------------------------
  // Sum of per-token losses and token count this rank computed in the step (tp index 0 of
  // the last stage only).
  [[nodiscard]] double loss_sum() const { return loss_sum_; }
  [[nodiscard]] double loss_tokens() const { return loss_tokens_; }
  [[nodiscard]] std::int64_t param_count() const { return param_count_; }
  // Adds this rank's canonical share of the parameters or gradients into a buffer in the
  // full model's layout (Gpt<float>): each value has exactly one owner over the job, so a
  // sum over ranks rebuilds the full tensor.
  void add_to_full(std::span<float> full, bool grads) const;
  [[nodiscard]] std::int64_t full_param_count() const { return full_count_; }

 private:
  // A block of rows of a tensor: `rows` x `cols` values at local[offset], row stride
  // local_stride, coming from full[full_offset] with row stride full_stride.
  struct Piece {
    std::size_t local = 0, local_stride = 0, full = 0, full_stride = 0, rows = 0, cols = 0;
    bool canonical = true;  // this rank reports it (replicas report once)
  };
  using LayerParams = LayerOffsets;  // offsets in the rank's flat buffers
  struct Acts {
    Buffer x, ln1, mean1, rstd1, qkv, att, atty, part, x1, ln2, mean2, rstd2, fch, fcg, dx1;
    Buffer lnf, meanf, rstdf, logits, stats;  // the head's (layer index L)
  };

  float* w(std::size_t offset) const { return weights_->f() + offset; }
  float* g(std::size_t offset) const { return grads_.f() + offset; }
  Buffer& need(Buffer& b, std::size_t floats);
  Acts& acts(int layer, int mb);
  void round(float* p, std::size_t n);
  void attention_core_forward(Acts& a);
  void finish_attention_forward(int layer, int mb);
  void finish_mlp_forward(int layer, int mb, bool recompute);
  void finish_mlp_backward(int layer, int mb);
  void finish_attention_backward(int layer, int mb);
  void finish_head_backward(int mb);
  void refresh_weights(std::size_t begin, std::size_t end);
  std::pair<std::size_t, std::size_t> bucket_range(int lowest_layer) const;

  Device& dev_;
  plan::Dtype precision_;
  int tp_ = 1, tp_index_ = 0, dp_ = 1, dp_index_ = 0, stage_ = 0, pp_ = 1;
  int micro_batches_ = 1, b_ = 1, t_ = 1, h_ = 1, heads_ = 1, d_ = 1, vocab_ = 1, layers_ = 0;
  int cl_ = 1, fl_ = 1, vl_ = 1, v0_ = 0;  // local widths: heads x d, MLP, vocabulary slice
  int n_ = 1;                              // token rows per micro-batch
  bool first_stage_ = false, last_stage_ = false;
  plan::Recompute recompute_ = plan::Recompute::none;
  int zero_ = 0;
  std::uint64_t seed_ = 0;
  int global_batch_ = 1;
  double lr_ = 1e-3;

  std::int64_t param_count_ = 0, full_count_ = 0;
  Buffer params_, grads_, adam_m_, adam_v_, rounded_;
  const Buffer* weights_ = nullptr;  // params_, or rounded_ under mixed precision
  std::map<int, LayerParams> layer_params_;
  std::map<int, std::size_t> slot_offset_;  // first offset of layer slot (-1 .. L)
  std::size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0, head_ = 0;  // head_: the head's wte slice
  std::vector<Piece> pieces_;
  std::vector<int> bucket_lows_;  // this rank's dp buckets, highest first
  std::vector<std::pair<std::size_t, std::size_t>> owned_;  // ZeRO-1: ranges this rank updates
  int step_ = 0;

  std::map<std::pair<int, int>, Acts> acts_;
  std::map<std::pair<int, int>, Buffer> dx_;
  std::vector<Buffer> tokens_, targets_;
  Buffer scratch_a_, scratch_b_, scratch_att_;  // backward temporaries, reused
  double loss_sum_ = 0.0, loss_tokens_ = 0.0;
  std::vector<float> loss_rows_;
};

}  // namespace parasim::exec
