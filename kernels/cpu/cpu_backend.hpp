// The CPU reference backend: fp32 activations and math, OpenBLAS GEMMs, deterministic results
// (every reduction runs in a fixed order, independent of the thread count). It is the twin every
// CUDA op is tested against and the backend of CPU-only training runs.
//
// The method bodies live in one file per op family (linear.cpp, norms.cpp, attention.cpp, ...).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/ops.hpp"

namespace recipe::kernels {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& opts);
  ~CpuBackend() override;

  Device device() const override { return Device::cpu; }
  DType act_dtype() const override { return DType::f32; }
  std::string name() const override { return "cpu"; }
  // Threads used by the non-BLAS loops (attention): cpu_threads, or the hardware count if 0.
  int threads() const { return threads_; }
  AttentionPlan prepare_attention(const AttentionShape&) override { return {.path = "cpu", .workspace_bytes = 0}; }
  KernelPaths kernel_paths() const override { return {.attention = "cpu", .gemm = "openblas"}; }

  // memory.cpp
  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void copy(Tensor dst, Tensor src) override;
  void to_host(void* dst, Tensor src) override;
  void from_host(Tensor dst, const void* src) override;
  void zero(Tensor t) override;
  void cast(Tensor dst, Tensor src) override;
  void synchronize() override {}
  size_t peak_memory_bytes() const override;

  // linear.cpp
  void linear_fwd(const LinearFwdArgs& args) override;
  void linear_bwd(const LinearBwdArgs& args) override;

  // fp8.cpp (emulated: FP8 operands decoded to f32, then the f32 linear ops)
  void fp8_amax(Tensor amax, Tensor x) override;
  void fp8_quantize(const Fp8QuantizeArgs& args) override;
  void fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs& args) override;
  void fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs& args) override;
  void fp8_amax_history(const Fp8AmaxHistoryArgs& args) override;
  void fp8_transpose(Tensor out, Tensor inp) override;
  void fp8_linear_fwd(const Fp8LinearFwdArgs& args) override;
  void fp8_linear_bwd(const Fp8LinearBwdArgs& args) override;

  // embedding.cpp
  void embedding_fwd(const EmbeddingFwdArgs& args) override;
  void embedding_bwd(const EmbeddingBwdArgs& args) override;

  // norms.cpp
  void layernorm_fwd(const LayerNormFwdArgs& args) override;
  void layernorm_bwd(const LayerNormBwdArgs& args) override;
  void rmsnorm_fwd(const RmsNormFwdArgs& args) override;
  void rmsnorm_bwd(const RmsNormBwdArgs& args) override;
  void qk_norm_fwd(const QkNormFwdArgs& args) override;
  void qk_norm_bwd(const QkNormBwdArgs& args) override;

  // elementwise.cpp
  void add(Tensor out, Tensor a, Tensor b) override;
  void gelu_fwd(Tensor out, Tensor inp) override;
  void gelu_bwd(Tensor dinp, Tensor dout, Tensor inp) override;
  void swiglu_fwd(Tensor out, Tensor gate_up) override;
  void swiglu_bwd(Tensor dgate_up, Tensor dout, Tensor gate_up) override;

  // rope.cpp
  void rope_fwd(const RopeArgs& a) override;
  void rope_bwd(const RopeArgs& a) override;

  // dropout.cpp
  void dropout(const DropoutArgs& a) override;

  // attention.cpp
  void attention_fwd(const AttentionFwdArgs& args) override;
  void attention_bwd(const AttentionBwdArgs& args) override;
  // attention_block.cpp (ring attention)
  void attention_block_fwd(const AttentionBlockFwdArgs& args) override;
  void attention_block_bwd(const AttentionBlockBwdArgs& args) override;
  AttentionPlan prepare_attention_blocks(const AttentionShape&, const std::vector<AttentionBlockShape>&) override {
    return {.path = "cpu", .workspace_bytes = 0};
  }

  // kv_cache.cpp
  void kv_cache_append(const KvCacheAppendArgs& args) override;
  void kv_attention(const KvAttentionArgs& args) override;

  // loss.cpp
  void cross_entropy(Tensor losses, Tensor logits, Tensor targets, int vocab, Tensor dloss, bool compute_grad) override;

  // vocab_parallel_ce.cpp
  void vocab_parallel_ce_max(Tensor rowmax, Tensor logits, int valid_cols) override;
  void vocab_parallel_ce_sums(const VocabParallelCeSumsArgs& args) override;
  void vocab_parallel_ce_finish(const VocabParallelCeFinishArgs& args) override;

  // adamw.cpp
  void adamw(Tensor master, Tensor grad, Tensor m, Tensor v, Tensor compute_copy, const AdamWArgs& args) override;
  double sum_squares(Tensor x) override;
  void scale(Tensor x, float s) override;

 private:
  int threads_ = 1;
  mutable std::mutex mem_mutex_;
  std::unordered_map<void*, size_t> live_;  // allocation → bytes
  size_t live_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace recipe::kernels
