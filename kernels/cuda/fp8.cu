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
#include "kernels/cuda/fp8_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kAmaxThreads = 256;

__global__ void amax_kernel(float* amax, const bf16* x, int64_t n) {
  float m = 0.f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(__bfloat162float(x[i])));  // fmaxf skips NaN
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[kAmaxThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < kAmaxThreads / 32 ? warp_max[threadIdx.x] : 0.f;
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    // Non-negative floats (+inf included) order like their bit patterns as unsigned integers.
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
  }
}

__device__ __forceinline__ float scale_from_amax(float amax, float fp8_max) {
  if (!(amax > 0.f) || isinf(amax)) return 1.f;
  const float s = __fdiv_rn(fp8_max, amax);
  return isinf(s) ? 1.f : s;
}

constexpr int kTile = 32, kTileRows = 8;  // a 32×32 tile, 32×8 threads, 4 elements each

template <__nv_fp8_interpretation_t Fmt>
__global__ void quantize_kernel(uint8_t* out, uint8_t* out_t, float* scale_inv, const bf16* inp, const float* amax,
                                int64_t rows, int64_t cols) {
  const float scale = scale_from_amax(*amax, Fmt == __NV_E4M3 ? 448.f : 57344.f);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *scale_inv = __fdiv_rn(1.f, scale);
  __shared__ uint8_t tile[kTile][kTile + 4];
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const int64_t c = c0 + threadIdx.x;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t r = r0 + i;
    if (r < rows && c < cols) {
      const float v = __fmul_rn(__bfloat162float(inp[r * cols + c]), scale);
      const uint8_t b = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, Fmt);
      if (out) out[r * cols + c] = b;
      tile[i][threadIdx.x] = b;
    }
  }
  if (!out_t) return;
  __syncthreads();
  // out_t[c, r]: thread x walks r so consecutive threads write consecutive bytes.
  const int64_t r = r0 + threadIdx.x;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int64_t cc = c0 + j;
    if (r < rows && cc < cols) out_t[cc * rows + r] = tile[threadIdx.x][j];
  }
}

__global__ void add_bias_kernel(bf16* out, const bf16* bias, int64_t rows, int64_t cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(__bfloat162float(out[i]) + __bfloat162float(bias[i % cols]));
}

int blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

}  // namespace

void fp8_amax_bf16(float* amax, const void* x, int64_t n, cudaStream_t s) {
  RECIPE_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), s));
  if (n <= 0) return;
  amax_kernel<<<std::min(blocks_for(n, kAmaxThreads), 1024), kAmaxThreads, 0, s>>>(amax, static_cast<const bf16*>(x),
                                                                                   n);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_amax");
}

void fp8_quantize_bf16(void* out, void* out_t, float* scale_inv, const void* inp, const float* amax, int64_t rows,
                       int64_t cols, bool e5m2, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile)), block(kTile, kTileRows);
  auto* o = static_cast<uint8_t*>(out);
  auto* ot = static_cast<uint8_t*>(out_t);
  const auto* x = static_cast<const bf16*>(inp);
  if (e5m2)
    quantize_kernel<__NV_E5M2><<<grid, block, 0, s>>>(o, ot, scale_inv, x, amax, rows, cols);
  else
    quantize_kernel<__NV_E4M3><<<grid, block, 0, s>>>(o, ot, scale_inv, x, amax, rows, cols);
  RECIPE_CUDA_CHECK_LAUNCH("fp8_quantize");
}

void add_bias_bf16(void* out, const void* bias, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols <= 0) return;
  add_bias_kernel<<<blocks_for(rows * cols, 256), 256, 0, s>>>(static_cast<bf16*>(out), static_cast<const bf16*>(bias),
                                                               rows, cols);
  RECIPE_CUDA_CHECK_LAUNCH("add_bias");
}

}  // namespace recipe::kernels::cuda
