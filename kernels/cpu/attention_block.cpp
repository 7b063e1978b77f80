// One block of ring attention (context parallelism, ops.hpp AttentionBlockFwdArgs): queries of a
// run of rows of one packed qkv against the keys and values of a run of rows of another (or the
// same), causal on the diagonal block or unmasked, merged into the queries' running out and lse
// with their log-sum-exp; and the block's backward from the final out and lse (flash-attention
// math, as attention.cpp: P = exp(s − lse), dS = P·(dO·V − rowsum(dO∘O))).
//
// Work is split over (batch, head) pairs in the forward and over (batch, kv head) groups in the
// backward, as attention.cpp: every output element is written by one task in a fixed order, so
// results are bitwise identical for any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
using cpu::axpy;
using cpu::dot;

struct BlockLayout {
  int64_t row;    // floats per token row of qkv and kv
  int64_t k_off;  // offset of k head 0 within a row
  int64_t v_off;  // offset of v head 0 within a row
  int group;      // q heads per kv head
};

BlockLayout check_block(const char* op, const Tensor& qkv, const Tensor& kv, const Tensor& out, const Tensor& lse,
                        const AttentionShape& sh, int q_begin, int q_len, int k_begin, int k_len, bool causal) {
  const int B = sh.B, T = sh.T, Hq = sh.Hq, Hkv = sh.Hkv, D = sh.D;
  cpu::require(B >= 0 && T >= 0 && Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0, op,
               "need B, T >= 0, D > 0 and Hkv dividing Hq; got B=" + std::to_string(B) + " T=" + std::to_string(T) +
                   " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  cpu::require(q_begin >= 0 && q_len >= 0 && q_begin + q_len <= T && k_begin >= 0 && k_len >= 0 &&
                   k_begin + k_len <= T && (!causal || q_len == k_len),
               op,
               "rows q [" + std::to_string(q_begin) + ", +" + std::to_string(q_len) + ") and k [" +
                   std::to_string(k_begin) + ", +" + std::to_string(k_len) + ") must lie in T=" + std::to_string(T) +
                   (causal ? " and be equally long (causal)" : ""));
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  for (const auto& [t, name] : {std::pair{&qkv, "qkv"}, std::pair{&kv, "kv"}}) {
    cpu::require_tensor(*t, op, name, DType::f32);
    cpu::require_numel(*t, int64_t(B) * T * row, op, name);
  }
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_tensor(lse, op, "lse", DType::f32);
  cpu::require_numel(out, int64_t(B) * T * Hq * D, op, "out");
  cpu::require_numel(lse, int64_t(B) * Hq * T, op, "lse");
  return {row, int64_t(Hq) * D, int64_t(Hq + Hkv) * D, Hq / Hkv};
}
}  // namespace

void CpuBackend::attention_block_fwd(const AttentionBlockFwdArgs& a) {
  const char* op = "attention_block_fwd";
  const AttentionShape& sh = a.shape;
  const auto L = check_block(op, a.qkv, a.kv, a.out, a.lse, sh, a.q_begin, a.q_len, a.k_begin, a.k_len, a.causal);
  const int T = sh.T, Hq = sh.Hq, D = sh.D;
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float* xq = a.qkv.as<float>();
  const float* xk = a.kv.as<float>();
  float* o = a.out.as<float>();
  float* lse_p = a.lse.as<float>();
  const double work = double(sh.B) * Hq * a.q_len * a.k_len * D;
  cpu::parallel_for(int64_t(sh.B) * Hq, threads(), work, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(std::max(a.k_len, 1))), y(static_cast<size_t>(D));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq;
      const int h = int(bh % Hq), kvh = h / L.group;
      const float* qseq = xq + b * T * L.row;
      const float* kseq = xk + (b * T + a.k_begin) * L.row;
      for (int i = 0; i < a.q_len; ++i) {
        const int t = a.q_begin + i;
        const float* q = qseq + t * L.row + int64_t(h) * D;
        const int hi = a.causal ? i + 1 : a.k_len;  // keys [0, hi) of the block
        if (hi == 0) continue;                      // no key: nothing to merge
        float max_s = -INFINITY;
        for (int j = 0; j < hi; ++j) {
          p[j] = dot(q, kseq + j * L.row + L.k_off + int64_t(kvh) * D, D) * scale;
          max_s = std::max(max_s, p[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < hi; ++j) {
          p[j] = std::exp(p[j] - max_s);
          sum += p[j];
        }
        std::fill(y.begin(), y.end(), 0.0f);
        for (int j = 0; j < hi; ++j) axpy(y.data(), p[j], kseq + j * L.row + L.v_off + int64_t(kvh) * D, D);
        const float blk_lse = max_s + float(std::log(sum));
        float* dst = o + (b * T + t) * int64_t(Hq) * D + int64_t(h) * D;
        float& lse_t = lse_p[(b * Hq + h) * T + t];
        if (!a.merge) {
          const float inv = float(1.0 / sum);
          for (int d = 0; d < D; ++d) dst[d] = y[d] * inv;
          lse_t = blk_lse;
          continue;
        }
        // Merge in double: new = logaddexp(old, block); weights exp(old − new), exp(block − new).
        const double m = std::max(double(lse_t), double(blk_lse));
        const double both = m + std::log(std::exp(double(lse_t) - m) + std::exp(double(blk_lse) - m));
        const double w_old = std::exp(double(lse_t) - both);
        const double w_blk = std::exp(double(blk_lse) - both) / sum;  // y is unnormalised
        for (int d = 0; d < D; ++d) dst[d] = float(w_old * double(dst[d]) + w_blk * double(y[d]));
        lse_t = float(both);
      }
    }
  });
}

void CpuBackend::attention_block_bwd(const AttentionBlockBwdArgs& a) {
  const char* op = "attention_block_bwd";
  const AttentionShape& sh = a.shape;
  const auto L = check_block(op, a.qkv, a.kv, a.out, a.lse, sh, a.q_begin, a.q_len, a.k_begin, a.k_len, a.causal);
  for (const auto& [t, name] : {std::pair{&a.dq, "dq"}, std::pair{&a.dkv, "dkv"}}) {
    cpu::require_tensor(*t, op, name, DType::f32);
    cpu::require_numel(*t, a.qkv.numel(), op, name);
  }
  cpu::require_tensor(a.dout, op, "dout", DType::f32);
  cpu::require_numel(a.dout, a.out.numel(), op, "dout");
  const int T = sh.T, Hq = sh.Hq, Hkv = sh.Hkv, D = sh.D;
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float* xq = a.qkv.as<float>();
  const float* xk = a.kv.as<float>();
  const float* o = a.out.as<float>();
  const float* dy = a.dout.as<float>();
  const float* lse_p = a.lse.as<float>();
  float* dq_p = a.dq.as<float>();
  float* dkv_p = a.dkv.as<float>();
  const double work = 2.0 * sh.B * Hq * a.q_len * a.k_len * D;
  cpu::parallel_for(int64_t(sh.B) * Hkv, threads(), work, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(std::max(a.k_len, 1))), ds(p.size());
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / Hkv;
      const int g = int(bg % Hkv);
      const float* qseq = xq + b * T * L.row;
      const float* kseq = xk + (b * T + a.k_begin) * L.row;
      float* dqseq = dq_p + b * T * L.row;
      float* dkseq = dkv_p + (b * T + a.k_begin) * L.row;
      for (int h = g * L.group; h < (g + 1) * L.group; ++h) {
        for (int i = 0; i < a.q_len; ++i) {
          const int t = a.q_begin + i;
          const float* q = qseq + t * L.row + int64_t(h) * D;
          const int64_t o_idx = (b * T + t) * int64_t(Hq) * D + int64_t(h) * D;
          const float* do_t = dy + o_idx;
          const float lse_t = lse_p[(b * Hq + h) * T + t];
          const float delta = dot(do_t, o + o_idx, D);  // rowsum(dO∘O) over all blocks' keys
          float* dq = dqseq + t * L.row + int64_t(h) * D;
          const int hi = a.causal ? i + 1 : a.k_len;
          for (int j = 0; j < hi; ++j) {
            const float* k = kseq + j * L.row + L.k_off + int64_t(g) * D;
            const float* v = kseq + j * L.row + L.v_off + int64_t(g) * D;
            p[j] = std::exp(dot(q, k, D) * scale - lse_t);
            ds[j] = p[j] * (dot(do_t, v, D) - delta) * scale;
            axpy(dq, ds[j], k, D);
          }
          for (int j = 0; j < hi; ++j) {
            axpy(dkseq + j * L.row + L.k_off + int64_t(g) * D, ds[j], q, D);
            axpy(dkseq + j * L.row + L.v_off + int64_t(g) * D, p[j], do_t, D);
          }
        }
      }
    }
  });
}

}  // namespace recipe::kernels
