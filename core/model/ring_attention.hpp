// Context parallelism's pieces of the model: the load-balanced causal chunking of a sample over
// the CP ranks, and ring attention over it.
//
// Chunking (Megatron's): a sample of S tokens is cut into 2·cp chunks of c = S / (2·cp) tokens;
// CP rank r holds chunks r and 2·cp − 1 − r, back to back, as its local sequence of T = 2c rows
// (local row t < c is global position r·c + t; row c + t is (2·cp − 1 − r)·c + t). Every rank
// thus holds an early and a late chunk and has the same causal work. Everything token-wise (embedding,
// norms, MLP, loss) runs on the T local rows; RoPE and learned positions use the global positions.
//
// Ring attention: every rank's K/V (its packed qkv, [B, T, (Hq + 2·Hkv)·D]) travels around the CP
// ring (rank r sends to r + 1, receives from r − 1), so at step i rank r holds the K/V of rank
// s = r − i (mod cp). Its queries attend each arriving block (kernels::attention_block_fwd) and
// merge the partial results by log-sum-exp. The block of step i (ring_block):
//   i = 0  (s = r): all queries × all local keys, causal (the local order is the global order);
//   s < r: all queries × chunk s (the first half of the keys), no mask: chunk s is in the past of
//          both local chunks, chunk 2cp−1−s in the future of both;
//   s > r: the late local chunk (the second half of the queries) × all keys, no mask: both of s's
//          chunks lie between the two local chunks.
// The backward circulates K/V again, recomputes each block from the final out and lse
// (attention_block_bwd), adds dq locally and accumulates dK/dV into a buffer that travels with the
// K/V; after the last block one more hop brings every rank's dK/dV home.
#pragma once

#include <cstdint>
#include <vector>

#include "core/parallel/comm.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

// The global position of local row t (0 ≤ t < T_local) on CP rank `rank` of `cp`.
inline int64_t cp_global_position(int cp, int rank, int t, int T_local) {
  const int c = T_local / 2;
  return t < c ? int64_t(rank) * c + t : int64_t(2 * cp - 1 - rank) * c + (t - c);
}

// One block of attention: query rows [q_begin, +q_len) of the local qkv against key rows
// [k_begin, +k_len) of the block that arrived at ring step `step` (see above).
struct RingBlock {
  int q_begin = 0, q_len = 0, k_begin = 0, k_len = 0;
  bool causal = false;
};
RingBlock ring_block(int cp, int rank, int step, int T_local);

class RingAttention {
 public:
  // `shape`: the local attention shape (T = seq / cp). Has the backend prepare the blocks this
  // rank will run (Backend::prepare_attention_blocks: a block it cannot run throws here, at
  // start) and allocates the ring's buffers once: two K/V blocks and two dK/dV blocks, each
  // [B, T, (Hq + 2·Hkv)·D] in the backend's act dtype (buffer_bytes).
  RingAttention(kernels::Backend& backend, Comm& cp, const kernels::AttentionShape& shape);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  static size_t buffer_bytes(const kernels::AttentionShape& shape, kernels::DType act);

  // out [B, T, Hq·D], lse [B, Hq, T] of the local queries over the whole sample's keys.
  void forward(kernels::Tensor out, kernels::Tensor lse, kernels::Tensor qkv);
  // dqkv (overwritten, as attention_bwd) from dout and the forward's qkv, out and lse.
  void backward(kernels::Tensor dqkv, kernels::Tensor dout, kernels::Tensor qkv, kernels::Tensor out,
                kernels::Tensor lse);

 private:
  kernels::Backend& be_;
  Comm& cp_;
  kernels::AttentionShape shape_;
  void* buf_ = nullptr;
  kernels::Tensor kv_[2], dkv_[2];
};

}  // namespace recipe::core
