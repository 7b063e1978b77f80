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
// first forward plan is ~9% slower than its second (bench/sdpa_plans.cpp). cuDNN's Stats output is the natural-log LSE of the scaled scores,
// [B, Hq, T, 1] f32: exactly the lse convention of ops.hpp, so it is written straight into lse.
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

  // Why the last rejected shape was rejected ("" if none was).
  const std::string& last_rejection() const { return last_rejection_; }

 private:
  struct Entry;
  using Key = std::tuple<int, int, int, int, int, bool, int>;  // B, T, Hq, Hkv, D, backward, slots (0: dense)
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
