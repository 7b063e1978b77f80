// Decoding with a KV cache (ops.hpp): appending n new tokens' K/V (after RoPE) to a layer's cache
// [B, Hkv, S, D], and the attention of their queries over the cache. The math is attention_fwd's
// and rope_fwd's, term for term (the same dot, the same exp and double sum, the same RoPE angles),
// so the logits of a decoded token match a full-sequence forward up to GEMM blocking.
//
// Work is split over (batch, query head) pairs; each output row is written by one task in a fixed
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {

struct CacheLayout {
  int64_t row;  // floats per token row of qkv
  int64_t S;    // cache capacity (positions)
  int group;    // q heads per kv head
};

CacheLayout check_cache(const char* op, const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                        const AttentionShape& s, int past) {
  const int B = s.B, n = s.T, Hq = s.Hq, Hkv = s.Hkv, D = s.D;
  cpu::require(B >= 1 && n >= 0 && Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0, op,
               "need B >= 1, T >= 0, D > 0 and Hkv dividing Hq; got B=" + std::to_string(B) +
                   " T=" + std::to_string(n) + " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) +
                   " D=" + std::to_string(D));
  cpu::require_tensor(qkv, op, "qkv", DType::f32);
  cpu::require_tensor(k_cache, op, "k_cache", DType::f32);
  cpu::require_tensor(v_cache, op, "v_cache", DType::f32);
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  cpu::require_numel(qkv, int64_t(B) * n * row, op, "qkv");
  cpu::require(k_cache.ndim == 4 && k_cache.dim(0) == B && k_cache.dim(1) == Hkv && k_cache.dim(3) == D, op,
               "k_cache " + k_cache.shape_str() + " must be [B=" + std::to_string(B) + ", Hkv=" + std::to_string(Hkv) +
                   ", S, D=" + std::to_string(D) + "]");
  cpu::require(v_cache.ndim == 4 && v_cache.dims == k_cache.dims, op,
               "v_cache " + v_cache.shape_str() + " must have k_cache's shape " + k_cache.shape_str());
  const int64_t S = k_cache.dim(2);
  cpu::require(past >= 0 && past + n <= S, op,
               "positions " + std::to_string(past) + ".." + std::to_string(past + n - 1) + " do not fit the cache's " +
                   std::to_string(S) + " positions");
  return {row, S, Hq / Hkv};
}

}  // namespace

void CpuBackend::kv_cache_append(const KvCacheAppendArgs& a) {
  const char* op = "kv_cache_append";
  const auto L = check_cache(op, a.qkv, a.k_cache, a.v_cache, a.shape, a.past);
  const int B = a.shape.B, n = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  const bool rotate = a.rope_inv_freq.defined();
  if (rotate) {
    cpu::require(D % 2 == 0, op, "RoPE needs an even head dim; got D=" + std::to_string(D));
    cpu::require_tensor(a.rope_inv_freq, op, "rope_inv_freq", DType::f64);
    cpu::require_numel(a.rope_inv_freq, D / 2, op, "rope_inv_freq");
  }
  float* x = a.qkv.as<float>();
  float* kc = a.k_cache.as<float>();
  float* vc = a.v_cache.as<float>();
  std::optional<cpu::RopeAngles> rope;
  if (rotate) rope.emplace(a.rope_inv_freq.as<double>(), D);
  for (int t = 0; t < n; ++t) {
    const int p = a.past + t;
    if (rope) rope->at(p, 1.0f);
    for (int b = 0; b < B; ++b) {
      float* tok = x + (int64_t(b) * n + t) * L.row;
      if (rope) rope->rotate(tok, Hq + Hkv, D);  // q heads then k heads are contiguous
      for (int g = 0; g < Hkv; ++g) {
        const int64_t slot = ((int64_t(b) * Hkv + g) * L.S + p) * D;
        std::memcpy(kc + slot, tok + int64_t(Hq + g) * D, sizeof(float) * size_t(D));
        std::memcpy(vc + slot, tok + int64_t(Hq + Hkv + g) * D, sizeof(float) * size_t(D));
      }
    }
  }
}

void CpuBackend::kv_attention(const KvAttentionArgs& a) {
  const char* op = "kv_attention";
  const auto L = check_cache(op, a.qkv, a.k_cache, a.v_cache, a.shape, a.past);
  const int B = a.shape.B, n = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  cpu::require_tensor(a.out, op, "out", DType::f32);
  cpu::require_numel(a.out, int64_t(B) * n * Hq * D, op, "out");
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float* x = a.qkv.as<float>();
  const float* kc = a.k_cache.as<float>();
  const float* vc = a.v_cache.as<float>();
  float* o = a.out.as<float>();
  const int past = a.past;
  const double work = double(B) * Hq * n * (past + n) * D;
  cpu::parallel_for(int64_t(B) * Hq, threads(), work, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(past + n));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq;
      const int h = int(bh % Hq), g = h / L.group;
      const float* keys = kc + (b * Hkv + g) * L.S * D;
      const float* values = vc + (b * Hkv + g) * L.S * D;
      for (int t = 0; t < n; ++t) {
        const float* q = x + (b * n + t) * L.row + int64_t(h) * D;
        const int last = past + t;  // causal: keys 0 .. last
        float max_s = -INFINITY;
        for (int j = 0; j <= last; ++j) {
          p[size_t(j)] = cpu::dot(q, keys + int64_t(j) * D, D) * scale;
          max_s = std::max(max_s, p[size_t(j)]);
        }
        double sum = 0.0;
        for (int j = 0; j <= last; ++j) {
          p[size_t(j)] = std::exp(p[size_t(j)] - max_s);
          sum += p[size_t(j)];
        }
        float* y = o + (b * n + t) * int64_t(Hq) * D + int64_t(h) * D;
        std::memset(y, 0, sizeof(float) * size_t(D));
        for (int j = 0; j <= last; ++j) cpu::axpy(y, p[size_t(j)], values + int64_t(j) * D, D);
        const float inv = float(1.0 / sum);
        for (int d = 0; d < D; ++d) y[d] *= inv;
      }
    }
  });
}

}  // namespace recipe::kernels
