// Ring attention (context parallelism, Transformer Engine's algorithm with load-balanced
// causal chunks) on the host: FlashAttention's online softmax over one block of keys at a
// time, so a rank's queries meet every cp rank's keys and values as they travel the ring.
//
// Layouts, per sequence of the micro-batch: qkv [B, Tq, 3, H, D] as the QKV GEMM writes
// this rank's positions; a block of keys and values kv [B, Tk, 2, H, D] (kv_pack); the
// running state acc [B, Tq, H, D] (unnormalised output), m and l [B, H, Tq] (each row's
// running maximum and sum); lse [B, H, Tq]. qpos and kpos give each row's position in the
// whole sequence (the same for every sequence of the micro-batch): a key counts for a
// query when kpos <= qpos (causal).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parasim::exec::ring {

// The positions rank `index` of `cp` holds of a sequence of `t`: chunks index and
// 2·cp-1-index of its 2·cp equal chunks, in that order (t / cp positions).
std::vector<int> positions(int t, int cp, int index);

// kv[r] = the K and V parts of qkv[r] (rows of 3·c values: q, k, v), r < rows.
template <class T>
void kv_pack(T* kv, const T* qkv, std::int64_t rows, int c);
// dqkv[r]'s K and V parts += dkv[r].
template <class T>
void kv_unpack_add(T* dqkv, const T* dkv, std::int64_t rows, int c);

// Starts the state: acc = 0, m = -inf, l = 0.
template <class T>
void forward_begin(T* acc, T* m, T* l, int b, int tq, int h, int d);
// Merges one block of keys and values into the state.
template <class T>
void forward_block(T* acc, T* m, T* l, const T* qkv, const T* kv, std::span<const int> qpos, std::span<const int> kpos,
                   int b, int h, int d);
// out = acc / l, lse = m + log l.
template <class T>
void forward_end(T* out, T* lse, const T* acc, const T* m, const T* l, int b, int tq, int h, int d);

// One block's part of the backward, from the finished output `out`, its gradient `dout`
// and lse: dq (the Q part of dqkv) += its share, dkv (the block's key and value
// gradients) += this rank's queries' share.
template <class T>
void backward_block(T* dqkv, T* dkv, const T* dout, const T* out, const T* qkv, const T* kv, const T* lse,
                    std::span<const int> qpos, std::span<const int> kpos, int b, int h, int d);

}  // namespace parasim::exec::ring
