// The own attention kernels, used when cuDNN is missing or rejects a shape: causal, GQA, reading
// q/k/v straight from the packed qkv buffer [B, T, (Hq + 2·Hkv)·D], any T, D ≤ 128.
//
// Forward: one warp per (b, h, query). Keys are visited 32 at a time, one key per lane (the lane
// computes the full q·k dot product), with an online softmax (running max m and sum l); each lane
// owns output dims d = lane + 32·r and accumulates Σ p_j v_j[d] by broadcasting p_j with shuffles.
//
// Backward (deterministic, no atomics): first one warp per (b, h, query i) computes
// Di = dO_i·O_i and dq_i = scale·Σ_j dS_ij k_j with dS_ij = P_ij (dO_i·v_j - Di); then one warp per
// (b, kv head, key j) loops over the q heads of its group and the queries i ≥ j, 32 at a time, to
// form dk_j = scale·Σ dS_ij q_i and dv_j = Σ P_ij dO_i. Each sum has a fixed order.
//
// Packed samples (pos != nullptr, ops.hpp): query i sees keys from lo = i - pos[i], its sample's
// first token; the forward and dq loops start at lo's block (lanes below lo masked), the dkv loop
// stops after the first block of 32 queries none of which is in key j's sample (samples are
// contiguous, so no later query is). pos = nullptr runs the same instructions as before.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

namespace recipe::kernels::cuda {
namespace {

constexpr int kMaxD = 128, kWarps = 4, kPerLane = kMaxD / 32;

struct Layout {
  int B, T, Hq, Hkv, D;
  int64_t row;         // elements per token row of qkv
  const int32_t* pos;  // per-sample positions [B·T] or nullptr
  // First key query i of row b may see: its sample's first token (0 without samples).
  __device__ int lo(int b, int i) const { return pos ? i - pos[int64_t(b) * T + i] : 0; }
  __device__ int64_t q(int b, int t, int h) const { return (int64_t(b) * T + t) * row + int64_t(h) * D; }
  __device__ int64_t k(int b, int t, int hk) const { return (int64_t(b) * T + t) * row + int64_t(Hq + hk) * D; }
  __device__ int64_t v(int b, int t, int hk) const { return (int64_t(b) * T + t) * row + int64_t(Hq + Hkv + hk) * D; }
  __device__ int64_t o(int b, int t, int h) const { return (int64_t(b) * T + t) * Hq * D + int64_t(h) * D; }
  __device__ int64_t l(int b, int h, int t) const { return (int64_t(b) * Hq + h) * T + t; }
};

// Σ_d a[d]·x[d] with a in shared memory (f32) and x a bf16 row in global memory.
__device__ __forceinline__ float dot_row(const float* a, const bf16* x, int D) {
  float acc = 0.f;
  if ((D & 7) == 0) {
    for (int d = 0; d < D; d += 8) {
      float v[8];
      load8(x + d, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += a[d + k] * v[k];
    }
  } else {
    for (int d = 0; d < D; ++d) acc += a[d] * to_f(x[d]);
  }
  return acc;
}

__global__ void attn_fwd_kernel(bf16* out, float* lse, const bf16* qkv, Layout L, float scale) {
  __shared__ float sq[kWarps][kMaxD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t item = int64_t(blockIdx.x) * kWarps + warp;  // (b, h, i) flattened, i fastest
  if (item >= int64_t(L.B) * L.Hq * L.T) return;
  const int i = int(item % L.T), h = int((item / L.T) % L.Hq), b = int(item / (int64_t(L.T) * L.Hq));
  const int hk = h / (L.Hq / L.Hkv);
  for (int d = lane; d < L.D; d += 32) sq[warp][d] = to_f(qkv[L.q(b, i, h) + d]) * scale;
  __syncwarp();
  float m = -INFINITY, l = 0.f, acc[kPerLane] = {0.f, 0.f, 0.f, 0.f};
  const int lo = L.lo(b, i);
  for (int kb = lo; kb <= i; kb += 32) {
    const int j = kb + lane;
    float s = j <= i ? dot_row(sq[warp], qkv + L.k(b, j, hk), L.D) : -INFINITY;
    const float m_new = fmaxf(m, warp_max(s));
    const float corr = __expf(m - m_new);  // m = -inf on the first block: corr = 0
    const float p = j <= i ? __expf(s - m_new) : 0.f;
    l = l * corr + warp_sum(p);
    const int count = min(32, i - kb + 1);
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) acc[r] *= corr;
    for (int jj = 0; jj < count; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      const bf16* vrow = qkv + L.v(b, kb + jj, hk);
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) {
        const int d = lane + 32 * r;
        if (d < L.D) acc[r] += pj * to_f(vrow[d]);
      }
    }
    m = m_new;
  }
  const float inv_l = 1.f / l;
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < L.D) out[L.o(b, i, h) + d] = __float2bfloat16_rn(acc[r] * inv_l);
  }
  if (lane == 0) lse[L.l(b, h, i)] = m + logf(l);
}

__global__ void attn_bwd_dq_kernel(bf16* dqkv, float* Dbuf, const bf16* dout, const bf16* qkv, const bf16* out,
                                   const float* lse, Layout L, float scale) {
  __shared__ float sq[kWarps][kMaxD], sdo[kWarps][kMaxD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t item = int64_t(blockIdx.x) * kWarps + warp;
  if (item >= int64_t(L.B) * L.Hq * L.T) return;
  const int i = int(item % L.T), h = int((item / L.T) % L.Hq), b = int(item / (int64_t(L.T) * L.Hq));
  const int hk = h / (L.Hq / L.Hkv);
  float di = 0.f;
  for (int d = lane; d < L.D; d += 32) {
    const float g = to_f(dout[L.o(b, i, h) + d]);
    sdo[warp][d] = g;
    sq[warp][d] = to_f(qkv[L.q(b, i, h) + d]) * scale;
    di += g * to_f(out[L.o(b, i, h) + d]);
  }
  di = warp_sum(di);
  if (lane == 0) Dbuf[L.l(b, h, i)] = di;
  __syncwarp();
  const float lse_i = lse[L.l(b, h, i)];
  float acc[kPerLane] = {0.f, 0.f, 0.f, 0.f};
  const int lo = L.lo(b, i);
  for (int kb = lo; kb <= i; kb += 32) {
    const int j = kb + lane;
    float ds = 0.f;
    if (j <= i) {
      const float p = __expf(dot_row(sq[warp], qkv + L.k(b, j, hk), L.D) - lse_i);
      const float dp = dot_row(sdo[warp], qkv + L.v(b, j, hk), L.D);
      ds = p * (dp - di);
    }
    const int count = min(32, i - kb + 1);
    for (int jj = 0; jj < count; ++jj) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
      const bf16* krow = qkv + L.k(b, kb + jj, hk);
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) {
        const int d = lane + 32 * r;
        if (d < L.D) acc[r] += dsj * to_f(krow[d]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < L.D) dqkv[L.q(b, i, h) + d] = __float2bfloat16_rn(acc[r] * scale);
  }
}

__global__ void attn_bwd_dkv_kernel(bf16* dqkv, const float* Dbuf, const bf16* dout, const bf16* qkv, const float* lse,
                                    Layout L, float scale) {
  __shared__ float sk[kWarps][kMaxD], sv[kWarps][kMaxD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t item = int64_t(blockIdx.x) * kWarps + warp;  // (b, hk, j)
  if (item >= int64_t(L.B) * L.Hkv * L.T) return;
  const int j = int(item % L.T), hk = int((item / L.T) % L.Hkv), b = int(item / (int64_t(L.T) * L.Hkv));
  const int group = L.Hq / L.Hkv;
  for (int d = lane; d < L.D; d += 32) {
    sk[warp][d] = to_f(qkv[L.k(b, j, hk) + d]) * scale;
    sv[warp][d] = to_f(qkv[L.v(b, j, hk) + d]);
  }
  __syncwarp();
  float dk[kPerLane] = {0.f, 0.f, 0.f, 0.f}, dv[kPerLane] = {0.f, 0.f, 0.f, 0.f};
  for (int r0 = 0; r0 < group; ++r0) {
    const int h = hk * group + r0;
    for (int ib = j; ib < L.T; ib += 32) {
      const int i = ib + lane;
      const bool in = i < L.T && (!L.pos || L.lo(b, i) <= j);  // query i is in key j's sample
      if (L.pos && __ballot_sync(0xffffffffu, in) == 0u) break;
      float p = 0.f, ds = 0.f;
      if (in) {
        p = __expf(dot_row(sk[warp], qkv + L.q(b, i, h), L.D) - lse[L.l(b, h, i)]);
        const float dp = dot_row(sv[warp], dout + L.o(b, i, h), L.D);
        ds = p * (dp - Dbuf[L.l(b, h, i)]);
      }
      const int count = min(32, L.T - ib);
      for (int ii = 0; ii < count; ++ii) {
        const float pi = __shfl_sync(0xffffffffu, p, ii);
        const float dsi = __shfl_sync(0xffffffffu, ds, ii);
        const bf16* qrow = qkv + L.q(b, ib + ii, h);
        const bf16* dorow = dout + L.o(b, ib + ii, h);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
          const int d = lane + 32 * r;
          if (d < L.D) {
            dk[r] += dsi * to_f(qrow[d]);
            dv[r] += pi * to_f(dorow[d]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < L.D) {
      dqkv[L.k(b, j, hk) + d] = __float2bfloat16_rn(dk[r] * scale);
      dqkv[L.v(b, j, hk) + d] = __float2bfloat16_rn(dv[r]);
    }
  }
}

Layout make_layout(int B, int T, int Hq, int Hkv, int D, const int32_t* pos) {
  if (D > kMaxD || D <= 0)
    throw std::runtime_error("CUDA attention fallback: head dim " + std::to_string(D) + " is not supported (1..128)");
  if (Hkv <= 0 || Hq % Hkv)
    throw std::runtime_error("CUDA attention: q heads " + std::to_string(Hq) + " must be a multiple of kv heads " +
                             std::to_string(Hkv));
  return Layout{B, T, Hq, Hkv, D, int64_t(Hq + 2 * Hkv) * D, pos};
}

}  // namespace

void attention_fwd_fallback(void* out, float* lse, const void* qkv, const int32_t* pos, int B, int T, int Hq, int Hkv,
                            int D, cudaStream_t s) {
  Layout L = make_layout(B, T, Hq, Hkv, D, pos);
  int64_t warps = int64_t(B) * Hq * T;
  if (warps <= 0) return;
  attn_fwd_kernel<<<unsigned((warps + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
      static_cast<bf16*>(out), lse, static_cast<const bf16*>(qkv), L, 1.f / sqrtf(float(D)));
  RECIPE_CUDA_CHECK_LAUNCH("attention_fwd_fallback");
}

void attention_bwd_fallback(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                            const int32_t* pos, int B, int T, int Hq, int Hkv, int D, Workspace ws, cudaStream_t s) {
  Layout L = make_layout(B, T, Hq, Hkv, D, pos);
  int64_t q_items = int64_t(B) * Hq * T, kv_items = int64_t(B) * Hkv * T;
  if (q_items <= 0) return;
  auto* Dbuf = static_cast<float*>(ws.take(size_t(q_items) * 4, "attention backward"));
  const float scale = 1.f / sqrtf(float(D));
  attn_bwd_dq_kernel<<<unsigned((q_items + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
      static_cast<bf16*>(dqkv), Dbuf, static_cast<const bf16*>(dout), static_cast<const bf16*>(qkv),
      static_cast<const bf16*>(out), lse, L, scale);
  RECIPE_CUDA_CHECK_LAUNCH("attention_bwd_dq_fallback");
  attn_bwd_dkv_kernel<<<unsigned((kv_items + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(
      static_cast<bf16*>(dqkv), Dbuf, static_cast<const bf16*>(dout), static_cast<const bf16*>(qkv), lse, L, scale);
  RECIPE_CUDA_CHECK_LAUNCH("attention_bwd_dkv_fallback");
}

}  // namespace recipe::kernels::cuda
