// RoPE in place on the packed qkv buffer [B, T, (Hq + 2·Hkv)·D]: q and k heads rotate pairs
// (i, i + D/2) by angle t·inv_freq[i] ("rotate_half"; inv_freq the run's table f64 [D/2] in
// device memory, ops.hpp RopeArgs); v heads are untouched. The angle is
// computed in double: with --use_fast_math single-precision sin/cos lose accuracy for the large
// arguments long sequences produce. Backward rotates the gradient by the negative angle (the
// transpose of a rotation). With per-sample positions (packed samples, ops.hpp) a token's angle
// uses pos[b·T + t] instead of t (the table's row pos[b·T + t]); pos = nullptr is the unpacked op.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

__global__ void rope_kernel(bf16* qkv, const int32_t* pos, int B, int T, int Hq, int Hkv, int D,
                            const double* __restrict__ inv_freq, bool backward) {
  const int half = D / 2, heads = Hq + Hkv, row = (Hq + 2 * Hkv) * D;
  const int64_t total = int64_t(B) * T * heads * half;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int i = int(idx % half);
    int64_t rest = idx / half;
    int h = int(rest % heads);
    int64_t bt = rest / heads;  // b·T + t
    int t = pos ? pos[bt] : int(bt % T);
    const float2 cs = rope_cos_sin(t, i, inv_freq);
    float c = cs.x, s = backward ? -cs.y : cs.y;
    bf16* p = qkv + bt * row + int64_t(h) * D;  // q heads then k heads are contiguous
    float x1 = to_f(p[i]), x2 = to_f(p[i + half]);
    p[i] = __float2bfloat16_rn(x1 * c - x2 * s);
    p[i + half] = __float2bfloat16_rn(x2 * c + x1 * s);
  }
}

// The angles of rope_kernel as a table, computed once per (rows, D, inv_freq) with the same double
// arithmetic and rounded to float the same way: cs[t·half + i] = (cos, sin) of t·inv_freq[i].
__global__ void rope_table_kernel(float2* cs, int rows, int D, const double* __restrict__ inv_freq) {
  const int half = D / 2;
  const int64_t total = int64_t(rows) * half;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int i = int(idx % half), t = int(idx / half);
    cs[idx] = rope_cos_sin(t, i, inv_freq);
  }
}

// rope_kernel reading the table, 8 pairs per thread with 16-byte loads (half % 8 == 0): the
// double-precision sincos per element made the scalar kernel compute-bound at ~0.6 TB/s. The
// float arithmetic per element is rope_kernel's, so the results are bitwise the same. A position
// outside the table's `rows` (context parallelism passes whole-sample positions, up to cp·T − 1)
// computes its angles as rope_kernel does instead of reading past the table.
__global__ void rope_table_apply_kernel(bf16* qkv, const float2* __restrict__ cs, int rows,
                                        const double* __restrict__ inv_freq, const int32_t* pos, int B, int T, int Hq,
                                        int Hkv, int D, bool backward) {
  const int half = D / 2, chunks = half / 8, heads = Hq + Hkv, row = (Hq + 2 * Hkv) * D;
  const int64_t total = int64_t(B) * T * heads * chunks;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int i0 = int(idx % chunks) * 8;
    const int64_t rest = idx / chunks;
    const int h = int(rest % heads);
    const int64_t bt = rest / heads;  // b·T + t
    const int t = pos ? pos[bt] : int(bt % T);
    bf16* p = qkv + bt * row + int64_t(h) * D;
    float x1[8], x2[8], y1[8], y2[8];
    load8(p + i0, x1);
    load8(p + half + i0, x2);
    const bool in_table = t >= 0 && t < rows;
    const float2* a = cs + int64_t(in_table ? t : 0) * half + i0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float2 v = in_table ? a[k] : rope_cos_sin(t, i0 + k, inv_freq);
      const float c = v.x, s = backward ? -v.y : v.y;
      y1[k] = x1[k] * c - x2[k] * s;
      y2[k] = x2[k] * c + x1[k] * s;
    }
    store8(p + i0, y1);
    store8(p + half + i0, y2);
  }
}

}  // namespace

size_t rope_table_bytes(int rows, int D) { return size_t(rows) * size_t(D / 2) * sizeof(float2); }

void rope_table(void* table, int rows, int D, const double* inv_freq, cudaStream_t s) {
  const int64_t total = int64_t(rows) * (D / 2);
  if (total <= 0) return;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 1 << 16);
  rope_table_kernel<<<unsigned(blocks), 256, 0, s>>>(static_cast<float2*>(table), rows, D, inv_freq);
  RECIPE_CUDA_CHECK_LAUNCH("rope_table");
}

bool rope_table_fits(const void* qkv, int D) { return D % 16 == 0 && (reinterpret_cast<uintptr_t>(qkv) & 15u) == 0; }

void rope_bf16_table(void* qkv, const void* table, int rows, const double* inv_freq, const int32_t* pos, int B, int T,
                     int Hq, int Hkv, int D, bool backward, cudaStream_t s) {
  const int64_t total = int64_t(B) * T * (Hq + Hkv) * (D / 16);
  if (total <= 0) return;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 1 << 20);
  rope_table_apply_kernel<<<unsigned(blocks), 256, 0, s>>>(static_cast<bf16*>(qkv), static_cast<const float2*>(table),
                                                           rows, inv_freq, pos, B, T, Hq, Hkv, D, backward);
  RECIPE_CUDA_CHECK_LAUNCH("rope");
}

void rope_bf16(void* qkv, const int32_t* pos, int B, int T, int Hq, int Hkv, int D, const double* inv_freq,
               bool backward, cudaStream_t s) {
  int64_t total = int64_t(B) * T * (Hq + Hkv) * (D / 2);
  if (total <= 0) return;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 1 << 20) blocks = 1 << 20;
  rope_kernel<<<unsigned(blocks), 256, 0, s>>>(static_cast<bf16*>(qkv), pos, B, T, Hq, Hkv, D, inv_freq, backward);
  RECIPE_CUDA_CHECK_LAUNCH("rope");
}

}  // namespace recipe::kernels::cuda
