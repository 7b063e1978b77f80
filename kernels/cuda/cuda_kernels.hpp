// Host-side launchers of the CUDA kernels (defined in the .cu files of this folder). Plain C++
// signatures so the .cpp parts of the backend (cuBLASLt, cuDNN) can call them. bf16 buffers are
// passed as void*; every launcher enqueues on `stream` and never allocates: scratch space comes
// from the backend's workspace, passed as a Workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace recipe::kernels::cuda {

// A slice of the backend's preallocated workspace. take() hands out aligned pieces in order and
// throws when an op asks for more than the workspace holds (the message names the op and sizes).
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
  size_t used = 0;
  void* take(size_t n, const char* what);
};

// ---- fc2 backward with the GELU rebuild fused (gelu_fc2_backward.cu, sm_90a) ----
// dh = (dy·W2) ⊙ gelu'(pre), g = gelu(pre), dbias (=|+=) Σ_rows dh (if dbias is not null), for
// dy [N,C], W2 [C,H], pre/dh/g [N,H], all bf16 row-major. `fits` says whether it can run here:
// compute capability 9.0, N % 128, H % 128 (H ≤ 128·2048), C % 64, 16-byte aligned pointers,
// room in ws for the per-tile dbias partials. The backend asks only with BackendOptions::fused_mlp
// and CudaBackend::hopper_kernels() (a build without sm_90a holds a stub that traps). The launch
// requires it. One launch; calls must not overlap one another (they share the dbias tickets).
bool gelu_fc2_dgrad_fused_fits(const void* dh, const void* g, const void* dy, const void* w2, const void* pre,
                               int64_t N, int64_t C, int64_t H, Workspace ws);
void gelu_fc2_dgrad_fused(void* dh, void* g, float* dbias, bool overwrite_dbias, const void* dy, const void* w2,
                          const void* pre, int64_t N, int64_t C, int64_t H, Workspace ws, cudaStream_t s);

// ---- elementwise (elementwise.cu) ----
void cast_f32_to_bf16(void* out, const float* in, int64_t n, cudaStream_t s);
void cast_bf16_to_f32(float* out, const void* in, int64_t n, cudaStream_t s);
void add_bf16(void* out, const void* a, const void* b, int64_t n, cudaStream_t s);
void add_f32(float* out, const float* a, const float* b, int64_t n, cudaStream_t s);
void scale_f32(float* x, float k, int64_t n, cudaStream_t s);
void scale_bf16(void* x, float k, int64_t n, cudaStream_t s);
void gelu_fwd_bf16(void* out, const void* inp, int64_t n, cudaStream_t s);
// dinp = dout · gelu'(inp); dinp may alias dout (the in-place dGELU fallback).
void gelu_bwd_bf16(void* dinp, const void* dout, const void* inp, int64_t n, cudaStream_t s);
void swiglu_fwd_bf16(void* out, const void* gate_up, int64_t rows, int64_t F, cudaStream_t s);
// dgate_up [rows, 2F] = swiglu_bwd(dout [rows, F], gate_up [rows, 2F]) and, when act is not null,
// act [rows, F] = swiglu_fwd(gate_up) in the same pass (the contract is SwigluBwdRebuildArgs in
// kernels/ops.hpp); each value bitwise what swiglu_fwd_bf16 / the backward alone write.
void swiglu_bwd_bf16(void* dgate_up, void* act, const void* dout, const void* gate_up, int64_t rows, int64_t F,
                     cudaStream_t s);
// Dropout (dropout.cu, the op's contract in ops.hpp: DropoutArgs): out (+)= inp ⊙ keep·keep_scale
// over a [rows, cols] block, f32 or bf16 (bf16_data) row-major, out may alias inp.
struct DropoutMask {
  uint64_t key = 0;
  int64_t first_row = 0, row_stride = 0, first_col = 0;
  uint32_t threshold = 0;  // dropout_threshold(p)
  float keep_scale = 1.f;  // 1/(1 − p), computed on the host as the CPU reference does
  bool accumulate = false;
};
void dropout(void* out, const void* inp, bool bf16_data, int64_t rows, int64_t cols, const DropoutMask& m,
             cudaStream_t s);
// Device counters (zero between launches) that let the last block of a column tile finish a
// one-launch column sum; owned by the backend, allocated and zeroed once at its start.
struct ColumnSumTickets {
  unsigned* ptr = nullptr;
  int64_t count = 0;
};
// dst[C] += Σ_rows src[rows, C] (bf16 src) in one launch, summed in a fixed order (bitwise
// repeatable); partial row sums go to the workspace. Launches on `s` must not overlap one another
// (the tickets are shared). overwrite: dst = Σ instead (a gradient's first write of a step).
void column_sum_accumulate(float* dst, const void* src, int64_t rows, int64_t C, ColumnSumTickets tickets, Workspace ws,
                           cudaStream_t s, bool overwrite = false);

// ---- RoPE (rope.cu): in place on packed qkv [B,T,(Hq+2Hkv)·D]; backward applies the inverse.
// pos (nullable): per-sample positions i32 [B·T] (packed samples, ops.hpp), else t. inv_freq: the
// run's inverse frequencies, f64 [D/2] in device memory (ops.hpp RopeArgs).
void rope_bf16(void* qkv, const int32_t* pos, int B, int T, int Hq, int Hkv, int D, const double* inv_freq,
               bool backward, cudaStream_t s);
// The same from a table of the angles' (cos, sin), f32 pairs [rows, D/2] (positions 0 .. rows − 1)
// filled once from inv_freq by rope_table (rope_table_bytes of device memory); needs rope_table_fits
// (D % 16 == 0, 16-byte aligned qkv). A position outside the table (pos[] ≥ rows: context
// parallelism's whole-sample positions with a short table) gets its angle computed as rope_bf16
// does, from inv_freq. Bitwise equal to rope_bf16, ~4× faster.
size_t rope_table_bytes(int rows, int D);
void rope_table(void* table, int rows, int D, const double* inv_freq, cudaStream_t s);
bool rope_table_fits(const void* qkv, int D);
void rope_bf16_table(void* qkv, const void* table, int rows, const double* inv_freq, const int32_t* pos, int B, int T,
                     int Hq, int Hkv, int D, bool backward, cudaStream_t s);

// ---- qk-norm (qk_norm.cu): per-head RMSNorm of the q and k heads of packed bf16 qkv rows
// [rows, (Hq + 2·Hkv)·D], D ≤ 256 (ops.hpp QkNormFwdArgs / QkNormBwdArgs). out may alias inp,
// dinp may alias dout. dwq/dwk (f32 [D], null: none) are written (overwrite_*) or added to.
void qk_norm_fwd(void* out, const void* inp, const void* wq, const void* wk, int64_t rows, int Hq, int Hkv, int D,
                 float eps, cudaStream_t s);
void qk_norm_bwd(void* dinp, float* dwq, float* dwk, const void* dout, const void* inp, const void* wq, const void* wk,
                 int64_t rows, int Hq, int Hkv, int D, float eps, bool overwrite_q, bool overwrite_k, Workspace ws,
                 cudaStream_t s);
constexpr int kQkNormMaxHeadDim = 256;

// ---- norms (norms.cu) ----
// If res_a/res_b are given: residual = res_a + res_b (written to `inp_or_residual`), then the norm
// of it; otherwise the norm of `inp_or_residual`. mean (LayerNorm only) and rstd may be null.
void layernorm_fwd(void* out, float* mean, float* rstd, void* inp_or_residual, const void* res_a, const void* res_b,
                   const void* weight, const void* bias, int64_t N, int64_t C, float eps, bool rms, cudaStream_t s);
// Which f32 outputs of layernorm_bwd are written (=) rather than accumulated (+=): the first
// write of a parameter gradient in a step (see Backend::begin_grad_writes).
struct NormGradOverwrite {
  bool dweight = false, dbias = false, dinp_sum = false;
};
// dinp += ∂loss/∂inp (bf16 [N, C]: the residual stream's gradient), dweight += Σ_rows dout·x̂,
// dbias += Σ_rows dout, dinp_sum += Σ_rows dinp AFTER the accumulation (the bias gradient of the
// linear whose output was added into this residual; saves a separate column sum). All f32 [C];
// bias/mean null for RMSNorm; dinp/dweight/dbias/dinp_sum may each be null to skip (dinp_sum
// needs dinp). Column sums in a fixed order: bitwise repeatable.
void layernorm_bwd(void* dinp, float* dweight, float* dbias, float* dinp_sum, const void* dout, const void* inp,
                   const void* weight, const float* mean, const float* rstd, int64_t N, int64_t C, bool rms,
                   NormGradOverwrite overwrite, Workspace ws, cudaStream_t s);

// ---- embeddings (embedding.cu) ----
// positions (nullable, i32 [T]): the wpe / dwpe row of sample row t (ops.hpp EmbeddingFwdArgs), else t.
void embedding_fwd(void* out, const int32_t* tokens, const void* wte, int64_t wte_rows, const void* wpe,
                   int64_t wpe_rows, const int32_t* positions, int64_t N, int64_t C, int T, int vocab_start,
                   cudaStream_t s);
void embedding_bwd(float* dwte, int64_t wte_rows, float* dwpe, int64_t wpe_rows, const int32_t* positions,
                   const void* dout, const int32_t* tokens, int64_t N, int64_t C, int T, int vocab_start, Workspace ws,
                   cudaStream_t s);

// ---- loss (cross_entropy.cu) ----
// dloss: f32 [N] per-row weights, read only with compute_grad (may be null without).
void cross_entropy(float* losses, void* logits, const int32_t* targets, int64_t N, int64_t Vp, int vocab,
                   const float* dloss, bool compute_grad, cudaStream_t s);

// ---- optimizer and reductions (optimizer.cu) ----
void adamw(float* master, const float* grad, float* m, float* v, void* compute_copy_bf16, int64_t n, float lr,
           float beta1, float beta2, float eps, float weight_decay, int step, float grad_scale,
           const float* grad_scale_device, const float* schedule_device, cudaStream_t s);
// out[0] = ‖x‖₂, out[1] = clip factor or NaN (skip); see Backend::grad_norm_clip. No host sync.
void grad_norm_clip(float* out, const float* x, int64_t n, const float* losses, int64_t n_losses, float clip,
                    double loss_sum_limit, Workspace ws, cudaStream_t s);
// sums[0] = Σ over the `count` tensors xs[i] (ns[i] f32 each) of Σ x², sums[1] = Σ losses (0 when
// losses is null), both in double in a fixed order; see Backend::norm_loss_sums. No host sync.
void norm_loss_sums(double* sums, const float* const* xs, const int64_t* ns, int count, const float* losses,
                    int64_t n_losses, Workspace ws, cudaStream_t s);
// out[0] = sqrt(sums[0]), out[1] = clip factor or NaN (skip); see Backend::clip_from_sums.
void clip_from_sums(float* out, const double* sums, float clip, double loss_sum_limit, cudaStream_t s);
// Σ x² in double, two passes with fixed order; result copied into *host_result (synchronizes).
double sum_squares(const float* x, int64_t n, Workspace ws, cudaStream_t s);

// ---- packed samples for cuDNN's ragged attention (packed_segments.cu) ----
// Per sample slot (B rows × `slots` each, row-major), from per-sample positions i32 [B·T]: the
// sample's length (0 for the slots after a row's last sample) and the element offsets of its first
// token in qkv [B·T, (Hq+2·Hkv)·D], out [B·T, Hq·D] and a token-major lse [B·T, Hq]. The offset
// arrays hold B·slots + 1 entries, the last one the end of the tensor, as cuDNN's ragged offsets
// do. A row must hold at most `slots` samples (the model checks it on the host; data.max_samples_per_pack).
struct PackedSegments {
  int32_t *seq_len, *qkv_offset, *out_offset, *lse_offset;
};
// Whether the element offsets of this shape fit cuDNN's int32 ragged offsets.
bool packed_segments_fit(int B, int T, int Hq, int Hkv, int D);
void packed_segments(PackedSegments seg, const int32_t* pos, int B, int T, int slots, int Hq, int Hkv, int D,
                     cudaStream_t s);
// lse [B, Hq, T] (ops.hpp) to and from the token-major [B·T, Hq] of the ragged graphs.
void lse_to_tokens(float* tokens, const float* heads, int B, int T, int Hq, cudaStream_t s);
void lse_from_tokens(float* heads, const float* tokens, int B, int T, int Hq, cudaStream_t s);

// ---- ring attention blocks around cuDNN (attention_block.cu) ----
// Merges a block's compact result blk [B, q_len, Hq·D] bf16 and blk_lse [B, Hq, q_len] f32 into
// the query rows [q_begin, q_begin + q_len) of out [B, T, Hq·D] bf16 and lse [B, Hq, T] f32 by
// log-sum-exp (merge = false: copies them in), as ops.hpp AttentionBlockFwdArgs defines.
void attention_block_merge(void* out, float* lse, const void* blk, const float* blk_lse, int B, int T, int Hq, int D,
                           int q_begin, int q_len, bool merge, cudaStream_t s);
// dst[b·dst_batch + r·dst_row + j] += src[b, r, j] (bf16, f32 sum rounded once) for src a compact
// [B, rows, width] bf16 buffer: a block's gradients into rows of a packed dqkv (elements, not bytes).
void add_rows(void* dst, int64_t dst_batch, int64_t dst_row, const void* src, int B, int rows, int width,
              cudaStream_t s);

// ---- attention fallback (attention_fallback.cu): causal, GQA, packed qkv, D ≤ 128 ----
// pos (nullable): per-sample positions i32 [B·T] (packed samples, ops.hpp): query t attends to
// keys t - pos[t] .. t only.
void attention_fwd_fallback(void* out, float* lse, const void* qkv, const int32_t* pos, int B, int T, int Hq, int Hkv,
                            int D, cudaStream_t s);
void attention_bwd_fallback(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                            const int32_t* pos, int B, int T, int Hq, int Hkv, int D, Workspace ws, cudaStream_t s);

}  // namespace recipe::kernels::cuda
