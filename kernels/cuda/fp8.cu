// FP8 casts and amax reductions (fp8_kernels.hpp). The arithmetic matches the CPU reference
// (kernels/cpu/fp8_format.hpp) bit for bit: the scale is an IEEE division (__fdiv_rn: this library
// builds with --use_fast_math, whose plain '/' is approximate), the product x·scale is one rounded
// f32 multiply, and the cast is the hardware's cvt with satfinite, round to nearest even.
// (--use_fast_math also flushes f32 subnormals: an input below 2^-126 reads as 0 here. Such a
// value quantizes to 0 on both sides unless the whole tensor is that small; then its amax alone
// differs, which no test or model relies on.)
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fp8_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kAmaxThreads = 256;

// Block max into *amax (non-negative floats order like their bit patterns as unsigned integers,
// +inf included, so one atomicMax on the bits suffices; it also keeps a larger value already
// there, which is how a cast's amax_out accumulates over a step). t: the thread's linear index in
// a block of kAmaxThreads (the cast kernels' 2-D blocks have that many threads too).
__device__ __forceinline__ void block_max_to(float* amax, float m, int t) {
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[kAmaxThreads / 32];
  if (t % 32 == 0) warp_max[t / 32] = m;
  __syncthreads();
  if (t < 32) {
    m = t < kAmaxThreads / 32 ? warp_max[t] : 0.f;
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (t == 0) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
  }
}
__device__ __forceinline__ void block_max_to(float* amax, float m) { block_max_to(amax, m, int(threadIdx.x)); }

__global__ void amax_kernel(float* amax, const bf16* x, int64_t n) {
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(__bfloat162float(x[i])));  // fmaxf skips NaN
  block_max_to(amax, m);
}

// The same over n8 groups of 8 values read as one 16-byte load each (x 16-byte aligned): the
// scalar kernel's loads are 2 bytes, which keeps too few bytes in flight to reach the bandwidth.
__global__ void amax_vec8_kernel(float* amax, const uint4* x, int64_t n8) {
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = x[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  }
  block_max_to(amax, m);
}

__device__ __forceinline__ float scale_from_amax(float amax, float fp8_max) {
  if (!(amax > 0.f) || isinf(amax)) return 1.f;
  const float s = __fdiv_rn(fp8_max, amax);
  return isinf(s) ? 1.f : s;
}

// The casts read their input through a source: a loader of the bf16 values at (r, c), so the tiled,
// transposing, amax-recording cast is written once for a plain tensor and for tensors that are never
// materialised (the SwiGLU backward's, computed in registers). A source covers kHalves column
// blocks of `cols` columns each: element (r, c) of block h is column h·cols + c of the cast tensor
// [rows, kHalves·cols]; a block of the cast kernels handles the same tile in every half.
struct PlainSource {  // the bf16 tensor x [rows, cols]
  static constexpr int kHalves = 1;
  const bf16* x;
  int64_t cols;
  __device__ __forceinline__ void load1(int64_t r, int64_t c, float (&v)[1][1]) const {
    v[0][0] = __bfloat162float(x[r * cols + c]);
  }
  __device__ __forceinline__ void load8(int64_t r, int64_t c, float (&v)[1][8]) const {
    cuda::load8(x + r * cols + c, v[0]);
  }
};

// dgate_up [rows, 2F] = swiglu_bwd(dout [rows, F], gate_up [rows, 2F]): block 0 is dgate, block 1
// dup, each rounded to bf16 as swiglu_bwd stores it (the cast then reads exactly its values).
struct SwigluBwdSource {
  static constexpr int kHalves = 2;
  const bf16* dout;
  const bf16* gu;
  int64_t cols;  // F
  __device__ __forceinline__ static float rounded(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
  __device__ __forceinline__ void load1(int64_t r, int64_t c, float (&v)[2][1]) const {
    float dg, du;
    swiglu_grad(__bfloat162float(gu[r * 2 * cols + c]), __bfloat162float(gu[r * 2 * cols + cols + c]),
                __bfloat162float(dout[r * cols + c]), dg, du);
    v[0][0] = rounded(dg), v[1][0] = rounded(du);
  }
  __device__ __forceinline__ void load8(int64_t r, int64_t c, float (&v)[2][8]) const {
    float g[8], u[8], d[8];
    cuda::load8(gu + r * 2 * cols + c, g);
    cuda::load8(gu + r * 2 * cols + cols + c, u);
    cuda::load8(dout + r * cols + c, d);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float dg, du;
      swiglu_grad(g[k], u[k], d[k], dg, du);
      v[0][k] = rounded(dg), v[1][k] = rounded(du);
    }
  }
};

constexpr int kTile = 32, kTileRows = 8;  // a 32×32 tile, 32×8 threads, 4 elements each

// out [rows, H·cols] and out_t [H·cols, rows] (H = the source's kHalves).
template <__nv_fp8_interpretation_t Fmt, class Source>
__global__ void quantize_kernel(uint8_t* out, uint8_t* out_t, float* scale_inv, Source src, const float* amax,
                                float* amax_out, int64_t rows) {
  constexpr int H = Source::kHalves;
  const int64_t cols = src.cols, width = H * cols;
  const float scale = scale_from_amax(*amax, Fmt == __NV_E4M3 ? 448.f : 57344.f);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *scale_inv = __fdiv_rn(1.f, scale);
  __shared__ uint8_t tile[H][kTile][kTile + 4];
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const int64_t c = c0 + threadIdx.x;
  float m = 0.f;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t r = r0 + i;
    if (r < rows && c < cols) {
      float v[H][1];
      src.load1(r, c, v);
#pragma unroll
      for (int h = 0; h < H; ++h) {
        const float x = v[h][0];
        m = fmaxf(m, fabsf(x));  // fmaxf skips NaN
        const uint8_t b = __nv_cvt_float_to_fp8(__fmul_rn(x, scale), __NV_SATFINITE, Fmt);
        if (out) out[r * width + h * cols + c] = b;
        tile[h][i][threadIdx.x] = b;
      }
    }
  }
  if (amax_out) block_max_to(amax_out, m, int(threadIdx.y * kTile + threadIdx.x));
  if (!out_t) return;
  __syncthreads();
  // out_t[c, r]: thread x walks r so consecutive threads write consecutive bytes.
  const int64_t r = r0 + threadIdx.x;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int64_t cc = c0 + j;
    if (r >= rows || cc >= cols) continue;
#pragma unroll
    for (int h = 0; h < H; ++h) out_t[(h * cols + cc) * rows + r] = tile[h][threadIdx.x][j];
  }
}

// The vector form for rows and cols multiples of 8 (every FP8 GEMM operand: the resolver keeps
// features and tokens multiples of 16) and 16-byte aligned inputs: a 64×64 tile (per half) per
// block of 8×32 threads; a thread reads 8 bf16 of a row as one 16-byte load and writes their 8
// bytes as one 8-byte store; the transposed copy goes through shared memory, each thread writing
// 8 consecutive bytes of an out_t row. Per element the arithmetic is the scalar kernel's, so the
// bytes are equal.
constexpr int kVecTile = 64;

template <__nv_fp8_interpretation_t Fmt, class Source>
__global__ void quantize_vec8_kernel(uint8_t* out, uint8_t* out_t, float* scale_inv, Source src, const float* amax,
                                     float* amax_out, int64_t rows) {
  constexpr int H = Source::kHalves;
  const int64_t cols = src.cols, width = H * cols;
  const float scale = scale_from_amax(*amax, Fmt == __NV_E4M3 ? 448.f : 57344.f);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *scale_inv = __fdiv_rn(1.f, scale);
  __shared__ __align__(16) uint8_t tile[H][kVecTile][kVecTile + 8];
  const int64_t r0 = int64_t(blockIdx.y) * kVecTile, c0 = int64_t(blockIdx.x) * kVecTile;
  const int64_t c = c0 + 8 * threadIdx.x;  // threadIdx.x < 8: this thread's 8 columns
  float m = 0.f;
  for (int i = threadIdx.y; i < kVecTile; i += 32) {
    const int64_t r = r0 + i;
    if (r >= rows || c >= cols) continue;
    float v[H][8];
    src.load8(r, c, v);
#pragma unroll
    for (int h = 0; h < H; ++h) {
      union {
        uint2 u;
        uint8_t b[8];
      } q;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float x = v[h][k];
        m = fmaxf(m, fabsf(x));
        q.b[k] = __nv_cvt_float_to_fp8(__fmul_rn(x, scale), __NV_SATFINITE, Fmt);
      }
      if (out) *reinterpret_cast<uint2*>(out + r * width + h * cols + c) = q.u;
      *reinterpret_cast<uint2*>(&tile[h][i][8 * threadIdx.x]) = q.u;
    }
  }
  if (amax_out) block_max_to(amax_out, m, int(threadIdx.y * 8 + threadIdx.x));
  if (!out_t) return;
  __syncthreads();
  // out_t[cc, r0 + 8·g .. + 7] for the tile's 64 columns × 8 groups of rows: 512 stores of 8 bytes
  // per half.
  const int t = threadIdx.y * 8 + threadIdx.x;
  for (int w = t; w < kVecTile * 8; w += 256) {
    const int j = w / 8, g = w % 8;  // column j of the tile, rows 8g .. 8g+7
    const int64_t cc = c0 + j, r = r0 + 8 * g;
    if (cc >= cols || r >= rows) continue;
#pragma unroll
    for (int h = 0; h < H; ++h) {
      union {
        uint2 u;
        uint8_t b[8];
      } q;
#pragma unroll
      for (int k = 0; k < 8; ++k) q.b[k] = tile[h][8 * g + k][j];
      *reinterpret_cast<uint2*>(out_t + (h * cols + cc) * rows + r) = q.u;
    }
  }
}

// Launches the cast of `src` ([rows, kHalves·src.cols]): the vector kernel when rows and cols are
// multiples of 8 and the pointers aligned (`aligned`: the source's inputs 16 bytes, out / out_t 8).
template <class Source>
void launch_quantize(uint8_t* out, uint8_t* out_t, float* scale_inv, Source src, const float* amax, float* amax_out,
                     int64_t rows, bool aligned, bool e5m2, cudaStream_t s) {
  const int64_t cols = src.cols;
  aligned = aligned && reinterpret_cast<uintptr_t>(out) % 8 == 0 && reinterpret_cast<uintptr_t>(out_t) % 8 == 0;
  if (rows % 8 == 0 && cols % 8 == 0 && aligned) {
    const dim3 grid(unsigned((cols + kVecTile - 1) / kVecTile), unsigned((rows + kVecTile - 1) / kVecTile)),
        block(8, 32);
    if (e5m2)
      quantize_vec8_kernel<__NV_E5M2><<<grid, block, 0, s>>>(out, out_t, scale_inv, src, amax, amax_out, rows);
    else
      quantize_vec8_kernel<__NV_E4M3><<<grid, block, 0, s>>>(out, out_t, scale_inv, src, amax, amax_out, rows);
    return;
  }
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile)), block(kTile, kTileRows);
  if (e5m2)
    quantize_kernel<__NV_E5M2><<<grid, block, 0, s>>>(out, out_t, scale_inv, src, amax, amax_out, rows);
  else
    quantize_kernel<__NV_E4M3><<<grid, block, 0, s>>>(out, out_t, scale_inv, src, amax, amax_out, rows);
}

// swiglu_fwd and the row-layout cast of its bf16 output in one pass (Fp8SwigluFwdQuantizeArgs):
// W = 8 values per thread with 16-byte loads (F % 8 == 0, aligned), else 1. The cast reads the
// value as stored (rounded to bf16), so the bytes are those of fp8_quantize of the output.
template <__nv_fp8_interpretation_t Fmt, int W>
__global__ void swiglu_fwd_quantize_kernel(bf16* out, uint8_t* q, float* scale_inv, const bf16* gu, const float* amax,
                                           float* amax_out, int64_t rows, int64_t F) {
  const float scale = scale_from_amax(*amax, Fmt == __NV_E4M3 ? 448.f : 57344.f);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.f, scale);
  const int64_t per_row = F / W, n = rows * per_row;
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i - r * per_row) * W;
    float g[W], u[W], o[W];
    union {
      uint2 u;
      uint8_t b[8];
    } qb;
    if constexpr (W == 8) {
      load8(gu + r * 2 * F + c, g);
      load8(gu + r * 2 * F + F + c, u);
    } else {
      g[0] = __bfloat162float(gu[r * 2 * F + c]), u[0] = __bfloat162float(gu[r * 2 * F + F + c]);
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
      o[k] = __bfloat162float(__float2bfloat16_rn(swiglu_value(g[k], u[k])));
      m = fmaxf(m, fabsf(o[k]));  // fmaxf skips NaN
      qb.b[k] = __nv_cvt_float_to_fp8(__fmul_rn(o[k], scale), __NV_SATFINITE, Fmt);
    }
    if constexpr (W == 8) {
      store8(out + r * F + c, o);
      *reinterpret_cast<uint2*>(q + r * F + c) = qb.u;
    } else {
      out[r * F + c] = __float2bfloat16_rn(o[0]);
      q[r * F + c] = qb.b[0];
    }
  }
  if (amax_out) block_max_to(amax_out, m);
}

// Delayed scaling's roll (Fp8AmaxHistoryArgs): one thread per tensor, the CPU's
// roll_amax_history (kernels/cpu/fp8_format.hpp) step for step.
constexpr int kCell = 4;
__global__ void amax_history_kernel(float* history, float* amax, float* scale_amax, int64_t T, int64_t H, bool push,
                                    bool most_recent) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  float* h = history + t * H;
  if (push) {
    for (int64_t i = H - 1; i > 0; --i) h[i] = h[i - 1];
    h[0] = amax[t * kCell];
    amax[t * kCell] = 0.f;
  }
  float m = h[0];
  if (!most_recent) {
    m = 0.f;
    for (int64_t i = 0; i < H; ++i) m = fmaxf(m, h[i]);
  }
  scale_amax[t * kCell] = m;
}

__global__ void add_bias_kernel(bf16* out, const bf16* bias, int64_t rows, int64_t cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(__bfloat162float(out[i]) + __bfloat162float(bias[i % cols]));
}

// Byte transpose (fp8_transpose_bytes), out [cols, rows] = inp [rows, cols]ᵀ. Fast form: 64×64
// tiles, 256 threads, each loading 16 bytes of one input row into shared memory and storing 16
// bytes of one output row gathered down a tile column (rows, cols multiples of 16, pointers
// 16-byte aligned: every FP8 GEMM operand). Else 32×32 tiles of single bytes.
constexpr int kT16 = 64;
__global__ void transpose_vec16_kernel(uint8_t* out, const uint8_t* inp, int64_t rows, int64_t cols) {
  __shared__ __align__(16) uint8_t tile[kT16][kT16 + 16];  // rows 16-byte aligned (80 bytes apart)
  const int t = int(threadIdx.x), lr = t / 4, lc = (t % 4) * 16;
  const int64_t r0 = int64_t(blockIdx.y) * kT16, c0 = int64_t(blockIdx.x) * kT16;
  if (r0 + lr < rows && c0 + lc < cols)
    *reinterpret_cast<uint4*>(&tile[lr][lc]) = *reinterpret_cast<const uint4*>(inp + (r0 + lr) * cols + c0 + lc);
  __syncthreads();
  // This thread's output row is input column c0 + lr, its 16 bytes input rows r0 + lc .. + 15.
  if (c0 + lr < cols && r0 + lc < rows) {
    __align__(16) uint8_t v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = tile[lc + j][lr];
    *reinterpret_cast<uint4*>(out + (c0 + lr) * rows + r0 + lc) = *reinterpret_cast<const uint4*>(v);
  }
}
constexpr int kT1 = 32;
__global__ void transpose_kernel(uint8_t* out, const uint8_t* inp, int64_t rows, int64_t cols) {
  __shared__ uint8_t tile[kT1][kT1 + 1];
  const int64_t r0 = int64_t(blockIdx.y) * kT1, c0 = int64_t(blockIdx.x) * kT1;
  for (int i = int(threadIdx.y); i < kT1; i += int(blockDim.y))
    if (r0 + i < rows && c0 + threadIdx.x < cols) tile[i][threadIdx.x] = inp[(r0 + i) * cols + c0 + threadIdx.x];
  __syncthreads();
  for (int i = int(threadIdx.y); i < kT1; i += int(blockDim.y))
    if (c0 + i < cols && r0 + threadIdx.x < rows) out[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i];
}

int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

}  // namespace

void fp8_amax_bf16(float* amax, const void* x, int64_t n, cudaStream_t s) {
  RECIPE_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
  if (n <= 0) return;
  if (n % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const int64_t n8 = n / 8;
    amax_vec8_kernel<<<std::min(blocks_for(n8, kAmaxThreads), 1024), kAmaxThreads, 0, s>>>(
        amax, static_cast<const uint4*>(x), n8);
  } else {
    amax_kernel<<<std::min(blocks_for(n, kAmaxThreads), 1024), kAmaxThreads, 0, s>>>(amax, static_cast<const bf16*>(x),
                                                                                     n);
  }
  RECIPE_CUDA_CHECK_LAUNCH("fp8_amax");
}

void fp8_quantize_bf16(void* out, void* out_t, float* scale_inv, const void* inp, const float* amax, float* amax_out,
                       int64_t rows, int64_t cols, bool e5m2, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  launch_quantize(static_cast<uint8_t*>(out), static_cast<uint8_t*>(out_t), scale_inv,
                  PlainSource{static_cast<const bf16*>(inp), cols}, amax, amax_out, rows, aligned16(inp), e5m2, s);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_quantize");
}

void fp8_transpose_bytes(void* out, const void* inp, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  auto* o = static_cast<uint8_t*>(out);
  const auto* x = static_cast<const uint8_t*>(inp);
  const bool aligned = reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(inp) % 16 == 0;
  if (rows % 16 == 0 && cols % 16 == 0 && aligned) {
    const dim3 grid(unsigned((cols + kT16 - 1) / kT16), unsigned((rows + kT16 - 1) / kT16));
    transpose_vec16_kernel<<<grid, 256, 0, s>>>(o, x, rows, cols);
  } else {
    const dim3 grid(unsigned((cols + kT1 - 1) / kT1), unsigned((rows + kT1 - 1) / kT1)), block(kT1, 8);
    transpose_kernel<<<grid, block, 0, s>>>(o, x, rows, cols);
  }
  RECIPE_CUDA_CHECK_LAUNCH("fp8_transpose");
}

void fp8_quantize_swiglu_bwd_bf16(void* out, void* out_t, float* scale_inv, const void* dout, const void* gate_up,
                                  const float* amax, float* amax_out, int64_t rows, int64_t F, bool e5m2,
                                  cudaStream_t s) {
  if (rows <= 0 || F <= 0) return;
  launch_quantize(static_cast<uint8_t*>(out), static_cast<uint8_t*>(out_t), scale_inv,
                  SwigluBwdSource{static_cast<const bf16*>(dout), static_cast<const bf16*>(gate_up), F}, amax, amax_out,
                  rows, aligned16(dout) && aligned16(gate_up), e5m2, s);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_quantize_swiglu_bwd");
}

void fp8_swiglu_fwd_quantize_bf16(void* out, void* q, float* scale_inv, const void* gate_up, const float* amax,
                                  float* amax_out, int64_t rows, int64_t F, bool e5m2, cudaStream_t s) {
  if (rows <= 0 || F <= 0) return;
  auto* o = static_cast<bf16*>(out);
  auto* qb = static_cast<uint8_t*>(q);
  const auto* gu = static_cast<const bf16*>(gate_up);
  const bool vec = F % 8 == 0 && aligned16(out) && aligned16(gate_up) && reinterpret_cast<uintptr_t>(q) % 8 == 0;
  const int64_t work = vec ? rows * F / 8 : rows * F;
  const int blocks = blocks_for(work, kAmaxThreads);
  if (vec && e5m2)
    swiglu_fwd_quantize_kernel<__NV_E5M2, 8>
        <<<blocks, kAmaxThreads, 0, s>>>(o, qb, scale_inv, gu, amax, amax_out, rows, F);
  else if (vec)
    swiglu_fwd_quantize_kernel<__NV_E4M3, 8>
        <<<blocks, kAmaxThreads, 0, s>>>(o, qb, scale_inv, gu, amax, amax_out, rows, F);
  else if (e5m2)
    swiglu_fwd_quantize_kernel<__NV_E5M2, 1>
        <<<blocks, kAmaxThreads, 0, s>>>(o, qb, scale_inv, gu, amax, amax_out, rows, F);
  else
    swiglu_fwd_quantize_kernel<__NV_E4M3, 1>
        <<<blocks, kAmaxThreads, 0, s>>>(o, qb, scale_inv, gu, amax, amax_out, rows, F);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_swiglu_fwd_quantize");
}

void fp8_amax_history_f32(float* history, float* amax, float* scale_amax, int64_t tensors, int64_t history_len,
                          bool push, bool most_recent, cudaStream_t s) {
  if (tensors <= 0) return;
  amax_history_kernel<<<unsigned((tensors + 127) / 128), 128, 0, s>>>(history, amax, scale_amax, tensors, history_len,
                                                                      push, most_recent);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_amax_history");
}

void add_bias_bf16(void* out, const void* bias, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols <= 0) return;
  add_bias_kernel<<<blocks_for(rows * cols, 256), 256, 0, s>>>(static_cast<bf16*>(out), static_cast<const bf16*>(bias),
                                                               rows, cols);
  RECIPE_CUDA_CHECK_LAUNCH("add_bias");
}

}  // namespace recipe::kernels::cuda
