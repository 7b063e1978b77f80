// The CUDA implementation of the op interface (kernels/ops.hpp). Activations and compute weights
// are bf16; parameter gradients, master weights, Adam moments, norm statistics and losses f32.
// The backend owns one CUDA stream (every op is enqueued on it, in order), a cuBLASLt workspace
// and a general workspace (scratch for reductions, radix sort, cuDNN), all allocated in the
// constructor: ops never allocate. Workspace size, attention choice and GEMM tuning come from
// BackendOptions (filled from the plan's `kernels` section; the non-default paths are for A/B timing).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/grad_write_tracker.hpp"
#include "kernels/ops.hpp"

namespace recipe::kernels::cuda {

class CublasLtLinear;
class CudnnAttention;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& opts);
  ~CudaBackend() override;

  // The stream every op runs on (for CUDA-graph capture by the trainer).
  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }
  // True when attention runs through cuDNN (compiled in, not disabled); shapes cuDNN rejects
  // still take the own kernels.
  bool cudnn_attention_enabled() const { return attention_ != nullptr; }
  // How many attention calls ran through cuDNN and through the own kernels.
  int64_t cudnn_attention_calls() const { return cudnn_calls_; }
  int64_t fallback_attention_calls() const { return fallback_calls_; }
  // Linear calls whose epilogue ran fused in cuBLASLt vs. as GEMM + separate kernel.
  int64_t fused_epilogue_calls() const;
  int64_t unfused_epilogue_calls() const;
  // GEMM keys whose algorithm was chosen by timing (not in deterministic mode), and of those the
  // keys where a candidate beat the heuristic's first choice.
  int64_t tuned_gemm_keys() const;
  int64_t tuned_gemm_keys_changed() const;
  // gelu_rebuild_linear_bwd calls that ran the fused sm_90a kernel.
  int64_t fused_mlp_backward_calls() const { return fused_mlp_backward_calls_; }
  // The device's compute capability as major·10 + minor (90 for an H100), asked once at start.
  int compute_capability() const { return compute_capability_; }
  // True when the Hopper-only kernels may run: this build holds sm_90a machine code, the device is
  // compute capability 9.0 and BackendOptions::portable_kernels is off. Otherwise every op takes
  // the kernels all GPUs from compute capability 8.0 run.
  bool hopper_kernels() const { return hopper_kernels_; }
  // True when this build holds sm_90a machine code (RECIPE_CUDA_ARCHITECTURES names 90a).
  static bool sm90a_built();

  Device device() const override { return Device::cuda; }
  DType act_dtype() const override { return DType::bf16; }
  std::string name() const override;

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void copy(Tensor dst, Tensor src) override;
  void to_host(void* dst, Tensor src) override;
  void from_host(Tensor dst, const void* src) override;
  void zero(Tensor t) override;
  void cast(Tensor dst, Tensor src) override;
  void synchronize() override;
  size_t peak_memory_bytes() const override { return peak_bytes_; }

  void linear_fwd(const LinearFwdArgs& args) override;
  void linear_bwd(const LinearBwdArgs& args) override;
  void gelu_rebuild_linear_bwd(const GeluRebuildLinearBwdArgs& args) override;

  // fp8_backend.cpp
  void fp8_amax(Tensor amax, Tensor x) override;
  void fp8_quantize(const Fp8QuantizeArgs& args) override;
  void fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs& args) override;
  void fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs& args) override;
  void fp8_amax_history(const Fp8AmaxHistoryArgs& args) override;
  void fp8_transpose(Tensor out, Tensor inp) override;
  void fp8_linear_fwd(const Fp8LinearFwdArgs& args) override;
  void fp8_linear_bwd(const Fp8LinearBwdArgs& args) override;

  void embedding_fwd(const EmbeddingFwdArgs& args) override;
  void embedding_bwd(const EmbeddingBwdArgs& args) override;

  void layernorm_fwd(const LayerNormFwdArgs& args) override;
  void layernorm_bwd(const LayerNormBwdArgs& args) override;
  void rmsnorm_fwd(const RmsNormFwdArgs& args) override;
  void rmsnorm_bwd(const RmsNormBwdArgs& args) override;
  void qk_norm_fwd(const QkNormFwdArgs& args) override;
  void qk_norm_bwd(const QkNormBwdArgs& args) override;
  void residual_norm_fwd(const ResidualNormFwdArgs& args) override;

  void add(Tensor out, Tensor a, Tensor b) override;
  void gelu_fwd(Tensor out, Tensor inp) override;
  void gelu_bwd(Tensor dinp, Tensor dout, Tensor inp) override;
  void swiglu_fwd(Tensor out, Tensor gate_up) override;
  void swiglu_bwd(Tensor dgate_up, Tensor dout, Tensor gate_up) override;
  void swiglu_bwd_rebuild(const SwigluBwdRebuildArgs& args) override;
  void rope_fwd(const RopeArgs& a) override;
  void rope_bwd(const RopeArgs& a) override;
  void dropout(const DropoutArgs& a) override;

  void attention_fwd(const AttentionFwdArgs& args) override;
  void attention_bwd(const AttentionBwdArgs& args) override;
  // kv_cache.cu
  void kv_cache_append(const KvCacheAppendArgs& args) override;
  void kv_attention(const KvAttentionArgs& args) override;
  AttentionPlan prepare_attention(const AttentionShape& shape) override;
  // attention_block_backend.cpp: ring attention's blocks through cuDNN (no own-kernel path).
  void attention_block_fwd(const AttentionBlockFwdArgs& args) override;
  void attention_block_bwd(const AttentionBlockBwdArgs& args) override;
  AttentionPlan prepare_attention_blocks(const AttentionShape& shape,
                                         const std::vector<AttentionBlockShape>& blocks) override;
  KernelPaths kernel_paths() const override;

  void cross_entropy(Tensor losses, Tensor logits, Tensor targets, int vocab, Tensor dloss, bool compute_grad) override;

  // vocab_parallel_ce.cu
  void vocab_parallel_ce_max(Tensor rowmax, Tensor logits, int valid_cols) override;
  void vocab_parallel_ce_sums(const VocabParallelCeSumsArgs& args) override;
  void vocab_parallel_ce_finish(const VocabParallelCeFinishArgs& args) override;

  void adamw(Tensor master, Tensor grad, Tensor m, Tensor v, Tensor compute_copy, const AdamWArgs& args) override;
  double sum_squares(Tensor x) override;
  void grad_norm_clip(Tensor out, Tensor grads, float clip, Tensor losses, double loss_sum_limit) override;
  void norm_loss_sums(Tensor sums, const std::vector<Tensor>& grads, Tensor losses) override;
  void clip_from_sums(Tensor out, Tensor sums, float clip, double loss_sum_limit) override;
  void scale(Tensor x, float s) override;

  // No per-step memset: each gradient's first write overwrites (GradWriteTracker).
  void begin_grad_writes(const std::vector<Tensor>& grads) override;
  void end_grad_writes() override;

  // cuda_graph.cpp: page-locked staging, async uploads and stream capture into a CUDA graph.
  void* alloc_host(size_t bytes) override;
  void free_host(void* p) override;
  void from_host_async(Tensor dst, const void* src) override;
  std::unique_ptr<RecordedWork> record(const std::function<void()>& body, std::string& why) override;
  bool recording() const { return recording_; }

 private:
  // Ops that allocate or wait for the host throw (naming `op`) while a step is being recorded.
  void refuse_while_recording(const char* op) const;
  Workspace workspace() const { return Workspace{workspace_, workspace_bytes_, 0}; }
  void* device_alloc(size_t bytes, const char* what);
  // Replaces the workspace by one of at least `need` bytes (prepare_* only, outside recording),
  // with a notice naming `what` and kernels.workspace_mb.
  void grow_workspace(size_t need, const std::string& what);
  void note_attention_fallback(const std::string& shape, const std::string& why);
  void note_packed_attention(const std::string& why);
  PackedSegments packed_segments_in(Workspace& ws, const int32_t* pos, const AttentionShape& a);
  std::string ragged_refusal(const AttentionShape& a) const;
  // The device pointer of optional per-sample positions i32 [B·T] (checked), nullptr if undefined.
  const int32_t* positions_of(const char* op, const Tensor& positions, int B, int T);
  void rope(const RopeArgs& a, bool backward);
  NormGradOverwrite norm_grad_writes(int64_t N, Tensor dweight, Tensor dbias, Tensor dinp_sum);

  int device_ = 0;
  bool deterministic_ = false;
  bool recording_ = false;
  bool memset_grads_ = false;
  int compute_capability_ = 0;
  bool hopper_kernels_ = false;
  bool fused_mlp_ = true;  // BackendOptions::fused_mlp, and only with hopper_kernels_
  int64_t fused_mlp_backward_calls_ = 0;
  cudaStream_t stream_ = nullptr;
  void* cublas_workspace_ = nullptr;
  size_t cublas_workspace_bytes_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  unsigned* column_sum_tickets_ = nullptr;
  std::unique_ptr<CublasLtLinear> linear_;
  // Zeroes in stream order, so a memset it asks for lands before the op that asked.
  GradWriteTracker grad_writes_{
      [this](void* p, size_t bytes) { RECIPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_)); }};
  struct RopeTable {
    void* ptr = nullptr;  // (cos, sin) f32 pairs [rows, D/2]: positions 0 .. rows − 1
    int rows = 0, D = 0;
    const double* inv_freq = nullptr;  // the RopeArgs::inv_freq it was made from; null: none (stale)
  } rope_table_;
  // [p, p + bytes) was freed or rewritten: if it holds rope_table_'s inv_freq, the table is stale.
  void rope_table_written(const void* p, size_t bytes);
  std::unique_ptr<CudnnAttention> attention_;
  int64_t cudnn_calls_ = 0, fallback_calls_ = 0;
  std::set<std::string> reported_fallbacks_;

  std::unordered_map<void*, size_t> allocations_;
  size_t current_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace recipe::kernels::cuda
