// One rank's part of the GPT decoder under a plan: the layers of its pipeline chunks
// sharded over tensor parallel ranks as Megatron does (QKV and the first MLP GEMM split by
// columns, the attention output and second MLP GEMM by rows, so each half-layer ends in a
// partial sum over tp), the vocabulary slice of the embedding on the first stage and of the
// tied LM head on the last.
//
// A tensor parallel sum closes its half-layer: once it completes, tp_finish() applies what
// follows the sum (bias and residual add forward; the layer norm's backward and the
// residual add backward).
//
// Parameters are initialised from the full model (Gpt<float> with the run's seed) and
// sliced, so every plan starts from the same weights and, step by step, computes the same
// gradients to rounding: the correctness test of every parallel mode.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "exec/model/gpt.hpp"
#include "exec/shard.hpp"

namespace parasim::exec {

class GptShard final : public Shard {
 public:
  GptShard(Device& dev, const scenario::Scenario& s, int rank);

  void embedding_forward(int mb) override;
  void embedding_backward(int mb) override;
  void layer_forward(int layer, int mb, program::ComputeWhat part, bool recompute) override;
  void layer_backward(int layer, int mb, program::ComputeWhat part) override;
  void recompute_attention_core(int layer, int mb) override;
  void layer_piece(const program::Op& op) override;
  void head_forward(int mb) override;
  void head_backward(int mb) override;

  View tp_buffer(const program::Op& collective) override;
  void tp_finish(const program::Op& collective) override;
  View ring_block(const program::Op& transfer) override;
  // The residual stream entering layer `boundary`, or its gradient: what a transfer carries
  // (this rank's 1/tp slice under scatter-gather).
  View boundary(int boundary, int mb, bool gradient) override;
  // All of it, which the scatter-gather's all-gather completes.
  View whole_boundary(int boundary, int mb, bool gradient);
  void release_boundary(int boundary, int mb, bool gradient) override;
  View tied_embedding_grads() override;
  std::vector<float> expert_counts(const program::Op& dispatch) override;
  void expert_counts_received(const program::Op& dispatch, std::span<const float> counts) override;
  Exchange exchange(const program::Op& all_to_all) override;

 private:
  using LayerParams = LayerOffsets;  // offsets in the rank's flat buffers
  struct Acts {
    // x, x1, dx1, mean and rstd hold this rank's rows (all n rows without SP); emb: the
    // embedding's rows before the SP reduce-scatter.
    // att: the t x t probabilities (naive attention); lse: each row's log-sum-exp (flash).
    // rm, rl: ring attention's running maximum and sum of each row (context parallelism).
    Buffer x, ln1, mean1, rstd1, qkv, att, lse, atty, part, x1, ln2, mean2, rstd2, fch, fcg, dx1, emb, rm, rl;
    Buffer lnf, meanf, rstdf, logits, stats;  // the head's (layer index L)
    // Mixture of experts: the router's logits, each copy's row among the expert rows and its
    // gate, and the routed copies' expert inputs, pre-activations, activations and outputs,
    // expert after expert (MoeRoute's order).
    // Under expert parallelism ein and eout are this rank's copies (sent, and their outputs
    // or input gradients received back; backward ein carries the output gradients), and the
    // rows this rank's experts compute (from every ep member) are xin's, epre's and eact's,
    // expert after expert; xpos: where each row received (member after member) goes there.
    Buffer router, epos, egate, ein, epre, eact, eout, xin, xpos;
    // Under 16-bit storage, between a layer's forward and its backward (or recompute) the
    // tensors of stored16 hold their values in two bytes each (pack(); acts() unpacks).
    bool packed = false;
  };
  // What a layer keeps for its backward in the storage type: the input, the layer norms'
  // outputs, Q K V, the attention probabilities (naive) and output, the residual, the MLP's
  // pre-activation and activation. Their values are already rounded to the type, so
  // packing loses nothing. The statistics (mean, rstd, lse) stay fp32, as Megatron keeps
  // them; the experts' buffers stay fp32 too.
  static constexpr Buffer Acts::* stored16[] = {&Acts::x,  &Acts::ln1, &Acts::qkv, &Acts::att, &Acts::atty,
                                                 &Acts::x1, &Acts::ln2, &Acts::fch, &Acts::fcg};
  void pack(Acts& a);
  void unpack(Acts& a);
  bool pack16_ = false;  // storage is bf16 or fp16: activations kept across passes in 16 bits
  // A mixture-of-experts layer's routing of one micro-batch, on the host: per copy (token
  // row i's j-th, i·k + j) its expert and gate; per expert its copies and where its rows
  // start in the expert buffers.
  // Split over ranks (ep or tp > 1) also: per member of the ep group the rows it sends this
  // rank for each expert held (held_ per member; without ep this rank's copies); per block
  // of the rows the experts compute (gpt_moe.cpp) the same; per tp member its rows and
  // where this rank's start among them; per expert held its first row of xin, the rows in
  // all; and the gates' gradients (backward, for the router's).
  struct MoeRoute {
    std::vector<int> expert;
    std::vector<float> gate;
    std::vector<std::vector<int>> copies;
    std::vector<std::size_t> first;
    std::vector<std::int64_t> from_ep, rows, tp_rows;
    std::size_t tp_first = 0;
    std::vector<std::size_t> held_first;
    std::size_t received = 0;
    std::vector<float> dgate;
  };
  // The MLP half as a mixture of experts (gpt_moe.cpp): tp 1 and ep 1 as one op, forward
  // from ln2 into a.part, backward from the output's gradient into a.part (ln2's gradient);
  // under expert parallelism as the Program's pieces around the two all-to-alls
  // (LayerPiece::prepare, experts, finish).
  void moe_forward(int layer, int mb);
  void moe_backward(int layer, int mb, const float* dy);
  void moe_piece(const program::Op& op);
  // The rows the experts compute arrive in blocks of `rows` (per block, per expert held):
  // where each goes in expert order (a.xpos) and where each expert's start.
  void set_rows(int layer, int mb, std::vector<std::int64_t> rows);
  // Their parts: the router's GEMM and the routing (into routes_ and a.epos, a.egate);
  // held expert j's MLP over m rows; its backward from the output gradient d (scratch:
  // 2·m·width floats), writing the input's gradient din; the gates' gradients; the router's
  // backward (adding its share of ln2's gradient into a.part).
  void route(int layer, int mb);
  void expert_forward(int layer, int j, int m, const float* in, float* pre, float* act, float* out);
  void expert_backward(int layer, int j, int m, const float* d, const float* in, const float* pre, const float* act,
                       float* scratch, float* din);
  std::vector<float> gate_gradients(const Acts& a, const MoeRoute& r, const float* dy);
  void router_backward(int layer, int mb, const std::vector<float>& dgate);
  struct ExpertOffsets {
    std::size_t fcw, fcb, projw, projb;
  };
  [[nodiscard]] ExpertOffsets expert(int layer, int j) const;  // of held expert j
  bool moe_ = false;
  int experts_ = 0, top_k_ = 0, held_ = 0;
  std::map<std::pair<int, int>, MoeRoute> routes_;
  // Scratch: copies x hidden (twice), 2 x copies x width, rows x experts; under expert
  // parallelism the rows received (member after member) and those sent back.
  Buffer moe_a_, moe_b_, moe_c_, moe_z_, moe_recv_, moe_send_, moe_gather_;

  void load_batch(std::int64_t step) override;
  Acts& acts(int layer, int mb);
  // The attention half's parts around its core, which the whole layer and context
  // parallelism's pieces share: the layer norm and QKV GEMM; the projection (then, with
  // `finish`, what follows its sum); the projection's gradients, writing the core's output
  // gradient datty; the QKV GEMM's gradients from dqkv (then what follows their sum).
  void qkv_forward(int layer, int mb);
  void projection_forward(int layer, int mb, bool finish);
  void projection_backward(int layer, int mb, float* datty);
  void qkv_backward(int layer, int mb, const float* dqkv, bool finish);
  void attention_core_forward(Acts& a);
  // `sum`: this rank's rows of the summed output (a.part's, or under the overlap's pipelined
  // reduce-scatter the rows gathered from its blocks).
  void finish_attention_forward(int layer, int mb, const float* sum);
  void finish_mlp_forward(int layer, int mb, bool recompute, const float* sum);
  void attention_core_backward(Acts& a, const float* datty, float* dqkv);
  void finish_mlp_backward(int layer, int mb);
  void finish_attention_backward(int layer, int mb);
  void finish_head_backward(int mb);
  void finish_embedding_forward(int mb);
  View gather_input(const program::Op& c);
  // Tensor-parallel overlap (gpt_overlap.cpp): the pieces of each half, and the blocks of
  // the forward's pipelined reduce-scatter.
  void prepare_piece(const program::Op& op);
  [[nodiscard]] std::size_t column_row(const program::Op& op) const;
  void attention_piece(const program::Op& op);
  void mlp_piece(const program::Op& op);
  void row_block(const program::Op& op, const float* in, int k, std::size_t weight);
  View block_sum_buffer(const program::Op& c);
  void block_sum_finish(const program::Op& c);
  int splits_ = 1;  // blocks of the forward's pipelined reduce-scatter (workload::overlap_splits)
  // Context parallelism (gpt_context.cpp): the attention half's pieces around the cp ring,
  // the ring's blocks, and the positions this rank holds of each sequence.
  void context_piece(const program::Op& op);
  View context_block(const program::Op& transfer);
  void ring_sent(const program::Op& send) override;
  // Frees a pass's ring blocks now, or once its sends in flight have completed.
  void release_ring(int layer, int mb, program::Category pass);
  void free_ring(int layer, int mb, program::Category pass);
  [[nodiscard]] std::tuple<int, int, int> ring_slot(int layer, int mb, program::Category pass, int slot) const;
  // Adds the position embedding to rows [r0, r0 + rows) of x (x's first row is row r0), and
  // its backward: the gradient of each row's position += dx.
  void add_positions(float* x, int r0, int rows);
  void position_grads(const float* dx);
  [[nodiscard]] int position(int row) const;  // of a local token row
  int cp_ = 1, cp_index_ = 0;
  std::vector<std::vector<int>> positions_;  // per cp rank: its positions of a sequence
  std::map<std::tuple<int, int, int>, Buffer> ring_;  // ring_slot(): a ring block
  std::map<std::tuple<int, int, int>, int> ring_sends_;  // (layer, micro-batch, pass): sends in flight
  std::set<std::tuple<int, int, int>> ring_finished_;    // passes whose finish ran before their sends completed
  View replicated_grads(bool gather);
  // Offset of this rank's first row in an n x h tensor (0 without SP).
  [[nodiscard]] std::size_t own_rows() const { return static_cast<std::size_t>(r0_) * static_cast<std::size_t>(h_); }

  int tp_ = 1, tp_index_ = 0;
  int t_ = 1, h_ = 1, heads_ = 1, d_ = 1, vocab_ = 1, layers_ = 0;
  int tl_ = 1;  // positions of a sequence this rank holds: t / cp
  int cl_ = 1, fl_ = 1, vl_ = 1, v0_ = 0;  // local widths: heads x d, MLP, vocabulary slice
  int n_ = 1;                              // token rows per micro-batch
  bool sp_ = false;                        // sequence parallel (tp > 1)
  bool flash_ = false;                     // training.attention: flash (the fused kernel)
  bool scatter_ = false;                   // pipeline transfers split over tp (scatter-gather)
  int ns_ = 1, r0_ = 0;                    // this rank's rows: [r0_, r0_ + ns_)

  std::map<int, LayerParams> layer_params_;
  std::size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0, head_ = 0;  // head_: the head's wte slice

  std::map<std::pair<int, int>, Acts> acts_;
  std::map<std::pair<int, int>, Buffer> dx_;
  std::vector<Buffer> tokens_, targets_;
  Buffer scratch_a_, scratch_b_, scratch_att_;  // backward temporaries, reused
  Buffer dfull_;       // SP backward: the gathered gradient the next compute op consumes
  Buffer replicated_;  // SP: the gradients summed over tp once a step
  Buffer summed_;      // overlap: this rank's rows of a pipelined reduce-scatter's sum
};

}  // namespace parasim::exec
