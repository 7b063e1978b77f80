// Device helpers shared by the CUDA kernels: bf16 <-> f32, 16-byte vector access, warp/block
// reductions with a fixed combination order (so reductions are bitwise repeatable), GELU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace recipe::kernels::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(float x) { return x; }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

// 8 bf16 = 16 bytes: the widest single load a thread can issue.
struct alignas(16) Bf16x8 {
  bf16 v[8];
};

__device__ __forceinline__ void load8(const bf16* p, float (&out)[8]) {
  Bf16x8 x = *reinterpret_cast<const Bf16x8*>(p);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = __bfloat162float(x.v[i]);
}
__device__ __forceinline__ void store8(bf16* p, const float (&in)[8]) {
  Bf16x8 x;
#pragma unroll
  for (int i = 0; i < 8; ++i) x.v[i] = __float2bfloat16_rn(in[i]);
  *reinterpret_cast<Bf16x8*>(p) = x;
}

// SwiGLU of one (gate g, up u) pair in f32, before the act-dtype rounding: silu(g)·u. One definition
// for swiglu_fwd (elementwise.cu) and the FP8 cast that fuses it (fp8.cu).
__device__ __forceinline__ float swiglu_value(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// The SwiGLU backward of one (gate g, up u) pair with output gradient d, in f32 before the act-dtype
// rounding: dg = d·u·silu'(g), du = d·silu(g). One definition for swiglu_bwd (elementwise.cu) and
// the FP8 cast that fuses it (fp8.cu), so both round the same f32 values.
__device__ __forceinline__ void swiglu_grad(float g, float u, float d, float& dg, float& du) {
  const float sig = 1.f / (1.f + __expf(-g));
  const float sl = g * sig;
  dg = d * u * sig * (1.f + g * (1.f - sig));
  du = d * sl;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// RoPE's (cos, sin) of pair i at position t: the angle t·inv_freq[i] in double (with
// --use_fast_math single-precision sin/cos lose accuracy for the large arguments long sequences
// produce), rounded to float. inv_freq is the run's table, f64 [D/2] in device memory (ops.hpp
// RopeArgs; made on the host by family/rope.hpp), read here, never computed: the kernels used to
// compute θ^(-2i/D) as exp(−ln θ·2i/D), the table holds the CPU's pow(θ, −2i/D), so an angle may
// differ from before in a double's last bit (and then, rarely, a float's). rope.cu and kv_cache.cu
// both rotate with it, so a token decoded from a KV cache is rotated to the same bits as in a
// full-sequence forward.
__device__ __forceinline__ float2 rope_cos_sin(int t, int i, const double* __restrict__ inv_freq) {
  const double angle = double(t) * inv_freq[i];
  double sn, cs;
  sincos(angle, &sn, &cs);
  return make_float2(float(cs), float(sn));
}

// Block-wide sum; every thread gets the result. `shared` holds ≥ 32 values. Deterministic: each
// warp reduces in a fixed butterfly order, then warp 0 reduces the per-warp sums the same way.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? shared[lane] : T(0);
  r = warp_sum(r);
  return r;
}
__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? shared[lane] : -INFINITY;
  return warp_max(r);
}

// GELU, tanh approximation (the one cuBLASLt's GELU epilogue and ops.hpp use).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  float u = k * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float k = 0.7978845608028654f;
  float x2 = x * x;
  float u = k * (x + 0.044715f * x2 * x);
  float t = tanhf(u);
  float du = k * (1.f + 3.f * 0.044715f * x2);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

}  // namespace recipe::kernels::cuda
