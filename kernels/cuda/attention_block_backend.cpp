// Ring attention's blocks on CUDA (ops.hpp AttentionBlockFwdArgs / AttentionBlockBwdArgs): cuDNN's
// fused attention on the block's rows (cudnn_attention.hpp), then a small kernel that merges or
// accumulates its compact results into the op's tensors (attention_block.cu).
//
// Forward: cuDNN writes the block's out and lse (its Stats: the natural-log log-sum-exp of the
// scaled scores per query, exactly ops.hpp's lse) into workspace scratch; attention_block_merge
// copies them into the query rows (merge = false) or merges them by log-sum-exp (merge = true).
// Backward: flash attention's backward needs only the FINAL out and lse of a query (P = exp(s − lse),
// D = rowsum(dO∘O)), so cuDNN's SDPA backward runs on the block's q rows and k/v rows with the final
// out rows and a compact copy of their lse rows; it writes dQ and dK|dV into scratch and add_rows
// accumulates them into dq's q heads and dkv's k and v heads, as the contract asks.
//
// Workspace, front to back (each piece 256-byte aligned, then cuDNN's plan workspace):
//   forward   blk out [B, q_len, Hq·D] bf16 | blk lse [B, Hq, q_len] f32
//   backward  lse rows [B, Hq, q_len] f32 | dQ [B, q_len, Hq·D] bf16 | dK|dV [B, k_len, 2·Hkv·D] bf16
// There is no own kernel for blocks: without cuDNN, or for a block cuDNN rejects, the ops throw
// (and prepare_attention_blocks, called at start, says so before the first step).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/cuda/op_checks.hpp"

namespace recipe::kernels::cuda {

namespace {

#ifdef RECIPE_WITH_CUDNN
// The cuDNN block of one (query rows, key rows) pair of the ring.
CudnnAttention::Block cudnn_block(const AttentionShape& s, int q_len, int k_len, bool causal) {
  return {.B = s.B, .T = s.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D, .q_len = q_len, .k_len = k_len, .causal = causal};
}

// A bf16 [B, T, width] tensor from token row `first` on (the block's strided view starts there).
const char* rows_from(const Tensor& t, int first, int64_t width) {
  return static_cast<const char*>(t.ptr) + size_t(first) * size_t(width) * 2;
}
#endif  // RECIPE_WITH_CUDNN

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

size_t fwd_scratch_bytes(const AttentionShape& s, int q_len) {
  return align256(size_t(s.B) * size_t(q_len) * size_t(s.Hq) * size_t(s.D) * 2) +
         align256(size_t(s.B) * size_t(s.Hq) * size_t(q_len) * sizeof(float));
}

size_t bwd_scratch_bytes(const AttentionShape& s, int q_len, int k_len) {
  return align256(size_t(s.B) * size_t(s.Hq) * size_t(q_len) * sizeof(float)) +
         align256(size_t(s.B) * size_t(q_len) * size_t(s.Hq) * size_t(s.D) * 2) +
         align256(size_t(s.B) * size_t(k_len) * size_t(2 * s.Hkv) * size_t(s.D) * 2);
}

std::string block_dims(const AttentionShape& s, int q_len, int k_len, bool causal) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " Hq=" + std::to_string(s.Hq) +
         " Hkv=" + std::to_string(s.Hkv) + " D=" + std::to_string(s.D) + " q_len=" + std::to_string(q_len) +
         " k_len=" + std::to_string(k_len) + (causal ? " causal" : " unmasked");
}

// The op's shape and row checks, shared by both directions (the CPU op's check_block).
void check_block(const char* op, const Tensor& qkv, const Tensor& kv, const Tensor& out, const Tensor& lse,
                 const AttentionShape& sh, int q_begin, int q_len, int k_begin, int k_len, bool causal) {
  const int B = sh.B, T = sh.T, Hq = sh.Hq, Hkv = sh.Hkv, D = sh.D;
  if (B < 0 || T < 0 || Hq <= 0 || Hkv <= 0 || D <= 0 || Hq % Hkv)
    bad_arg(op, "need B, T >= 0, D > 0 and Hkv dividing Hq; got B=" + std::to_string(B) + " T=" + std::to_string(T) +
                    " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  if (q_begin < 0 || q_len < 0 || q_begin + q_len > T || k_begin < 0 || k_len < 0 || k_begin + k_len > T ||
      (causal && q_len != k_len))
    bad_arg(op, "rows q [" + std::to_string(q_begin) + ", +" + std::to_string(q_len) + ") and k [" +
                    std::to_string(k_begin) + ", +" + std::to_string(k_len) + ") must lie in T=" + std::to_string(T) +
                    (causal ? " and be equally long (causal)" : ""));
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  expect(op, "qkv", qkv, DType::bf16);
  expect(op, "kv", kv, DType::bf16);
  expect(op, "out", out, DType::bf16);
  expect(op, "lse", lse, DType::f32);
  expect_numel(op, "qkv", qkv, int64_t(B) * T * row);
  expect_numel(op, "kv", kv, int64_t(B) * T * row);
  expect_numel(op, "out", out, int64_t(B) * T * Hq * D);
  expect_numel(op, "lse", lse, int64_t(B) * Hq * T);
}

}  // namespace

AttentionPlan CudaBackend::prepare_attention_blocks(const AttentionShape& shape,
                                                    const std::vector<AttentionBlockShape>& blocks) {
  refuse_while_recording("prepare_attention_blocks");
#ifdef RECIPE_WITH_CUDNN
  if (!attention_)
    throw std::runtime_error(
        "CUDA backend: ring attention (parallelism.cp > 1) runs cuDNN's fused attention, and this backend has none "
        "(kernels.attention=\"fallback\", or cuDNN failed to start: see the notices above); no own kernel runs its "
        "blocks");
  size_t need = 0;
  for (const AttentionBlockShape& b : blocks) {
    const CudnnAttention::Block blk{.B = shape.B,
                                    .T = shape.T,
                                    .Hq = shape.Hq,
                                    .Hkv = shape.Hkv,
                                    .D = shape.D,
                                    .q_len = b.q_len,
                                    .k_len = b.k_len,
                                    .causal = b.causal};
    for (const bool backward : {false, true}) {
      const int64_t w = attention_->block_workspace_needed(blk, backward);
      if (w < 0)
        throw std::runtime_error("CUDA backend: cuDNN cannot run ring attention's " +
                                 std::string(backward ? "backward" : "forward") + " block (" +
                                 block_dims(shape, b.q_len, b.k_len, b.causal) + "): " + attention_->last_rejection() +
                                 "; no own kernel runs ring attention blocks, so parallelism.cp > 1 cannot run this "
                                 "model on this GPU (set parallelism.cp=1)");
      const size_t scratch = backward ? bwd_scratch_bytes(shape, b.q_len, b.k_len) : fwd_scratch_bytes(shape, b.q_len);
      need = std::max(need, scratch + size_t(w) + 256);
    }
  }
  grow_workspace(need, "ring attention's cuDNN blocks (parallelism.cp)");
  return {.path = "cudnn", .workspace_bytes = int64_t(need)};
#else
  throw std::runtime_error(
      "CUDA backend: ring attention (parallelism.cp > 1) runs cuDNN's fused attention, and this build has no cuDNN "
      "(RECIPE_WITH_CUDNN); no own kernel runs its blocks");
#endif
}

void CudaBackend::attention_block_fwd(const AttentionBlockFwdArgs& a) {
  const char* op = "attention_block_fwd";
  const AttentionShape& sh = a.shape;
  check_block(op, a.qkv, a.kv, a.out, a.lse, sh, a.q_begin, a.q_len, a.k_begin, a.k_len, a.causal);
  if (a.q_len == 0 || a.k_len == 0 || sh.B == 0) return;  // no query, or no key to merge
#ifdef RECIPE_WITH_CUDNN
  if (attention_) {
    const int64_t row = int64_t(sh.Hq + 2 * sh.Hkv) * sh.D;
    Workspace ws = workspace();
    void* blk = ws.take(size_t(sh.B) * size_t(a.q_len) * size_t(sh.Hq) * size_t(sh.D) * 2, "attention block out");
    auto* blk_lse = static_cast<float*>(
        ws.take(size_t(sh.B) * size_t(sh.Hq) * size_t(a.q_len) * sizeof(float), "attention block lse"));
    const CudnnAttention::Block b = cudnn_block(sh, a.q_len, a.k_len, a.causal);
    const char* q_rows = rows_from(a.qkv, a.q_begin, row);
    const char* kv_rows = rows_from(a.kv, a.k_begin, row);
    if (attention_->block_forward(blk, blk_lse, q_rows, kv_rows, b, ws)) {
      attention_block_merge(a.out.ptr, a.lse.as<float>(), blk, blk_lse, sh.B, sh.T, sh.Hq, sh.D, a.q_begin, a.q_len,
                            a.merge, stream_);
      ++cudnn_calls_;
      return;
    }
    bad_arg(op, "cuDNN cannot run the block (" + block_dims(sh, a.q_len, a.k_len, a.causal) +
                    "): " + attention_->last_rejection() + "; ring attention blocks have no own kernel");
  }
#endif
  bad_arg(op, "ring attention blocks run only through cuDNN, which this backend does not have");
}

void CudaBackend::attention_block_bwd(const AttentionBlockBwdArgs& a) {
  const char* op = "attention_block_bwd";
  const AttentionShape& sh = a.shape;
  check_block(op, a.qkv, a.kv, a.out, a.lse, sh, a.q_begin, a.q_len, a.k_begin, a.k_len, a.causal);
  expect(op, "dq", a.dq, DType::bf16);
  expect(op, "dkv", a.dkv, DType::bf16);
  expect(op, "dout", a.dout, DType::bf16);
  expect_numel(op, "dq", a.dq, a.qkv.numel());
  expect_numel(op, "dkv", a.dkv, a.qkv.numel());
  expect_numel(op, "dout", a.dout, a.out.numel());
  if (a.q_len == 0 || a.k_len == 0 || sh.B == 0) return;  // no pair of the block: nothing to add
#ifdef RECIPE_WITH_CUDNN
  if (attention_) {
    const int64_t row = int64_t(sh.Hq + 2 * sh.Hkv) * sh.D, orow = int64_t(sh.Hq) * sh.D;
    const int64_t kv_width = int64_t(2 * sh.Hkv) * sh.D;
    Workspace ws = workspace();
    auto* lse_rows = static_cast<float*>(
        ws.take(size_t(sh.B) * size_t(sh.Hq) * size_t(a.q_len) * sizeof(float), "attention block lse rows"));
    void* dq_blk = ws.take(size_t(sh.B) * size_t(a.q_len) * size_t(orow) * 2, "attention block dq");
    void* dkv_blk = ws.take(size_t(sh.B) * size_t(a.k_len) * size_t(kv_width) * 2, "attention block dkv");
    // The final lse of the query rows, compact: (B·Hq) runs of q_len floats, T apart in lse.
    RECIPE_CUDA_CHECK(cudaMemcpy2DAsync(lse_rows, size_t(a.q_len) * sizeof(float), a.lse.as<float>() + a.q_begin,
                                        size_t(sh.T) * sizeof(float), size_t(a.q_len) * sizeof(float),
                                        size_t(sh.B) * size_t(sh.Hq), cudaMemcpyDeviceToDevice, stream_));
    const CudnnAttention::Block b = cudnn_block(sh, a.q_len, a.k_len, a.causal);
    const char* q_rows = rows_from(a.qkv, a.q_begin, row);
    const char* kv_rows = rows_from(a.kv, a.k_begin, row);
    const char* out_rows = rows_from(a.out, a.q_begin, orow);
    const char* dout_rows = rows_from(a.dout, a.q_begin, orow);
    if (attention_->block_backward(dq_blk, dkv_blk, dout_rows, q_rows, kv_rows, out_rows, lse_rows, b, ws)) {
      // dq's q heads of the query rows; dkv's k and v heads (contiguous in a row) of the key rows.
      add_rows(static_cast<char*>(a.dq.ptr) + size_t(a.q_begin) * size_t(row) * 2, int64_t(sh.T) * row, row, dq_blk,
               sh.B, a.q_len, int(orow), stream_);
      add_rows(static_cast<char*>(a.dkv.ptr) + (size_t(a.k_begin) * size_t(row) + size_t(orow)) * 2,
               int64_t(sh.T) * row, row, dkv_blk, sh.B, a.k_len, int(kv_width), stream_);
      ++cudnn_calls_;
      return;
    }
    bad_arg(op, "cuDNN cannot run the block (" + block_dims(sh, a.q_len, a.k_len, a.causal) +
                    "): " + attention_->last_rejection() + "; ring attention blocks have no own kernel");
  }
#endif
  bad_arg(op, "ring attention blocks run only through cuDNN, which this backend does not have");
}

}  // namespace recipe::kernels::cuda
