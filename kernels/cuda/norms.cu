// LayerNorm / RMSNorm forward (optionally fused with the residual add) and backward.
// Forward: one warp per row, statistics in f32 (two passes over the row: mean, then the centred
// variance, which is exact where E[x²]-E[x]² cancels). The fused variant writes the bf16 residual
// and normalizes the rounded value, so forward and backward see the same input.
// Backward: one pass over the rows computes dinp and per-block partial column sums of the
// parameter gradients (and of the new dinp), then a small kernel adds the partials in a fixed
// order (deterministic, no float atomics); see the comment above norm_bwd_fused_kernel.
#include <algorithm>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Loads VEC consecutive values at column c (VEC is 8 with aligned rows, else 1).
template <int VEC>
__device__ __forceinline__ void loadv(const bf16* p, float (&x)[VEC]) {
  if constexpr (VEC == 8) {
    load8(p, x);
  } else {
    x[0] = to_f(p[0]);
  }
}
template <int VEC>
__device__ __forceinline__ void storev(bf16* p, const float (&x)[VEC]) {
  if constexpr (VEC == 8) {
    store8(p, x);
  } else {
    p[0] = __float2bfloat16_rn(x[0]);
  }
}

template <int VEC>
__global__ void norm_fwd_kernel(bf16* out, float* mean_out, float* rstd_out, bf16* inp, const bf16* res_a,
                                const bf16* res_b, const bf16* weight, const bf16* bias, int64_t N, int64_t C,
                                float eps, bool rms) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= N) return;
  bf16* x = inp + row * C;
  float sum = 0.f;
  for (int64_t c = int64_t(lane) * VEC; c < C; c += 32 * VEC) {
    float v[VEC];
    if (res_a) {
      float a[VEC], b[VEC];
      loadv<VEC>(res_a + row * C + c, a);
      loadv<VEC>(res_b + row * C + c, b);
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = a[k] + b[k];
      storev<VEC>(x + c, v);
      loadv<VEC>(x + c, v);  // the rounded residual is what the norm (and backward) sees
    } else {
      loadv<VEC>(x + c, v);
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum += rms ? v[k] * v[k] : v[k];
  }
  sum = warp_sum(sum);
  float mean = 0.f, rstd;
  if (rms) {
    rstd = rsqrtf(sum / float(C) + eps);
  } else {
    mean = sum / float(C);
    float var = 0.f;
    for (int64_t c = int64_t(lane) * VEC; c < C; c += 32 * VEC) {
      float v[VEC];
      loadv<VEC>(x + c, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) var += (v[k] - mean) * (v[k] - mean);
    }
    var = warp_sum(var);
    rstd = rsqrtf(var / float(C) + eps);
  }
  for (int64_t c = int64_t(lane) * VEC; c < C; c += 32 * VEC) {
    float v[VEC], w[VEC], b[VEC], o[VEC];
    loadv<VEC>(x + c, v);
    loadv<VEC>(weight + c, w);
    if (bias) loadv<VEC>(bias + c, b);
#pragma unroll
    for (int k = 0; k < VEC; ++k) o[k] = (v[k] - mean) * rstd * w[k] + (bias ? b[k] : 0.f);
    storev<VEC>(out + row * C + c, o);
  }
  if (lane == 0) {
    if (mean_out) mean_out[row] = mean;
    if (rstd_out) rstd_out[row] = rstd;
  }
}

// ---- Backward: one pass over the rows ----
//
// The backward is memory-bound. dinp needs two reductions along each row (Σ g and Σ g·x̂, with
// g = dout·w), the parameter gradients need reductions down the columns (Σ_r dout·x̂, Σ_r dout),
// and dinp_sum (the bias gradient of the linear that fed this residual) is a column sum of the new
// dinp. All of them are computed from ONE read of dout, inp and dinp: a warp holds its slice of a
// row in registers, reduces along the row with shuffles, writes dinp, and adds its columns'
// contributions to per-lane column accumulators that stay in registers for all rows of the block.
//
// Work split of norm_bwd_fused_kernel, grid (chunks, slabs), kWarps warps per block:
//   - block x takes the chunk of rows [x·rows_per_chunk, (x+1)·rows_per_chunk); its warp w takes
//     the rows r0+w, r0+w+kWarps, ... in that order (fixed: no dynamic scheduling);
//   - block y takes the slab of columns [y·W, (y+1)·W), W = 32·VEC·SLOTS (1024 for aligned rows);
//     lane l owns, in each slot s < SLOTS, the VEC columns starting at slab0 + (32·s + l)·VEC.
// At the end the block folds its warps' accumulators in shared memory, in warp order, and writes
// one partial row per requested output. Partial buffers (workspace), one per requested output
// among dweight, dbias, dinp_sum, each f32 [chunks][C]:
//     part[k][c] = Σ over the rows of chunk k of that output's term at column c.
// norm_bwd_finalize_kernel then sums each column over k (16 row lanes take k ≡ lane mod 16 in
// ascending order, folded in lane order) and writes or adds the result. Every sum has a fixed
// order whatever the timing, so results are bitwise repeatable; no float atomics.
// With about two blocks per SM there are ~264 chunks: the partials (3 × 264 × C floats, 3 MB for
// C = 1024) are small next to the rows (N × C × 2 B per tensor).
//
// Rows wider than one slab (C > 1024 aligned, C > 256 scalar): the row reductions span blocks, so
// norm_bwd_row_stats_kernel first writes (mean g, mean g·x̂) per row to the workspace ([N] float2);
// that reads dout and inp once more, but only for such wide rows.
//
// dinp may alias dout: each lane loads all of its columns of a row before it stores the same
// columns, and the row statistics never read dinp.

constexpr int kBwdWarps = 4;        // warps per block: ~240 registers per thread fit 2 blocks/SM
constexpr int kBwdBlocksPerSm = 2;  // enough rows in flight to saturate HBM, few partial rows
// How many of its own rows ahead a warp asks L2 to fetch (prefetch.global.L2: no registers), so
// that more than the one row held in registers is in flight; 0 = off.
constexpr int kBwdPrefetchRows = 1;
constexpr int kFinCols = 32, kFinRowLanes = 16;

// VEC consecutive bf16 values of a row, kept packed in registers (16 B or 2 B) until used.
template <int VEC>
struct alignas(2 * VEC) RowVec {
  bf16 v[VEC];
  __device__ __forceinline__ void load(const bf16* p) { *this = *reinterpret_cast<const RowVec*>(p); }
  __device__ __forceinline__ void store(bf16* p) const { *reinterpret_cast<RowVec*>(p) = *this; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = __ushort_as_bfloat16(0);
  }
  __device__ __forceinline__ float operator[](int i) const { return __bfloat162float(v[i]); }
};

struct NormBwdArgs {
  bf16* dinp;  // null: parameter gradients only
  const bf16* dout;
  const bf16* inp;
  const bf16* weight;
  const float* mean;  // null for RMSNorm
  const float* rstd;
  const float2* row_stats;  // [N] (mean g, mean g·x̂) when C spans several slabs, else null
  float* part_w;            // [chunks][C] partials; null = output not requested
  float* part_b;
  float* part_s;
  int64_t N, C, rows_per_chunk;
  int prefetch_rows;
  bool rms;
};

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Folds the kWarps per-warp accumulators of this block (warp order) into partial row blockIdx.x.
template <int kWarps, int VEC, int SLOTS>
__device__ __forceinline__ void write_block_partial(float (&fold)[kWarps][32 * VEC * SLOTS],
                                                    const float (&acc)[SLOTS][VEC], float* part, int64_t slab0,
                                                    int64_t C) {
  constexpr int kSlab = 32 * VEC * SLOTS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous output's fold has been read
#pragma unroll
  for (int s = 0; s < SLOTS; ++s)
#pragma unroll
    for (int k = 0; k < VEC; ++k) fold[warp][(s * 32 + lane) * VEC + k] = acc[s][k];
  __syncthreads();
  float* row = part + int64_t(blockIdx.x) * C + slab0;
  for (int i = threadIdx.x; i < kSlab && slab0 + i < C; i += kWarps * 32) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) t += fold[w][i];
    row[i] = t;
  }
}

template <int kWarps, int VEC, int SLOTS>
__global__ void __launch_bounds__(kWarps * 32) norm_bwd_fused_kernel(const NormBwdArgs a) {
  constexpr int kSlab = 32 * VEC * SLOTS;
  __shared__ __align__(16) float fold[kWarps][kSlab];
  __shared__ __align__(16) float w_sh[kSlab];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t C = a.C, slab0 = int64_t(blockIdx.y) * kSlab;
  const int64_t r0 = int64_t(blockIdx.x) * a.rows_per_chunk;
  const int64_t r1 = min(a.N, r0 + a.rows_per_chunk);
  const float inv_c = 1.f / float(C);

  // VEC == 8 only when C % 8 == 0, so a vector that starts inside the row is whole.
  int64_t col[SLOTS];
  bool in[SLOTS];
#pragma unroll
  for (int s = 0; s < SLOTS; ++s) {
    col[s] = slab0 + int64_t(s * 32 + lane) * VEC;
    in[s] = col[s] < C;
  }
  // The slab's weights as f32 in shared memory (registers are kept for the accumulators); lane l
  // reads w_sh[(32·s + l)·VEC + k], the layout of its columns.
  for (int i = threadIdx.x; i < kSlab; i += kWarps * 32) w_sh[i] = slab0 + i < C ? to_f(a.weight[slab0 + i]) : 0.f;
  __syncthreads();
  const float* w_lane = w_sh + lane * VEC;  // slot s, element k at w_lane[s·32·VEC + k]
  float acc_w[SLOTS][VEC], acc_b[SLOTS][VEC], acc_s[SLOTS][VEC];
#pragma unroll
  for (int s = 0; s < SLOTS; ++s)
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[s][k] = acc_b[s][k] = acc_s[s][k] = 0.f;

  for (int64_t r = r0 + warp; r < r1; r += kWarps) {
    const bf16* drow = a.dout + r * C;
    const bf16* xrow = a.inp + r * C;
    bf16* orow = a.dinp ? a.dinp + r * C : nullptr;
    RowVec<VEC> d[SLOTS], x[SLOTS], o[SLOTS];
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) {
      if (in[s]) {
        d[s].load(drow + col[s]);
        x[s].load(xrow + col[s]);
        if (orow) o[s].load(orow + col[s]);
      } else {
        d[s].zero();
        x[s].zero();
        o[s].zero();
      }
    }
    const float mu = a.rms ? 0.f : a.mean[r], rs = a.rstd[r];
    if (a.prefetch_rows > 0 && r + a.prefetch_rows * kWarps < r1) {
      const int64_t ahead = int64_t(a.prefetch_rows) * kWarps * C;
#pragma unroll
      for (int s = 0; s < SLOTS; ++s) {
        if (!in[s]) continue;
        prefetch_l2(drow + ahead + col[s]);
        prefetch_l2(xrow + ahead + col[s]);
        if (orow) prefetch_l2(orow + ahead + col[s]);
      }
    }

    if (orow) {
      float mean_g, mean_gx;
      if (a.row_stats) {
        const float2 st = a.row_stats[r];
        mean_g = st.x;
        mean_gx = st.y;
      } else {
        float sum_g = 0.f, sum_gx = 0.f;
#pragma unroll
        for (int s = 0; s < SLOTS; ++s)
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            const float g = d[s][k] * w_lane[s * 32 * VEC + k];
            sum_g += g;
            sum_gx += g * ((x[s][k] - mu) * rs);
          }
        mean_g = a.rms ? 0.f : warp_sum(sum_g) * inv_c;
        mean_gx = warp_sum(sum_gx) * inv_c;
      }
#pragma unroll
      for (int s = 0; s < SLOTS; ++s) {
        if (!in[s]) continue;
        RowVec<VEC> out;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float xhat = (x[s][k] - mu) * rs;
          const float g = d[s][k] * w_lane[s * 32 * VEC + k];
          out.v[k] = __float2bfloat16_rn(o[s][k] + rs * (g - mean_g - xhat * mean_gx));
          acc_s[s][k] += out[k];  // the rounded value: exactly what is stored
        }
        out.store(orow + col[s]);
      }
    }
#pragma unroll
    for (int s = 0; s < SLOTS; ++s)
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        acc_w[s][k] += d[s][k] * ((x[s][k] - mu) * rs);
        acc_b[s][k] += d[s][k];
      }
  }

  // Uniform over the block: every block writes a partial row for each requested output.
  if (a.part_w) write_block_partial<kWarps, VEC, SLOTS>(fold, acc_w, a.part_w, slab0, C);
  if (a.part_b) write_block_partial<kWarps, VEC, SLOTS>(fold, acc_b, a.part_b, slab0, C);
  if (a.part_s) write_block_partial<kWarps, VEC, SLOTS>(fold, acc_s, a.part_s, slab0, C);
}

// (mean g, mean g·x̂) of each row, for rows wider than one slab; one warp per row, same arithmetic
// as the in-register path.
template <int VEC>
__global__ void norm_bwd_row_stats_kernel(float2* stats, const bf16* dout, const bf16* inp, const bf16* weight,
                                          const float* mean, const float* rstd, int64_t N, int64_t C, bool rms) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= N) return;
  const float mu = rms ? 0.f : mean[row], rs = rstd[row];
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t c = int64_t(lane) * VEC; c < C; c += 32 * VEC) {
    RowVec<VEC> d, x, w;
    d.load(dout + row * C + c);
    x.load(inp + row * C + c);
    w.load(weight + c);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float g = d[k] * w[k];
      sum_g += g;
      sum_gx += g * ((x[k] - mu) * rs);
    }
  }
  const float inv_c = 1.f / float(C);
  sum_g = warp_sum(sum_g);
  sum_gx = warp_sum(sum_gx);
  if (lane == 0) stats[row] = make_float2(rms ? 0.f : sum_g * inv_c, sum_gx * inv_c);
}

// One requested output: dst[c] (+)= Σ_k part[k][c].
struct NormBwdFinalizeJob {
  const float* part;
  float* dst;
  bool overwrite;
};
struct NormBwdFinalizeJobs {
  NormBwdFinalizeJob job[3];
};

// Grid (column tiles of kFinCols, one y per job); block (kFinCols, kFinRowLanes).
__global__ void norm_bwd_finalize_kernel(const NormBwdFinalizeJobs jobs, int64_t chunks, int64_t C) {
  __shared__ float fold[kFinRowLanes][kFinCols + 1];
  // (Selected, not indexed: indexing the parameter array would copy it to local memory.)
  const NormBwdFinalizeJob job = blockIdx.y == 0 ? jobs.job[0] : (blockIdx.y == 1 ? jobs.job[1] : jobs.job[2]);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kFinCols + tx;
  float sum = 0.f;
  if (c < C) {
#pragma unroll 4
    for (int64_t k = ty; k < chunks; k += kFinRowLanes) sum += job.part[k * C + c];
  }
  fold[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && c < C) {
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < kFinRowLanes; ++k) t += fold[k][tx];
    job.dst[c] = job.overwrite ? t : job.dst[c] + t;
  }
}

int sm_count() {
  // Only sizes the grid (results do not depend on it); queried once per process.
  static const int sms = [] {
    int n = 132, dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 132;
  }();
  return sms;
}

bool vec_ok(int64_t C, std::initializer_list<const void*> ptrs) {
  if (C % 8) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

// The launcher behind layernorm_bwd. dbias must be null for RMSNorm and dinp_sum null without
// dinp (layernorm_bwd sees to both). kWarps and blocks_per_sm are parameters so that other
// shapes can be timed; layernorm_bwd uses kBwdWarps and kBwdBlocksPerSm, the best of 4 or 8 warps
// and 1, 2 or 4 blocks per SM on an H100 (bench/results/2026-11-25-gpt3-345m.md, round 5).
template <int kWarps, int VEC, int SLOTS>
void launch_norm_bwd_shape(NormBwdArgs a, float* dweight, float* dbias, float* dinp_sum, NormGradOverwrite overwrite,
                           Workspace& ws, int blocks_per_sm, cudaStream_t s) {
  constexpr int64_t kSlab = 32 * VEC * SLOTS;
  const int64_t N = a.N, C = a.C;
  const int64_t slabs = (C + kSlab - 1) / kSlab;
  if (a.dinp && slabs > 1) {
    auto* stats = static_cast<float2*>(ws.take(size_t(N) * sizeof(float2), "norm backward"));
    const unsigned grid = unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
    norm_bwd_row_stats_kernel<VEC>
        <<<grid, 32 * kWarpsPerBlock, 0, s>>>(stats, a.dout, a.inp, a.weight, a.mean, a.rstd, N, C, a.rms);
    RECIPE_CUDA_CHECK_LAUNCH("norm_bwd_row_stats");
    a.row_stats = stats;
  }

  const int outputs = int(dweight != nullptr) + int(dbias != nullptr) + int(dinp_sum != nullptr);
  int64_t chunks = std::max<int64_t>(1, int64_t(blocks_per_sm) * sm_count() / slabs);
  chunks = std::min<int64_t>(chunks, (N + kWarps - 1) / kWarps);  // at least a row per warp
  if (outputs > 0) {  // fewer chunks if the workspace is short (take() reports a real shortfall)
    const size_t used = (ws.used + 255) & ~size_t(255);
    const size_t left = ws.bytes > used ? ws.bytes - used : 0;
    const size_t per_chunk = size_t(outputs) * size_t(C) * 4;
    chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, int64_t(left / (per_chunk + 256))));
  }
  a.rows_per_chunk = (N + chunks - 1) / chunks;
  chunks = (N + a.rows_per_chunk - 1) / a.rows_per_chunk;

  NormBwdFinalizeJobs jobs{};
  int njobs = 0;
  auto add_job = [&](float*& part, float* dst, bool ow) {
    if (!dst) return;
    part = static_cast<float*>(ws.take(size_t(chunks) * C * 4, "norm backward"));
    jobs.job[njobs++] = {part, dst, ow};
  };
  add_job(a.part_w, dweight, overwrite.dweight);
  add_job(a.part_b, dbias, overwrite.dbias);
  add_job(a.part_s, dinp_sum, overwrite.dinp_sum);

  norm_bwd_fused_kernel<kWarps, VEC, SLOTS><<<dim3(unsigned(chunks), unsigned(slabs)), kWarps * 32, 0, s>>>(a);
  RECIPE_CUDA_CHECK_LAUNCH("norm_bwd_fused");
  if (njobs > 0) {
    const dim3 grid{unsigned((C + kFinCols - 1) / kFinCols), unsigned(njobs)};
    norm_bwd_finalize_kernel<<<grid, dim3(kFinCols, kFinRowLanes), 0, s>>>(jobs, chunks, C);
    RECIPE_CUDA_CHECK_LAUNCH("norm_bwd_finalize");
  }
}

template <int kWarps>
void launch_norm_bwd(const NormBwdArgs& a, float* dweight, float* dbias, float* dinp_sum, NormGradOverwrite overwrite,
                     Workspace& ws, int blocks_per_sm, cudaStream_t s) {
  // Slots per lane: the fewest that hold a row of C (up to 4 vectors = 32 columns per lane).
  if (vec_ok(a.C, {a.dinp, a.dout, a.inp, a.weight})) {
    if (a.C <= 256)
      launch_norm_bwd_shape<kWarps, 8, 1>(a, dweight, dbias, dinp_sum, overwrite, ws, blocks_per_sm, s);
    else if (a.C <= 512)
      launch_norm_bwd_shape<kWarps, 8, 2>(a, dweight, dbias, dinp_sum, overwrite, ws, blocks_per_sm, s);
    else
      launch_norm_bwd_shape<kWarps, 8, 4>(a, dweight, dbias, dinp_sum, overwrite, ws, blocks_per_sm, s);
  } else {
    launch_norm_bwd_shape<kWarps, 1, 8>(a, dweight, dbias, dinp_sum, overwrite, ws, blocks_per_sm, s);
  }
}

}  // namespace

void layernorm_fwd(void* out, float* mean, float* rstd, void* inp_or_residual, const void* res_a, const void* res_b,
                   const void* weight, const void* bias, int64_t N, int64_t C, float eps, bool rms, cudaStream_t s) {
  if (N <= 0) return;
  unsigned grid = unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  auto* o = static_cast<bf16*>(out);
  auto* x = static_cast<bf16*>(inp_or_residual);
  auto* a = static_cast<const bf16*>(res_a);
  auto* b = static_cast<const bf16*>(res_b);
  auto* w = static_cast<const bf16*>(weight);
  auto* bi = rms ? nullptr : static_cast<const bf16*>(bias);
  if (vec_ok(C, {out, inp_or_residual, res_a, res_b, weight, bi}))
    norm_fwd_kernel<8>
        <<<grid, 32 * kWarpsPerBlock, 0, s>>>(o, rms ? nullptr : mean, rstd, x, a, b, w, bi, N, C, eps, rms);
  else
    norm_fwd_kernel<1>
        <<<grid, 32 * kWarpsPerBlock, 0, s>>>(o, rms ? nullptr : mean, rstd, x, a, b, w, bi, N, C, eps, rms);
  RECIPE_CUDA_CHECK_LAUNCH("norm_fwd");
}

void layernorm_bwd(void* dinp, float* dweight, float* dbias, float* dinp_sum, const void* dout, const void* inp,
                   const void* weight, const float* mean, const float* rstd, int64_t N, int64_t C, bool rms,
                   NormGradOverwrite overwrite, Workspace ws, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  if (rms) dbias = nullptr;
  if (!dinp) dinp_sum = nullptr;
  if (!dinp && !dweight && !dbias) return;
  NormBwdArgs a{};
  a.dinp = static_cast<bf16*>(dinp);
  a.dout = static_cast<const bf16*>(dout);
  a.inp = static_cast<const bf16*>(inp);
  a.weight = static_cast<const bf16*>(weight);
  a.mean = rms ? nullptr : mean;
  a.rstd = rstd;
  a.N = N;
  a.C = C;
  a.rms = rms;
  a.prefetch_rows = kBwdPrefetchRows;
  launch_norm_bwd<kBwdWarps>(a, dweight, dbias, dinp_sum, overwrite, ws, kBwdBlocksPerSm, s);
}

}  // namespace recipe::kernels::cuda
