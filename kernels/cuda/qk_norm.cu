// qk-norm (Qwen3): RMSNorm over each D-wide q and k head vector of packed qkv rows
// [rows, (Hq + 2·Hkv)·D] (ops.hpp QkNormFwdArgs / QkNormBwdArgs). Head vectors of one row are
// contiguous, q heads first, then k heads, so vector v = n·(Hq + Hkv) + h starts at column h·D of
// row n whichever of the two it is; the v heads are copied as they are (a strided 2D copy).
//
// Forward and the input gradient: one warp per head vector (D ≤ 256: at most 8 columns a lane),
// statistics in f32 (a warp sum of x²); each lane reads all of its columns of the vector before it
// writes them, so out may alias inp and dinp may alias dout. The backward recomputes rstd from inp
// and leaves it, f32 per vector, in the workspace for the weight gradient, which runs before the
// input gradient (dinp may overwrite the dout it reads).
// Weight gradients, deterministic (no float atomics): block (k, part) sums, thread per column c,
// the term dout·x·rstd over the vectors of `part` (q heads or k heads) in the rows of chunk k, in
// (row, head) order, into a partial row [part][k][D] of the workspace; a second kernel adds each
// column's partials in chunk order and writes (first write of the step) or adds the result.
#include <algorithm>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kWarps = 8;        // head vectors per block (forward, input gradient)
constexpr int kMaxChunks = 256;  // row chunks of the weight gradient's partial sums

struct QkGeom {
  int64_t rows, W;   // W = (Hq + 2·Hkv)·D
  int Hq, heads, D;  // heads = Hq + Hkv (the normalised ones)
};

__global__ void qk_norm_fwd_kernel(bf16* out, const bf16* inp, const bf16* wq, const bf16* wk, QkGeom g, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t v = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (v >= g.rows * g.heads) return;
  const int64_t n = v / g.heads;
  const int h = int(v % g.heads);
  const int64_t off = n * g.W + int64_t(h) * g.D;
  const bf16* w = h < g.Hq ? wq : wk;
  float ss = 0.f;
  for (int c = lane; c < g.D; c += 32) {
    const float x = to_f(inp[off + c]);
    ss += x * x;
  }
  const float r = rsqrtf(warp_sum(ss) / float(g.D) + eps);
  for (int c = lane; c < g.D; c += 32) out[off + c] = __float2bfloat16_rn(to_f(inp[off + c]) * r * to_f(w[c]));
}

__global__ void qk_norm_dinp_kernel(bf16* dinp, float* rstd_out, const bf16* dout, const bf16* inp, const bf16* wq,
                                    const bf16* wk, QkGeom g, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t v = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (v >= g.rows * g.heads) return;
  const int64_t n = v / g.heads;
  const int h = int(v % g.heads);
  const int64_t off = n * g.W + int64_t(h) * g.D;
  const bf16* w = h < g.Hq ? wq : wk;
  float ss = 0.f;
  for (int c = lane; c < g.D; c += 32) {
    const float x = to_f(inp[off + c]);
    ss += x * x;
  }
  const float r = rsqrtf(warp_sum(ss) / float(g.D) + eps);
  if (lane == 0) rstd_out[v] = r;
  if (!dinp) return;
  float s = 0.f;  // Σ dŷ·x̂
  for (int c = lane; c < g.D; c += 32) s += to_f(dout[off + c]) * to_f(w[c]) * (to_f(inp[off + c]) * r);
  const float mean = warp_sum(s) / float(g.D);
  // Up to 8 columns per lane held in registers (D ≤ 256), so every read of dout precedes the writes.
  constexpr int kMaxPerLane = 8;
  float dx[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + 32 * i;
    if (c < g.D) {
      const float xhat = to_f(inp[off + c]) * r;
      dx[i] = r * (to_f(dout[off + c]) * to_f(w[c]) - xhat * mean);
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + 32 * i;
    if (c < g.D) dinp[off + c] = __float2bfloat16_rn(dx[i]);
  }
}

// grid (chunks, 2): part 0 = q heads [0, Hq), part 1 = k heads [Hq, heads). Thread c < D.
__global__ void qk_norm_dweight_partial_kernel(float* partial, const bf16* dout, const bf16* inp, const float* rstd,
                                               QkGeom g, int chunks) {
  const int c = threadIdx.x;
  const int k = blockIdx.x, part = blockIdx.y;
  if (c >= g.D) return;
  const int h0 = part == 0 ? 0 : g.Hq, h1 = part == 0 ? g.Hq : g.heads;
  const int64_t r0 = g.rows * k / chunks, r1 = g.rows * (k + 1) / chunks;
  float acc = 0.f;
  for (int64_t n = r0; n < r1; ++n)
    for (int h = h0; h < h1; ++h) {
      const int64_t off = n * g.W + int64_t(h) * g.D + c;
      acc += to_f(dout[off]) * to_f(inp[off]) * rstd[n * g.heads + h];
    }
  partial[(int64_t(part) * chunks + k) * g.D + c] = acc;
}

__global__ void qk_norm_dweight_finish_kernel(float* dwq, float* dwk, const float* partial, int D, int chunks,
                                              bool overwrite_q, bool overwrite_k) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int part = blockIdx.y;
  float* dw = part == 0 ? dwq : dwk;
  if (c >= D || !dw) return;
  float s = 0.f;
  for (int k = 0; k < chunks; ++k) s += partial[(int64_t(part) * chunks + k) * D + c];
  const bool overwrite = part == 0 ? overwrite_q : overwrite_k;
  dw[c] = overwrite ? s : dw[c] + s;
}

// The v heads of src into dst (rows of W, the last Hkv·D columns), unless they are one tensor.
void copy_v_heads(void* dst, const void* src, const QkGeom& g, cudaStream_t s) {
  if (dst == src || g.rows == 0) return;
  const size_t pitch = size_t(g.W) * sizeof(bf16), off = size_t(g.heads) * size_t(g.D) * sizeof(bf16);
  RECIPE_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst) + off, pitch, static_cast<const char*>(src) + off, pitch,
                                      pitch - off, size_t(g.rows), cudaMemcpyDeviceToDevice, s));
}

QkGeom geom(int64_t rows, int Hq, int Hkv, int D) { return {rows, int64_t(Hq + 2 * Hkv) * D, Hq, Hq + Hkv, D}; }

}  // namespace

void qk_norm_fwd(void* out, const void* inp, const void* wq, const void* wk, int64_t rows, int Hq, int Hkv, int D,
                 float eps, cudaStream_t s) {
  const QkGeom g = geom(rows, Hq, Hkv, D);
  if (rows <= 0) return;
  const int64_t vectors = rows * g.heads;
  qk_norm_fwd_kernel<<<unsigned((vectors + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(inp), static_cast<const bf16*>(wq),
      static_cast<const bf16*>(wk), g, eps);
  RECIPE_CUDA_CHECK_LAUNCH("qk_norm_fwd");
  copy_v_heads(out, inp, g, s);
}

void qk_norm_bwd(void* dinp, float* dwq, float* dwk, const void* dout, const void* inp, const void* wq, const void* wk,
                 int64_t rows, int Hq, int Hkv, int D, float eps, bool overwrite_q, bool overwrite_k, Workspace ws,
                 cudaStream_t s) {
  const QkGeom g = geom(rows, Hq, Hkv, D);
  if (rows <= 0 || (!dinp && !dwq && !dwk)) return;
  const int64_t vectors = rows * g.heads;
  const unsigned grid = unsigned((vectors + kWarps - 1) / kWarps);
  auto* rstd = static_cast<float*>(ws.take(size_t(vectors) * sizeof(float), "qk_norm_bwd rstd"));
  auto launch_dinp = [&](bf16* out) {
    qk_norm_dinp_kernel<<<grid, 32 * kWarps, 0, s>>>(out, rstd, static_cast<const bf16*>(dout),
                                                     static_cast<const bf16*>(inp), static_cast<const bf16*>(wq),
                                                     static_cast<const bf16*>(wk), g, eps);
    RECIPE_CUDA_CHECK_LAUNCH("qk_norm_bwd (input gradient)");
  };
  // dinp may alias dout, which the weight gradient reads: the weight gradient runs first, from the
  // rstd a first pass of the same kernel leaves (without writing dinp), then the input gradient.
  if (dwq || dwk) {
    launch_dinp(nullptr);
    const int chunks = int(std::min<int64_t>(kMaxChunks, rows));
    auto* partial = static_cast<float*>(
        ws.take(size_t(2) * size_t(chunks) * size_t(D) * sizeof(float), "qk_norm_bwd weight-gradient partials"));
    const int threads = (D + 31) / 32 * 32;
    qk_norm_dweight_partial_kernel<<<dim3(unsigned(chunks), 2), threads, 0, s>>>(
        partial, static_cast<const bf16*>(dout), static_cast<const bf16*>(inp), rstd, g, chunks);
    RECIPE_CUDA_CHECK_LAUNCH("qk_norm_bwd (weight-gradient partials)");
    qk_norm_dweight_finish_kernel<<<dim3(unsigned((D + 127) / 128), 2), 128, 0, s>>>(dwq, dwk, partial, D, chunks,
                                                                                     overwrite_q, overwrite_k);
    RECIPE_CUDA_CHECK_LAUNCH("qk_norm_bwd (weight gradient)");
  }
  if (!dinp) return;
  launch_dinp(static_cast<bf16*>(dinp));
  copy_v_heads(dinp, dout, g, s);
}

}  // namespace recipe::kernels::cuda
