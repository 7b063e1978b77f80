// The one op interface of recipe: every op the models and the optimizer need, implemented twice,
// by the CPU reference (kernels/cpu/, fp32 math, OpenBLAS, deterministic) and by the CUDA fast path
// (kernels/cuda/, bf16 activations, cuBLASLt, cuDNN). core/ only calls through `Backend`.
//
// Conventions (both backends):
// - Row-major. N = number of token rows (B·T). Linear weights are [out, in] (HF layout):
//   out = inp · Wᵀ + b.
// - Activations and compute weights are in `act_dtype()` (CPU: f32, CUDA: bf16); gradients of
//   parameters (dweight, dbias, dwte, ...) are always f32; norm statistics and losses are f32;
//   token ids are i32.
// - Parameter gradients ACCUMULATE (+=): the trainer opens each step's gradients with
//   begin_grad_writes (they then read as zero) and closes them with end_grad_writes, so
//   micro-batches accumulate. Norm input gradients ACCUMULATE too (they feed the residual stream).
//   All other input gradients (linear dinp, attention dqkv, swiglu, gelu) OVERWRITE.
// - Packed attention layout: qkv is [B, T, (Hq + 2·Hkv)·D], each token row holding all q heads,
//   then all k heads, then all v heads (each head D contiguous values). Head h of q uses kv head
//   h / (Hq/Hkv) (GQA). Attention output is [B, T, Hq·D]; lse (log-sum-exp of the scaled scores per
//   query, natural log) is [B, Hq, T] f32. Scale 1/sqrt(D), causal.
// - RoPE rotates pairs (i, i + D/2) of each q and k head ("rotate_half", as HF Llama), position =
//   t (0-based within the sequence), frequency inv_freq[i]: the run's table (RopeArgs), θ^(-2i/D)
//   without RoPE scaling.
// - Packed samples (segments): attention and RoPE take an optional `positions` tensor, i32 [B, T]
//   on the backend's device, for sequences that hold several samples back to back (SFT packing).
//   positions[b, t] is token t's position inside its sample: 0 at a sample's first token, then
//   +1 per token (a sample is a run 0, 1, 2, ...; a padding token of position 0 is a sample of
//   its own). So token t's sample starts at t - positions[b, t]: RoPE rotates by positions[b, t]
//   instead of t, and query t attends only to keys j with t - positions[b, t] ≤ j ≤ t (causal
//   within its sample, never across a boundary). The sample lengths (cu_seqlens, the ragged
//   offsets of cuDNN's THD layout) follow from the zeros of positions. Undefined positions (the
//   default) is the unpacked op, bitwise as without the argument.
// - SwiGLU input rows are [gate (F) | up (F)]: out = silu(gate) · up.
// - GELU is the tanh approximation.
// - Ops never allocate device memory; scratch comes from the backend's own workspace, sized at
//   creation.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.hpp"

namespace recipe::kernels {

struct BackendOptions {
  int device_index = 0;        // CUDA device
  bool deterministic = false;  // CUDA: deterministic attention backward and reductions
  int cpu_threads = 0;         // CPU: OpenBLAS threads, 0 = library default
  // CUDA: bytes of the backend's own workspace (scratch of reductions, cuDNN attention, GEMM
  // algorithm timing); 0 = 256 MiB. train() passes the plan's kernels.workspace_bytes.
  size_t workspace_bytes = 0;
  // CUDA kernel choices and tuning (the defaults are the fast path; the others exist for A/B
  // timing). train() fills them from the plan's `kernels` section; the CPU backend ignores them.
  bool gemm_tune = true;            // time the heuristic's algorithms per GEMM shape (never when deterministic)
  int gemm_tune_candidates = 8;     // how many of them (1..256)
  bool gemm_tune_log = false;       // print each timed GEMM
  bool attention_tune = true;       // time cuDNN's attention plans
  bool attention_fallback = false;  // always the own attention kernels instead of cuDNN
  bool fused_mlp = true;            // fc2's backward as the fused sm_90a kernel where it fits
  // CUDA: only the kernels every supported GPU (compute capability ≥ 8.0) runs, even on Hopper:
  // the Hopper-only kernels (the fused fc2 backward) are not used. Tests the non-Hopper path on an H100.
  bool portable_kernels = false;
  bool bias_grad_epilogue = false;  // bias gradients by cuBLASLt's BGRADB epilogue, not the column sum
  bool grad_memset = false;         // zero gradients at step start instead of first-write overwrite
};

// ---- argument structs of the ops that take many tensors ----
// Called with designated initializers, e.g. be.linear_fwd({.out = y, .inp = x, .weight = w}); a
// field left out is an undefined Tensor (the optional input or output is skipped) or 0. Every
// field has a default member initializer so that leaving one out is not a warning. The meaning of
// each field is the contract comment of its op in Backend below.
struct LinearFwdArgs {
  Tensor out{}, inp{}, weight{}, bias{}, pre_gelu{};
  bool accumulate = false;
};
struct LinearBwdArgs {
  Tensor dinp{}, dweight{}, dbias{}, dout{}, inp{}, weight{}, dinp_gelu_aux{}, dinp_sum{};
  bool dinp_accumulate = false;
};
// FP8 (trainer.precision = fp8; the data flow is in core/model/linear.hpp). An FP8 operand is a
// DType::e4m3 / e5m2 tensor (one byte per element) with an f32 [1] inverse scale in backend memory:
// element value = decode(byte) · scale_inv.
// fp8_quantize: scale = fp8_max(format) / amax[0] (1 when amax is 0, not finite, or the quotient
// overflows), computed in f32; scale_inv[0] = 1/scale; each element becomes the format's value
// nearest to inp·scale (f32 product; ties to even; beyond ±max saturates to ±max; NaN stays NaN).
// out receives the [rows, cols] result, out_t (optional, or alone) its transpose [cols, rows] (the
// K-major copy a backward GEMM needs). Both in one format.
// amax is the scale's source: the tensor's own amax (current scaling, from fp8_amax) or the amax
// its history gives (delayed scaling, fp8_amax_history). amax_out (optional, f32 [1]) records the
// input in the same pass: amax_out[0] = max(amax_out[0], max |inp|) (NaN ignored, as fp8_amax),
// accumulating over the casts of a step; the history roll resets it.
struct Fp8QuantizeArgs {
  Tensor out{}, out_t{}, scale_inv{}, inp{}, amax{};
  int64_t cols = 0;  // elements per row of inp
  Tensor amax_out{};
};
// fp8_quantize of the SwiGLU backward (delayed scaling's fusion of the cast into the kernel that
// produces the operand; core/model/linear.hpp): the tensor cast is dgate_up [rows, 2F], the
// gradient swiglu_bwd(dgate_up, dout, gate_up) would write (element for element the same value,
// rounded to the act dtype as that op rounds it), which is never materialised. out [rows, 2F],
// out_t [2F, rows], scale_inv, amax, amax_out as in fp8_quantize (amax_out records max |dgate_up|).
// dout [rows, F] and gate_up [rows, 2F] as in swiglu_bwd.
struct Fp8QuantizeSwigluBwdArgs {
  Tensor out{}, out_t{}, scale_inv{}, dout{}, gate_up{}, amax{}, amax_out{};
};
// swiglu_fwd with its output also cast to FP8 (delayed scaling's fusion for fc2's input): out
// [rows, F] (act dtype) = swiglu(gate_up) as swiglu_fwd writes it, and q [rows, F] its FP8 cast
// with scale_inv, amax, amax_out as in fp8_quantize (row layout only), in one pass.
struct Fp8SwigluFwdQuantizeArgs {
  Tensor out{}, q{}, scale_inv{}, gate_up{}, amax{}, amax_out{};
};
// Delayed scaling's once-per-step update of T tensors' amax histories (Transformer Engine's
// DelayedScaling). history f32 [T, H], row t newest first (history[t][0] the last step's amax);
// amax and scale_amax f32 [T, 4]: 16-byte cells, the value in column 0 (scale_amax feeds
// fp8_quantize's amax, which cuBLASLt-facing code keeps 16-byte aligned). Per tensor t:
//   push:  history[t] shifts one older (the oldest drops), history[t][0] = amax[t][0], amax[t][0] = 0
//   then:  scale_amax[t][0] = most_recent ? history[t][0] : max over history[t]
// push = false only recomputes scale_amax (after a checkpoint restored the history).
struct Fp8AmaxHistoryArgs {
  Tensor history{}, amax{}, scale_amax{};
  bool most_recent = false;
  bool push = true;
};
// out[N,OC] (act dtype) = (inp·inp_scale_inv)[N,IC]·(weight·weight_scale_inv)[OC,IC]ᵀ + bias, with
// pre_gelu as in linear_fwd. inp and weight in FP8. fast_accum: the GPU may keep the partial sums
// in the tensor cores' reduced-precision accumulator instead of promoting them to f32 every few
// products (cuBLASLt's FAST_ACCUM, Transformer Engine's forward default); the CPU emulation sums
// in f32 either way.
struct Fp8LinearFwdArgs {
  Tensor out{}, inp{}, inp_scale_inv{}, weight{}, weight_scale_inv{}, bias{}, pre_gelu{};
  bool fast_accum = false;
};
// linear_bwd's contract with FP8 operands, each in the layout its GEMM reads (K-major):
//   dinp[N,IC]     = dout_fp8[N,OC] · weight_t[IC,OC]ᵀ    (then dinp_gelu_aux, dinp_sum as in linear_bwd)
//   dweight[OC,IC] += dout_t[OC,N] · inp_t[IC,N]ᵀ
//   dbias[OC]     += Σ_rows dout (the act-dtype gradient, not its FP8 copy)
struct Fp8LinearBwdArgs {
  Tensor dinp{}, dweight{}, dbias{}, dinp_gelu_aux{}, dinp_sum{};
  Tensor dout{};                                  // [N, OC] act dtype
  Tensor dout_fp8{}, dout_t{}, dout_scale_inv{};  // [N, OC], [OC, N]
  Tensor weight_t{}, weight_scale_inv{};          // [IC, OC]
  Tensor inp_t{}, inp_scale_inv{};                // [IC, N]
};
// The SwiGLU backward and, optionally, the forward's rebuild, in one pass over gate_up (the
// backward of fc2's input under trainer.recompute gelu / norm, which keep no SwiGLU output: fc2's
// weight gradient needs it rebuilt, and the backward reads gate_up anyway). Layouts as swiglu_bwd:
//   gate_up  [rows, 2F]  each row [gate (F) | up (F)], the SwiGLU's input
//   dout     [rows, F]   d(SwiGLU output)
//   dgate_up [rows, 2F]  = swiglu_bwd(dout, gate_up), overwritten, same row layout as gate_up
//   act      [rows, F]   (optional) = swiglu_fwd(gate_up); undefined: not written
// Every value written is the one the separate op writes, bit for bit.
struct SwigluBwdRebuildArgs {
  Tensor dgate_up{}, act{}, dout{}, gate_up{};
};
struct GeluRebuildLinearBwdArgs {
  Tensor dinp{}, act{}, dweight{}, dbias{}, dout{}, weight{}, pre{}, dinp_sum{};
};
// positions (optional, i32 [T], on the backend's device): the wpe row that row t of every sample
// reads (and whose dwpe row it adds into), each in [0, wpe rows); undefined: row t. Context
// parallelism passes the local rows' positions in the whole sample (a rank holds two separated
// chunks of it), so the ops read and accumulate the global table itself.
struct EmbeddingFwdArgs {
  Tensor out{}, tokens{}, wte{}, wpe{}, positions{};
  int T = 0, vocab_start = 0;
};
struct EmbeddingBwdArgs {
  Tensor dwte{}, dwpe{}, dout{}, tokens{}, positions{};
  int T = 0, vocab_start = 0;
};
struct LayerNormFwdArgs {
  Tensor out{}, mean{}, rstd{}, inp{}, weight{}, bias{};
  float eps = 0;
};
struct LayerNormBwdArgs {
  Tensor dinp{}, dweight{}, dbias{}, dout{}, inp{}, weight{}, mean{}, rstd{}, dinp_sum{};
};
struct RmsNormFwdArgs {
  Tensor out{}, rstd{}, inp{}, weight{};
  float eps = 0;
};
struct RmsNormBwdArgs {
  Tensor dinp{}, dweight{}, dout{}, inp{}, weight{}, rstd{};
};
// qk-norm (Qwen3): an RMSNorm over each head vector of the q and k heads of packed qkv rows
// [rows, (Hq + 2·Hkv)·D] (the layout above: per row Hq q heads, then Hkv k heads, then Hkv v heads,
// each D wide). Vector (n, h), h < Hq + Hkv, is the D values at column h·D of row n: q head h is
// normalised with q_weight [D], k head h − Hq with k_weight [D], eps as given; the statistic is
// taken per vector (mean of x² over its D values), never over the row.
//   forward:  out[n, h·D + c] = x·rstd(n, h)·w[c]; v heads copied as they are. out may alias inp.
//   backward: dinp (q and k heads, OVERWRITTEN) = rstd·(dŷ − x̂·mean(dŷ·x̂)) with dŷ = dout·w and
//             x̂ = x·rstd, rstd recomputed from inp (nothing is saved between the two); v heads of
//             dinp = dout's; dinp may alias dout. dq_weight += Σ_(n, q heads) dout·x̂, dk_weight
//             likewise over the k heads (either may be undefined: frozen).
// inp is the forward's input (the q|k|v projection's output, before the norm).
struct QkNormFwdArgs {
  Tensor out{}, inp{}, q_weight{}, k_weight{};
  int Hq = 0, Hkv = 0, D = 0;
  float eps = 0;
};
struct QkNormBwdArgs {
  Tensor dinp{}, dq_weight{}, dk_weight{}, dout{}, inp{}, q_weight{}, k_weight{};
  int Hq = 0, Hkv = 0, D = 0;
  float eps = 0;
};
struct ResidualNormFwdArgs {
  Tensor residual{}, out{}, mean{}, rstd{}, a{}, b{}, weight{}, bias{};
  float eps = 0;
  bool rms = false;  // RMSNorm (bias and mean unused) instead of LayerNorm
};
// Batch, sequence, query heads, KV heads and head dim of packed qkv (see the layout above).
// max_samples (packed samples only, else 0): the most samples one row holds, its padding counted as
// one more (the data's data.max_samples_per_pack + 1); a backend may size per-sample work by it
// (cuDNN's ragged attention: one batch entry per sample slot). A row with more samples is invalid.
struct AttentionShape {
  int B = 0, T = 0, Hq = 0, Hkv = 0, D = 0;
  int max_samples = 0;
};
// positions (optional): per-sample positions i32 [B, T] of packed samples (see above).
struct AttentionFwdArgs {
  Tensor out{}, lse{}, qkv{}, positions{};
  AttentionShape shape{};
};
struct AttentionBwdArgs {
  Tensor dqkv{}, dout{}, qkv{}, out{}, lse{}, positions{};
  AttentionShape shape{};
};
// Ring attention (context parallelism, core/model/ring_attention.hpp): one block of attention,
// the queries of rows [q_begin, q_begin + q_len) of `qkv` against the keys and values of rows
// [k_begin, k_begin + k_len) of `kv`. Both are packed qkv [B, T, (Hq + 2·Hkv)·D] of one shape
// (`kv` may be `qkv` itself, or a copy of another rank's qkv; only its k and v heads are read).
// Rows are the block's own indexing: causal = query i (row q_begin + i) sees keys 0..i of the
// block (needs q_len == k_len, the diagonal block), otherwise every key of the block is seen.
// out [B, T, Hq·D] and lse [B, Hq, T] f32 hold the queries' running result: merge = false writes
// the block's result into the query rows; merge = true combines it with what they hold,
//   lse' = log(exp(lse) + exp(lse_b)),   out' = exp(lse − lse')·out + exp(lse_b − lse')·out_b,
// so blocks merged in any order give the attention over their union. Other rows are untouched.
struct AttentionBlockFwdArgs {
  Tensor out{}, lse{}, qkv{}, kv{};
  AttentionShape shape{};
  int q_begin = 0, q_len = 0, k_begin = 0, k_len = 0;
  bool causal = false;
  bool merge = false;
};
// The rows and mask of one block, as prepare_attention_blocks takes them.
struct AttentionBlockShape {
  int q_len = 0, k_len = 0;
  bool causal = false;
};
// The backward of one block given the FINAL (all blocks merged) out and lse of the queries: the
// block's share of the gradients ACCUMULATES, the q heads of the query rows into dq and the k and
// v heads of the key rows into dkv (both packed-qkv shaped, act dtype; they may be one tensor).
struct AttentionBlockBwdArgs {
  Tensor dq{}, dkv{}, dout{}, qkv{}, kv{}, out{}, lse{};
  AttentionShape shape{};
  int q_begin = 0, q_len = 0, k_begin = 0, k_len = 0;
  bool causal = false;
};
// qkv: the packed qkv (rope_fwd) or its gradient (rope_bwd), rotated in place; positions
// (optional): per-sample positions i32 [B, T] (see above), else t. RoPE reads a position only as
// its angle, so any non-negative positions are taken: context parallelism passes each token's
// position in the whole sample (a rank holds two separated chunks of it). max_positions (0: T)
// bounds the positions a caller passes (context parallelism: the whole sample's length); a
// backend may size an angle table by it (CUDA), and a position at or past it is still rotated
// right, only without the table.
// inv_freq: the run's RoPE inverse frequencies, f64 [D/2] on the backend's device: entry i is
// the inverse frequency of the pair (i, i + D/2), rotated at position p by the angle p·inv_freq[i]
// (in double). Made once per run by family/rope.hpp rope_inv_freq (θ^(-2i/D), then the run's RoPE
// scaling) and uploaded once; no op computes frequencies itself. A backend may keep values derived
// from it until it is freed or rewritten with from_host (CUDA: one (cos, sin) table, of the last
// table it got: a run passes one table from all its model chunks), so write it only by from_host.
struct RopeArgs {
  Tensor qkv{}, positions{};
  AttentionShape shape{};
  Tensor inv_freq{};
  int max_positions = 0;
};
// Decoding with a KV cache (generation): one layer's cache is k_cache and v_cache, each
// [B, Hkv, S, D] in act dtype (S = the cache's capacity in positions, head after head so one kv
// head's keys are one contiguous [S, D] matrix); positions [0, past) of every row are filled.
// qkv holds the n new tokens [B, n, (Hq + 2·Hkv)·D] (the packed layout above, shape.T = n), at
// positions past .. past + n − 1 (past + n ≤ S).
// kv_cache_append: with rope_inv_freq (RopeArgs::inv_freq's table, f64 [D/2]) the q and k heads
// of qkv are rotated in place by their positions (exactly rope_fwd at position past + t); then k
// and v heads go to the cache at [b, kv head, past + t, :]. rope_inv_freq undefined: no rotation
// (learned positions).
struct KvCacheAppendArgs {
  Tensor qkv{}, k_cache{}, v_cache{};
  AttentionShape shape{};
  int past = 0;
  Tensor rope_inv_freq{};
};
// kv_attention: out [B, n, Hq·D] = causal GQA attention of the n new queries (the q heads of qkv,
// after kv_cache_append) over the cache: query t attends keys 0 .. past + t, q head h reads kv
// head h / (Hq/Hkv) without repeating K/V; scale 1/sqrt(D), the softmax as attention_fwd's.
struct KvAttentionArgs {
  Tensor out{}, qkv{}, k_cache{}, v_cache{};
  AttentionShape shape{};
  int past = 0;
};
// What prepare_attention found for one shape, before the first step.
struct AttentionPlan {
  std::string path;             // "cudnn" (forward and backward), "own" (the backend's own kernels), "cpu"
  int64_t workspace_bytes = 0;  // the most workspace the chosen library plans need (0 for the own kernels)
};
// Which kernels the ops have run since the backend was made (kernel_paths): attention "cudnn",
// "own", "cudnn+own" (some shapes each) or "cpu", "" before any ran; GEMMs "cublaslt" or "openblas".
// Replays of recorded work run what was recorded, so the paths stay true under CUDA graphs.
struct KernelPaths {
  std::string attention, gemm;
};
struct VocabParallelCeSumsArgs {
  Tensor sums{}, logits{}, rowmax{}, targets{};
  int vocab_start = 0, valid_cols = 0;
};
struct VocabParallelCeFinishArgs {
  Tensor losses{}, logits{}, rowmax{}, sums{}, targets{};
  int vocab_start = 0, valid_cols = 0;
  Tensor dloss{};  // f32 [n]: each row's gradient weight, read only with compute_grad
  bool compute_grad = false;
};

// Dropout on a [rows, cols] block of a larger matrix whose mask is a pure function of the global
// position (kernels/dropout_mask.hpp): element (i, j) of the block is element
// (first_row + i, first_col + j) of a matrix with row_stride columns, mask index
// (first_row + i)·row_stride + first_col + j.
struct DropoutArgs {
  Tensor out{}, inp{};      // [rows, cols], one dtype; out may alias inp
  float p = 0;              // drop probability, in [0, 1)
  uint64_t key = 0;         // the mask's stream
  int64_t first_row = 0;    // global row of the block's row 0
  int64_t row_stride = 0;   // global columns per row (≥ first_col + cols)
  int64_t first_col = 0;    // global column of the block's column 0
  bool accumulate = false;  // out += instead of out =
};

struct AdamWArgs {
  float lr, beta1, beta2, eps, weight_decay;
  int step;          // 1-based, for bias correction
  float grad_scale;  // multiply gradients by this first (clipping and loss scaling)
  // Optional (additive, for a step that never waits for the host): a backend-memory f32 scalar,
  // e.g. element 1 of grad_norm_clip's output. When set it replaces grad_scale, and a non-finite
  // value skips the update entirely (master, m, v and the compute copy stay untouched).
  const float* grad_scale_device = nullptr;
  // Optional (additive, for a step recorded once and replayed every step): a backend-memory f32
  // [3] = {lr, 1/(1 − β1^step), 1/(1 − β2^step)} (see adamw_schedule). When set it replaces lr
  // and step, so one recorded launch serves every step while the host rewrites the three values.
  const float* schedule_device = nullptr;
};

// The values schedule_device points to, computed from lr, betas and step exactly as the backends
// compute them from the host arguments (bias corrections in double, then f32).
struct AdamWSchedule {
  float lr, inv_bias_correction1, inv_bias_correction2;
};
AdamWSchedule adamw_schedule(const AdamWArgs& args);

// Backend work recorded once and replayed as a whole (CUDA: an instantiated CUDA graph).
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  // Enqueues the recorded work after everything enqueued before it; does not wait.
  virtual void launch() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual DType act_dtype() const = 0;
  virtual std::string name() const = 0;

  // ---- notices (begin) ----
  // A backend never writes to a terminal. Where a fast path cannot run (cuDNN unavailable or
  // refusing a shape, a CUDA-graph capture that failed) or a diagnostic was asked for
  // (RECIPE_CUBLASLT_TUNE_LOG=1), it records one line here ("recipe: <what and why>; <what runs
  // instead>"); whoever drives the backend (core::train) prints the new lines at start and after
  // each step, so no slow path is silent and no library prints. Single-threaded, like the ops.
  void notice(std::string line) { notices_.push_back(std::move(line)); }
  // The notices recorded since the last call, oldest first; clears them.
  std::vector<std::string> take_notices() { return std::exchange(notices_, {}); }

 private:
  std::vector<std::string> notices_;

 public:
  // ---- notices (end) ----

  // ---- memory ----
  virtual void* alloc(size_t bytes) = 0;  // zero-filled; throws on failure
  virtual void free(void* p) = 0;
  virtual void copy(Tensor dst, Tensor src) = 0;            // same device, same dtype
  virtual void to_host(void* dst, Tensor src) = 0;          // raw bytes of src
  virtual void from_host(Tensor dst, const void* src) = 0;  // raw bytes into dst
  virtual void zero(Tensor t) = 0;
  virtual void cast(Tensor dst, Tensor src) = 0;  // f32 <-> bf16 (or same)
  virtual void synchronize() = 0;
  virtual size_t peak_memory_bytes() const = 0;

  // ---- linear layers ----
  // out[N,OC] = inp[N,IC]·weight[OC,IC]ᵀ + bias[OC]. If pre_gelu is defined, pre_gelu receives the
  // affine result and out = gelu(pre_gelu) (the fused GELU epilogue). accumulate: out += inp·weightᵀ
  // instead (no bias, no pre_gelu; the GEMM's beta = 1): a LoRA adapter's term added onto the base
  // linear's output.
  virtual void linear_fwd(const LinearFwdArgs& a) = 0;
  // dinp[N,IC] = dout·weight (skipped if undefined); if dinp_gelu_aux[N,IC] is defined, dinp is
  // then multiplied by gelu'(dinp_gelu_aux) (the dGELU epilogue of the previous layer's GELU).
  // dweight[OC,IC] += doutᵀ·inp; dbias[OC] += Σ_rows dout (skipped if undefined).
  // dinp_sum[IC] (f32, optional, needs dinp) += Σ_rows dinp, the final dinp: the bias gradient of
  // the linear whose output dinp is the gradient of (the dGELU_BGRAD epilogue on CUDA).
  // dinp_accumulate: dinp += dout·weight instead (no dinp_gelu_aux, no dinp_sum): a LoRA adapter's
  // input gradient added onto the base linear's.
  virtual void linear_bwd(const LinearBwdArgs& a) = 0;
  // The backward of a linear whose input act = gelu(pre) was not kept (trainer.recompute gelu or
  // norm): act = gelu(pre), then linear_bwd{dinp, dweight, dbias, dout, inp = act, weight,
  // dinp_gelu_aux = pre, dinp_sum}. The default composes the two; backends may fuse the rebuild
  // into the dinp GEMM.
  virtual void gelu_rebuild_linear_bwd(const GeluRebuildLinearBwdArgs& a);

  // ---- FP8 linears (the argument structs above) ----
  // amax[0] (f32 [1], backend memory) = max |x| over x (act dtype); NaN elements are ignored, an
  // infinite one gives inf. Overwrites amax.
  virtual void fp8_amax(Tensor amax, Tensor x);
  virtual void fp8_quantize(const Fp8QuantizeArgs& a);
  virtual void fp8_quantize_swiglu_bwd(const Fp8QuantizeSwigluBwdArgs& a);
  virtual void fp8_swiglu_fwd_quantize(const Fp8SwigluFwdQuantizeArgs& a);
  virtual void fp8_amax_history(const Fp8AmaxHistoryArgs& a);
  // out[c, r] = inp[r, c]: an FP8 matrix inp [rows, cols] copied transposed into out [cols, rows]
  // (bytes as they are, same format; the inverse scale is unchanged). The K-major copy of a
  // weight held only in FP8 that the input-gradient GEMM reads (core/model/linear.hpp).
  virtual void fp8_transpose(Tensor out, Tensor inp);
  virtual void fp8_linear_fwd(const Fp8LinearFwdArgs& a);
  virtual void fp8_linear_bwd(const Fp8LinearBwdArgs& a);

  // ---- embeddings ----
  // out[N,C] = wte[tok - vocab_start] (zero row if the token is outside this shard's rows)
  //            + wpe[p(n % T)] (if wpe defined; p(t) = positions[t], or t without positions).
  virtual void embedding_fwd(const EmbeddingFwdArgs& a) = 0;
  // dwte += scatter(dout by token), dwpe[p(t)] += Σ over batch of row t; deterministic. Either may
  // be undefined. dwpe is a parameter gradient: rows no p(t) names are left as they are.
  virtual void embedding_bwd(const EmbeddingBwdArgs& a) = 0;

  // ---- norms ----
  // out = (inp − mean)·rstd·weight + bias per row; mean and rstd (f32 [N], optional) receive the
  // statistics the backward needs.
  virtual void layernorm_fwd(const LayerNormFwdArgs& a) = 0;
  // dinp += ∂/∂inp (the residual stream), dweight += Σ dout·x̂, dbias += Σ dout; dinp_sum (f32 [C],
  // optional, needs dinp) += Σ_rows dinp after the accumulation: the bias gradient of the linear
  // whose output was added into this residual, so that linear_bwd can skip its own column sum.
  virtual void layernorm_bwd(const LayerNormBwdArgs& a) = 0;
  virtual void rmsnorm_fwd(const RmsNormFwdArgs& a) = 0;
  // dinp += ∂/∂inp, dweight += Σ dout·x̂ (as layernorm_bwd, without bias or mean).
  virtual void rmsnorm_bwd(const RmsNormBwdArgs& a) = 0;
  // residual = a + b, then norm(residual) → out. bias/mean undefined for RMSNorm. The default
  // composes add + norm; backends may fuse.
  virtual void residual_norm_fwd(const ResidualNormFwdArgs& a);
  // Per-head RMSNorm of the q and k heads of packed qkv (QkNormFwdArgs / QkNormBwdArgs above).
  virtual void qk_norm_fwd(const QkNormFwdArgs& a) = 0;
  virtual void qk_norm_bwd(const QkNormBwdArgs& a) = 0;

  // ---- elementwise ----
  virtual void add(Tensor out, Tensor a, Tensor b) = 0;  // out may alias a or b
  virtual void gelu_fwd(Tensor out, Tensor inp) = 0;
  virtual void gelu_bwd(Tensor dinp, Tensor dout, Tensor inp) = 0;
  virtual void swiglu_fwd(Tensor out, Tensor gate_up) = 0;
  virtual void swiglu_bwd(Tensor dgate_up, Tensor dout, Tensor gate_up) = 0;
  // swiglu_bwd, and swiglu_fwd into a.act when it is defined (SwigluBwdRebuildArgs). The default
  // composes the two ops; the CUDA backend reads gate_up once for both.
  virtual void swiglu_bwd_rebuild(const SwigluBwdRebuildArgs& a);
  virtual void rope_fwd(const RopeArgs& a) = 0;
  virtual void rope_bwd(const RopeArgs& a) = 0;  // a.qkv holds dqkv
  // out (+)= inp ⊙ keep / (1 − p) with keep the counter-based mask of DropoutArgs (the element's
  // draw ≥ p). The same call with the same key and positions drops the same elements, so a
  // backward regenerates the forward's mask instead of storing it: forward out = dropout(x);
  // backward dx += dropout(dx_dropped) (accumulate). Computed in f32, rounded once into out.
  virtual void dropout(const DropoutArgs& a) = 0;

  // ---- attention ----
  // Causal (GQA) attention over packed qkv (layout above): out [B, T, Hq·D], lse [B, Hq, T] f32;
  // with positions, restricted to each token's own sample.
  virtual void attention_fwd(const AttentionFwdArgs& a) = 0;
  // dqkv (overwritten) from dout, the forward's qkv, out and lse.
  virtual void attention_bwd(const AttentionBwdArgs& a) = 0;
  // One block of ring attention (AttentionBlockFwdArgs / AttentionBlockBwdArgs above). The
  // defaults throw: a backend without them cannot run context parallelism (the resolver rejects
  // parallelism.cp > 1 where they are missing).
  virtual void attention_block_fwd(const AttentionBlockFwdArgs& a);
  virtual void attention_block_bwd(const AttentionBlockBwdArgs& a);
  // prepare_attention (below) for the blocks ring attention will run at `shape` (the local shape):
  // the CUDA backend builds cuDNN's block graphs, both directions, and grows its workspace to fit
  // them and the blocks' scratch. The blocks have no other kernel: a block cuDNN cannot run, or a
  // backend without cuDNN, throws here, at start, naming the cause.
  virtual AttentionPlan prepare_attention_blocks(const AttentionShape& shape,
                                                 const std::vector<AttentionBlockShape>& blocks);
  // Generation with a KV cache (the arguments above): append n new tokens' K/V (after RoPE), then
  // attend their queries over everything cached.
  virtual void kv_cache_append(const KvCacheAppendArgs& a) = 0;
  virtual void kv_attention(const KvAttentionArgs& a) = 0;
  // Chooses the kernels attention_fwd/attention_bwd will run for `shape` and sizes what they need,
  // so that a fast path that cannot run is known (and said, as a notice) before the first step,
  // not found by the first call. The CUDA backend builds cuDNN's forward and backward plans for
  // the shape and, when they need more workspace than BackendOptions::workspace_bytes, grows its
  // workspace to fit them (a notice names both sizes and kernels.workspace_mb); a shape cuDNN
  // cannot run at all gives a notice with cuDNN's reason and the attention then runs the own
  // kernels. Call it outside recording, before the steps. The CPU backend has nothing to choose.
  virtual AttentionPlan prepare_attention(const AttentionShape& shape) = 0;
  // The kernel paths the ops took (for metrics: what actually ran).
  virtual KernelPaths kernel_paths() const = 0;

  // ---- loss ----
  // logits[N, Vp] (act dtype; columns ≥ vocab are padding and ignored). losses[N] (f32) =
  // -log softmax(logits)[target]. If compute_grad, logits are overwritten in place by
  // dlogits[r] = (softmax - onehot(target)) · dloss[r] (padding columns get 0), where dloss [N]
  // (f32, backend memory) is each row's weight in the objective: the loss component's
  // (core/train/loss.hpp) d objective / d losses[r]. It is read only with compute_grad (may be
  // undefined without). Targets < 0 are ignored (loss 0, gradient 0, whatever dloss says).
  virtual void cross_entropy(Tensor losses, Tensor logits, Tensor targets, int vocab, Tensor dloss,
                             bool compute_grad) = 0;

  // ---- vocab-parallel loss ----
  // With tensor parallelism each rank holds `logits` [n, Vl] = the columns [vocab_start,
  // vocab_start + Vl) of the full logits; columns at or past `valid_cols` are vocab padding and
  // ignored (valid_cols = clamp(vocab - vocab_start, 0, Vl)). Three passes with collectives between
  // them give the same losses and dlogits as cross_entropy over the whole row:
  //   1. rowmax[n] (f32) = max over this shard's valid columns (-inf when it has none);
  //      then the caller takes the element-wise max over the TP group.
  //   2. sums [2, n] (f32): sums[0, r] = Σ_valid exp(logit − rowmax[r]); sums[1, r] = the logit of
  //      row r's target when the target lies in this shard, else 0; then the caller sums over TP.
  //   3. losses[r] = log(sums[0, r]) + rowmax[r] − sums[1, r] (0 for a target < 0); with
  //      compute_grad, logits are overwritten by dlogits = (exp(logit − rowmax)/sums[0] − [column
  //      is the target])·dloss[r] on valid columns, 0 on padding columns and on rows whose target < 0
  //      (dloss: f32 [n], per-row weights as in cross_entropy).
  // Logits are in act dtype, targets i32 [n] holding GLOBAL vocabulary ids. The defaults throw
  // std::logic_error (a backend without them cannot run tensor parallel).
  virtual void vocab_parallel_ce_max(Tensor rowmax, Tensor logits, int valid_cols);
  virtual void vocab_parallel_ce_sums(const VocabParallelCeSumsArgs& a);
  virtual void vocab_parallel_ce_finish(const VocabParallelCeFinishArgs& a);

  // ---- optimizer ----
  // AdamW with decoupled weight decay on n = master.numel() f32 values:
  //   g = grad·grad_scale; m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²;
  //   master -= lr·(m̂/(sqrt(v̂)+eps) + wd·master); compute_copy (if defined) = cast(master).
  virtual void adamw(Tensor master, Tensor grad, Tensor m, Tensor v, Tensor compute_copy, const AdamWArgs& args) = 0;
  // Σ x² over an f32 tensor, accumulated in double, deterministic; synchronizes.
  virtual double sum_squares(Tensor x) = 0;
  // The clip factor computed where the gradients live, so the step need not wait for the host
  // (additive; the default composes sum_squares + from_host and synchronizes, the CUDA backend
  // stays on the device). out is f32 [2]: out[0] = ‖grads‖₂ (Σ in double, deterministic),
  // out[1] = min(1, clip/(‖grads‖₂ + 1e-6)) (1 when clip ≤ 0), or NaN — meaning "skip this
  // update" — when the norm is not finite, or when losses is defined and Σ losses (f32, summed in
  // double) is not finite or exceeds loss_sum_limit (the divergence guard).
  virtual void grad_norm_clip(Tensor out, Tensor grads, float clip, Tensor losses, double loss_sum_limit);
  // grad_norm_clip in two halves for a world of ranks, which the caller sums in between (the
  // backend knows no ranks: the trainer all-reduces `sums` over the world on the device, so a
  // multi-rank step never waits for the host between backward and AdamW).
  //   norm_loss_sums: sums f64 [2] = {Σ over the tensors of `grads` of Σ x² (each f32), Σ losses}
  //     (losses f32, may be undefined: 0), accumulated in double in a fixed order.
  //   clip_from_sums: out f32 [2] from the world's sums, the arithmetic of grad_norm_clip:
  //     out[0] = sqrt(sums[0]), out[1] = the clip factor, or NaN when the norm or sums[1] is not
  //     finite or sums[1] > loss_sum_limit.
  // (additive; the defaults go through the host and synchronize, the CUDA backend stays on the
  // device.)
  virtual void norm_loss_sums(Tensor sums, const std::vector<Tensor>& grads, Tensor losses);
  virtual void clip_from_sums(Tensor out, Tensor sums, float clip, double loss_sum_limit);
  virtual void scale(Tensor x, float s) = 0;

  // ---- one step's parameter gradients (additive) ----
  // begin_grad_writes: from here on every tensor in `grads` (f32 parameter gradients, disjoint)
  // reads as zero to the ops that accumulate into parameter gradients (linear_bwd, the norm
  // backwards, embedding_bwd). The default zeroes them. A backend may instead let each tensor's
  // first write overwrite (CUDA: beta = 0 in the weight-gradient GEMM), which saves the memset
  // and a read of every gradient. end_grad_writes: the tensors now hold their sums (the backend
  // zeroes any that no op wrote). In between, only those ops, and collectives over gradients that
  // are already complete, may touch `grads`. Both may be recorded (record()).
  virtual void begin_grad_writes(const std::vector<Tensor>& grads);
  virtual void end_grad_writes();

  // ---- recorded work (additive; CUDA graphs) ----
  // Host memory that uploads may read while recorded work replays (CUDA: page-locked), zeroed;
  // throws on failure. The defaults use ordinary memory.
  virtual void* alloc_host(size_t bytes);
  virtual void free_host(void* p);
  // dst ← the bytes at src, enqueued without waiting: src (alloc_host memory) must stay unchanged
  // until the copy has run. Inside record() the copy becomes part of the recording and reads src
  // at every launch. The default is from_host (which waits).
  virtual void from_host_async(Tensor dst, const void* src);
  // Calls `body` with the backend recording what it enqueues instead of running it, and returns
  // the recording. nullptr, with the reason in `why`, when the backend cannot record (the default)
  // or recording failed: an op inside body that waits for the host, allocates or is not
  // recordable, or an exception from body. Nothing of body ran then and the backend works as
  // before. The recording holds the device pointers and op arguments body used: everything that
  // changes between launches must be read from device memory (or a from_host_async source).
  virtual std::unique_ptr<RecordedWork> record(const std::function<void()>& body, std::string& why);
};

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& opts = {});
// Throws std::runtime_error when built without CUDA or when no device is usable.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opts = {});
std::unique_ptr<Backend> make_backend(Device device, const BackendOptions& opts = {});

struct GpuInfo {
  int count = 0;
  std::string name;         // of device 0
  size_t memory_bytes = 0;  // of device 0
  int sm_major = 0, sm_minor = 0;
  std::string driver_version, runtime_version;
};
bool built_with_cuda();
GpuInfo query_gpus();  // count 0 when no CUDA build or no device

}  // namespace recipe::kernels
