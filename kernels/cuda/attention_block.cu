// The two small kernels around cuDNN's ring-attention blocks (ops.hpp AttentionBlockFwdArgs,
// cudnn_attention.hpp): merging a block's result into the queries' running (out, lse), and adding
// a block's compact gradients into the packed dq / dkv rows (cuDNN overwrites its outputs; the op
// contract accumulates).
//
// Merge: one warp per (b, h, query row i). With a = lse[b, h, q_begin + i] (the running value),
// c = lse_blk[b, h, i] (the block's), n = logaddexp(a, c):
//   out[b, q_begin + i, h·D + d] = e^(a − n)·out + e^(c − n)·blk[b, i, h·D + d],   lse = n,
// in f32, rounded once into the bf16 out; merge = false copies the block's result. Every lane
// reads both lse values before lane 0 writes the new one (one warp owns the row), so the update
// is in place without a race.
#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kWarps = 8;

__global__ void block_merge_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ blk,
                                   const float* __restrict__ blk_lse, int B, int T, int Hq, int D, int q_begin,
                                   int q_len, bool merge) {
  const int64_t task = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (task >= int64_t(B) * Hq * q_len) return;
  const int i = int(task % q_len);
  const int64_t bh = task / q_len;
  const int h = int(bh % Hq);
  const int64_t b = bh / Hq;
  const int t = q_begin + i;
  float* lse_t = lse + bh * T + t;
  const float c = blk_lse[bh * q_len + i];
  bf16* dst = out + (b * T + t) * int64_t(Hq) * D + int64_t(h) * D;
  const bf16* src = blk + (b * q_len + i) * int64_t(Hq) * D + int64_t(h) * D;
  if (!merge) {
    for (int d = lane; d < D; d += 32) dst[d] = src[d];
    if (lane == 0) *lse_t = c;
    return;
  }
  const float a = *lse_t;
  const float m = fmaxf(a, c);
  __syncwarp();
  if (m == -INFINITY) return;  // neither holds a key: nothing to merge
  const float n = m + logf(expf(a - m) + expf(c - m));
  const float w_old = expf(a - n), w_blk = expf(c - n);
  for (int d = lane; d < D; d += 32) dst[d] = __float2bfloat16_rn(w_old * to_f(dst[d]) + w_blk * to_f(src[d]));
  if (lane == 0) *lse_t = n;
}

// dst[b·dst_batch + r·dst_row + j] += src[(b·rows + r)·width + j] for j < width.
__global__ void add_rows_kernel(bf16* __restrict__ dst, int64_t dst_batch, int64_t dst_row,
                                const bf16* __restrict__ src, int rows, int width, int64_t n) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const int j = int(k % width);
  const int64_t br = k / width;
  const int64_t r = br % rows, b = br / rows;
  bf16& d = dst[b * dst_batch + r * dst_row + j];
  d = __float2bfloat16_rn(to_f(d) + to_f(src[k]));
}

}  // namespace

void attention_block_merge(void* out, float* lse, const void* blk, const float* blk_lse, int B, int T, int Hq, int D,
                           int q_begin, int q_len, bool merge, cudaStream_t s) {
  const int64_t rows = int64_t(B) * Hq * q_len;
  if (rows == 0) return;
  block_merge_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(
      static_cast<bf16*>(out), lse, static_cast<const bf16*>(blk), blk_lse, B, T, Hq, D, q_begin, q_len, merge);
  RECIPE_CUDA_CHECK(cudaGetLastError());
}

void add_rows(void* dst, int64_t dst_batch, int64_t dst_row, const void* src, int B, int rows, int width,
              cudaStream_t s) {
  const int64_t n = int64_t(B) * rows * width;
  if (n == 0) return;
  constexpr int kThreads = 256;
  add_rows_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      static_cast<bf16*>(dst), dst_batch, dst_row, static_cast<const bf16*>(src), rows, width, n);
  RECIPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace recipe::kernels::cuda
