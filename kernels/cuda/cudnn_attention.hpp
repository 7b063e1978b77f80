// Causal GQA attention through cuDNN's fused SDPA (cudnn-frontend graphs), reading q, k and v as
// strided views of the packed qkv buffer [B, T, (Hq + 2·Hkv)·D] and writing dq/dk/dv into the same
// layout. Rows of packed samples (data.pack) run as ragged graphs: each sample is one batch entry
// whose tokens start at an element offset (packed_segments), so no attention crosses a sample and
// no work is spent on the masked blocks between samples. Their Stats are token-major [B·T, Hq]
// (cuDNN sizes the backward's ragged softmax-sum workspace from the token count and these strides);
// the backend converts to and from the [B, Hq, T] lse of ops.hpp (lse_to_tokens / lse_from_tokens). One forward and one backward graph per shape, built on first use and cached; a shape
// cuDNN rejects (or whose workspace does not fit the backend's) is remembered, and the caller
// uses the own kernels. With `tune_plans` (not in deterministic mode) every execution plan cuDNN's
// heuristics offer is built, and the first run of each shape outside CUDA-graph capture times
// those fitting the backend's workspace and keeps the fastest: at head dim 64 on an H100 the heuristic's
// first forward plan is ~9% slower than its second (bench/micro/sdpa_plans.cpp). cuDNN's Stats output is the natural-log LSE of the scaled scores,
// [B, Hq, T, 1] f32: exactly the lse convention of ops.hpp, so it is written straight into lse.
//
// Ring attention's blocks (ops.hpp AttentionBlockFwdArgs, context parallelism) are graphs of their
// own: q_len query rows of one packed qkv against k_len key rows of another (causal on the square
// diagonal block, top-left aligned as cuDNN's causal mask is; otherwise unmasked). Q, K, V, and in
// the backward O and dO, are strided views at the blocks' first rows (16-byte aligned: D % 8 == 0).
// The block's own results are compact buffers the caller merges or accumulates (cuDNN overwrites):
// forward O [B, q_len, Hq·D] bf16 and Stats [B, Hq, q_len] f32; backward reads the FINAL lse rows
// as a compact [B, Hq, q_len] f32 and writes dQ [B, q_len, Hq·D] and dK|dV [B, k_len, 2·Hkv·D]
// (k heads then v heads per row).
#pragma once

#ifdef RECIPE_WITH_CUDNN

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {

class CudnnAttention {
 public:
  CudnnAttention(cudaStream_t stream, bool deterministic, bool tune_plans);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Each returns false, having run nothing, when cuDNN cannot run this shape. `seg` (packed
  // samples, else null): the sample slots of packed_segments, `slots` per row; the graph is then
  // ragged (THD): one batch entry per slot, attention within each sample only.
  bool forward(void* out, float* lse, const void* qkv, int B, int T, int Hq, int Hkv, int D, Workspace ws,
               const PackedSegments* seg = nullptr, int slots = 0);
  bool backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B, int T, int Hq,
                int Hkv, int D, Workspace ws, const PackedSegments* seg = nullptr, int slots = 0);

  // The workspace (bytes) the plan chosen for this shape and direction needs, building its graph
  // if not yet built; -1 when cuDNN cannot run the shape (last_rejection() says why). Plan timing
  // only picks among plans needing no more than this, so it is the most the shape will ask for.
  int64_t workspace_needed(int B, int T, int Hq, int Hkv, int D, bool backward, int slots = 0);

  // One block of ring attention (see above). The pointers are the blocks' first rows: q_rows =
  // qkv + q_begin rows, kv_rows = kv + k_begin rows, out_rows = out + q_begin rows (row strides of
  // the whole [B, T, ...] tensors). Each returns false, having run nothing, when cuDNN cannot run
  // the block or its workspace does not fit `ws`.
  struct Block {
    int B = 0, T = 0, Hq = 0, Hkv = 0, D = 0, q_len = 0, k_len = 0;
    bool causal = false;
  };
  bool block_forward(void* out_blk, float* lse_blk, const void* q_rows, const void* kv_rows, const Block& b,
                     Workspace ws);
  bool block_backward(void* dq_blk, void* dkv_blk, const void* dout_rows, const void* q_rows, const void* kv_rows,
                      const void* out_rows, const float* lse_blk, const Block& b, Workspace ws);
  // As workspace_needed, for one block and direction.
  int64_t block_workspace_needed(const Block& b, bool backward);

  // Why the last rejected shape was rejected ("" if none was).
  const std::string& last_rejection() const { return last_rejection_; }

 private:
  struct Entry;
  // B, T, Hq, Hkv, D, backward, slots (0: dense), then q_len, k_len and the mask: whole-sequence
  // causal (q_len = k_len = T), or a ring block, causal or unmasked.
  enum class Mask { sequence, block_causal, block_full };
  using Key = std::tuple<int, int, int, int, int, bool, int, int, int, Mask>;
  static Key sequence_key(int B, int T, int Hq, int Hkv, int D, bool backward, int slots) {
    return Key{B, T, Hq, Hkv, D, backward, slots, T, T, Mask::sequence};
  }
  static Key block_key(const Block& b, bool backward) {
    return Key{b.B,      b.T, b.Hq,    b.Hkv,   b.D,
               backward, 0,   b.q_len, b.k_len, b.causal ? Mask::block_causal : Mask::block_full};
  }
  Entry& entry(const Key& key);
  static void add_segments(std::unordered_map<int64_t, void*>& pack, const PackedSegments& seg);
  // Runs e's chosen plan (timing the candidates first when due); false when its workspace
  // does not fit `ws`.
  bool execute(Entry& e, std::unordered_map<int64_t, void*>& pack, Workspace ws, const char* what);

  cudaStream_t stream_;
  bool deterministic_;
  bool tune_plans_;
  void* handle_ = nullptr;  // cudnnHandle_t, kept opaque so this header needs no cuDNN include
  std::map<Key, std::unique_ptr<Entry>> cache_;
  std::string last_rejection_;
};

}  // namespace recipe::kernels::cuda

#endif  // RECIPE_WITH_CUDNN
