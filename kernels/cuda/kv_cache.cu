// Decoding with a KV cache (ops.hpp): kv_cache_append rotates the n new tokens' q and k heads in
// place (RoPE, rope_kernel's arithmetic at positions past + t) and copies their k and v heads into
// the layer's cache [B, Hkv, S, D]; kv_attention attends the new queries over the cache.
//
// Decoding is memory-bound (each step reads the whole cache once), so the attention kernel is
// plain: one block per (batch, query head, new token), four warps splitting the keys
// round-robin; inside a warp each lane holds D/32 of the head's elements (D ≤ 256), the score is
// a warp sum, and each warp keeps an online softmax (running max, sum and weighted V). The four
// partial softmaxes are merged at the end through shared memory. GQA reads kv head h / (Hq/Hkv)
// directly: K/V are never repeated per query head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/op_checks.hpp"
#include "kernels/cuda/cuda_common.cuh"

namespace recipe::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // D ≤ 32·8 = 256

__global__ void kv_rope_kernel(bf16* qkv, int B, int n, int Hq, int Hkv, int D, int past,
                               const double* __restrict__ inv_freq) {
  const int half = D / 2, heads = Hq + Hkv, row = (Hq + 2 * Hkv) * D;
  const int64_t total = int64_t(B) * n * heads * half;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int i = int(idx % half);
    const int64_t rest = idx / half;
    const int h = int(rest % heads);
    const int64_t bt = rest / heads;  // b·n + t
    const int t = past + int(bt % n);
    const float2 cs = rope_cos_sin(t, i, inv_freq);
    bf16* p = qkv + bt * row + int64_t(h) * D;  // q heads then k heads are contiguous
    const float x1 = to_f(p[i]), x2 = to_f(p[i + half]);
    p[i] = __float2bfloat16_rn(x1 * cs.x - x2 * cs.y);
    p[i + half] = __float2bfloat16_rn(x2 * cs.x + x1 * cs.y);
  }
}

__global__ void kv_copy_kernel(bf16* k_cache, bf16* v_cache, const bf16* qkv, int B, int n, int Hq, int Hkv, int D,
                               int S, int past) {
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  const int64_t total = int64_t(B) * n * Hkv * D;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int d = int(idx % D);
    int64_t rest = idx / D;
    const int g = int(rest % Hkv);
    rest /= Hkv;
    const int t = int(rest % n);
    const int64_t b = rest / n;
    const bf16* tok = qkv + (b * n + t) * row;
    const int64_t slot = ((b * Hkv + g) * S + past + t) * D + d;
    k_cache[slot] = tok[int64_t(Hq + g) * D + d];
    v_cache[slot] = tok[int64_t(Hq + Hkv + g) * D + d];
  }
}

// grid (B·Hq, n), block kWarps·32.
__global__ void kv_attention_kernel(bf16* out, const bf16* qkv, const bf16* k_cache, const bf16* v_cache, int n, int Hq,
                                    int Hkv, int D, int S, int past, float scale) {
  __shared__ float part_max[kWarps], part_sum[kWarps];
  __shared__ float part_acc[kWarps][32 * kMaxPerLane];
  const int bh = blockIdx.x, t = blockIdx.y;
  const int b = bh / Hq, h = bh % Hq, g = h / (Hq / Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  const bf16* q = qkv + (int64_t(b) * n + t) * row + int64_t(h) * D;
  const bf16* keys = k_cache + (int64_t(b) * Hkv + g) * S * D;
  const bf16* values = v_cache + (int64_t(b) * Hkv + g) * S * D;

  float qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int d = lane + 32 * k;
    qv[k] = d < D ? to_f(q[d]) : 0.f;
    acc[k] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int last = past + t;  // causal: keys 0 .. last
  for (int j = warp; j <= last; j += kWarps) {
    const bf16* kj = keys + int64_t(j) * D;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < D) s += qv[k] * to_f(kj[d]);
    }
    s = warp_sum(s) * scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    const bf16* vj = values + int64_t(j) * D;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < D) acc[k] = acc[k] * corr + p * to_f(vj[d]);
    }
    m = m_new;
  }
  if (lane == 0) part_max[warp] = m, part_sum[warp] = l;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) part_acc[warp][lane + 32 * k] = acc[k];
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_max[w]);
  float den = 0.f;
  for (int w = 0; w < kWarps; ++w) den += part_sum[w] * expf(part_max[w] - M);  // a warp without keys adds 0
  bf16* y = out + (int64_t(b) * n + t) * int64_t(Hq) * D + int64_t(h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.f;
    for (int w = 0; w < kWarps; ++w) num += part_acc[w][d] * expf(part_max[w] - M);
    y[d] = __float2bfloat16_rn(num / den);
  }
}

// The cache's capacity S after checking qkv, the caches and the positions.
int check_cache(const char* op, const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                const AttentionShape& s, int past) {
  const int B = s.B, n = s.T, Hq = s.Hq, Hkv = s.Hkv, D = s.D;
  if (B < 1 || n < 0 || Hq < 1 || Hkv < 1 || D < 1 || Hq % Hkv != 0 || D > 32 * kMaxPerLane)
    bad_arg(op, "need B >= 1, T >= 0, Hkv dividing Hq and 0 < D <= " + std::to_string(32 * kMaxPerLane) +
                    "; got B=" + std::to_string(B) + " T=" + std::to_string(n) + " Hq=" + std::to_string(Hq) +
                    " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  expect(op, "qkv", qkv, DType::bf16);
  expect(op, "k_cache", k_cache, DType::bf16);
  expect(op, "v_cache", v_cache, DType::bf16);
  if (qkv.numel() != int64_t(B) * n * (Hq + 2 * Hkv) * D)
    bad_arg(op, "qkv " + qkv.shape_str() + " must hold B·T·(Hq+2·Hkv)·D elements");
  if (k_cache.ndim != 4 || k_cache.dim(0) != B || k_cache.dim(1) != Hkv || k_cache.dim(3) != D ||
      v_cache.dims != k_cache.dims || v_cache.ndim != 4)
    bad_arg(op, "k_cache " + k_cache.shape_str() + " and v_cache " + v_cache.shape_str() + " must both be [B=" +
                    std::to_string(B) + ", Hkv=" + std::to_string(Hkv) + ", S, D=" + std::to_string(D) + "]");
  const int S = int(k_cache.dim(2));
  if (past < 0 || past + n > S)
    bad_arg(op, "positions " + std::to_string(past) + ".." + std::to_string(past + n - 1) + " do not fit the cache's " +
                    std::to_string(S) + " positions");
  return S;
}

unsigned grid_for(int64_t total) { return unsigned(std::min<int64_t>((total + 255) / 256, int64_t(1) << 16)); }

}  // namespace

void CudaBackend::kv_cache_append(const KvCacheAppendArgs& a) {
  const char* op = "kv_cache_append";
  const int S = check_cache(op, a.qkv, a.k_cache, a.v_cache, a.shape, a.past);
  const int B = a.shape.B, n = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  const bool rotate = a.rope_inv_freq.defined();
  if (rotate) {
    if (D % 2 != 0) bad_arg(op, "RoPE needs an even head dim; got D=" + std::to_string(D));
    expect(op, "rope_inv_freq", a.rope_inv_freq, DType::f64);
    expect_numel(op, "rope_inv_freq", a.rope_inv_freq, D / 2);
  }
  if (n == 0) return;
  bf16* qkv = static_cast<bf16*>(a.qkv.ptr);
  if (rotate) {
    kv_rope_kernel<<<grid_for(int64_t(B) * n * (Hq + Hkv) * (D / 2)), 256, 0, stream_>>>(qkv, B, n, Hq, Hkv, D, a.past,
                                                                                         a.rope_inv_freq.as<double>());
    RECIPE_CUDA_CHECK_LAUNCH("kv_cache_append (rope)");
  }
  kv_copy_kernel<<<grid_for(int64_t(B) * n * Hkv * D), 256, 0, stream_>>>(
      static_cast<bf16*>(a.k_cache.ptr), static_cast<bf16*>(a.v_cache.ptr), qkv, B, n, Hq, Hkv, D, S, a.past);
  RECIPE_CUDA_CHECK_LAUNCH("kv_cache_append");
}

void CudaBackend::kv_attention(const KvAttentionArgs& a) {
  const char* op = "kv_attention";
  const int S = check_cache(op, a.qkv, a.k_cache, a.v_cache, a.shape, a.past);
  const int B = a.shape.B, n = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  expect(op, "out", a.out, DType::bf16);
  if (a.out.numel() != int64_t(B) * n * Hq * D)
    bad_arg(op, "out " + a.out.shape_str() + " must hold B·T·Hq·D elements");
  if (n == 0) return;
  const float scale = float(1.0 / std::sqrt(double(D)));
  kv_attention_kernel<<<dim3(unsigned(B * Hq), unsigned(n)), kWarps * 32, 0, stream_>>>(
      static_cast<bf16*>(a.out.ptr), static_cast<const bf16*>(a.qkv.ptr), static_cast<const bf16*>(a.k_cache.ptr),
      static_cast<const bf16*>(a.v_cache.ptr), n, Hq, Hkv, D, S, a.past, scale);
  RECIPE_CUDA_CHECK_LAUNCH("kv_attention");
}

}  // namespace recipe::kernels::cuda
