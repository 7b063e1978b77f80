// Causal scaled-dot-product attention on packed qkv [B, T, (Hq + 2·Hkv)·D] (see ops.hpp), with
// GQA: q head h reads kv head h / (Hq/Hkv). Forward saves lse [B, Hq, T] (natural log of the
// softmax denominator of the scaled scores); backward recomputes the probabilities from it
// (flash-attention math), so neither pass holds a T×T matrix — only one row of T scores.
//
// With positions (packed samples, ops.hpp) query t sees only keys j ≥ t - positions[b, t], the
// first token of its sample; the loops start there instead of 0, so the unpacked op is unchanged.
//
// Work is split over (batch, head) pairs in the forward and over (batch, kv head) groups in the
// backward, so every output element is written by exactly one task and summed in a fixed order:
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

struct AttentionLayout {
  int64_t row;    // floats per token row of qkv
  int64_t k_off;  // offset of k head 0 within a row
  int64_t v_off;  // offset of v head 0 within a row
  int group;      // q heads per kv head
};

AttentionLayout check_attention(const char* op, const Tensor& qkv, const Tensor& out, const Tensor& lse, int B, int T,
                                int Hq, int Hkv, int D) {
  cpu::require(B >= 0 && T >= 0 && Hq > 0 && Hkv > 0 && D > 0 && Hq % Hkv == 0, op,
               "need B, T >= 0, D > 0 and Hkv dividing Hq; got B=" + std::to_string(B) + " T=" + std::to_string(T) +
                   " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D));
  cpu::require_tensor(qkv, op, "qkv", DType::f32);
  cpu::require_tensor(out, op, "out", DType::f32);
  cpu::require_tensor(lse, op, "lse", DType::f32);
  int64_t row = int64_t(Hq + 2 * Hkv) * D;
  cpu::require_numel(qkv, int64_t(B) * T * row, op, "qkv");
  cpu::require_numel(out, int64_t(B) * T * Hq * D, op, "out");
  cpu::require_numel(lse, int64_t(B) * Hq * T, op, "lse");
  return {row, int64_t(Hq) * D, int64_t(Hq + Hkv) * D, Hq / Hkv};
}

// The per-sample positions as [B·T] ints (nullptr when undefined), checked: i32, B·T values,
// each 0 or one more than the token before it in its row.
const int32_t* check_positions(const char* op, const Tensor& positions, int B, int T) {
  if (!positions.defined()) return nullptr;
  cpu::require_tensor(positions, op, "positions", DType::i32);
  cpu::require_numel(positions, int64_t(B) * T, op, "positions");
  const int32_t* pos = positions.as<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int32_t v = pos[b * T + t];
      cpu::require(v == 0 || (t > 0 && v == pos[b * T + t - 1] + 1), op,
                   "positions[" + std::to_string(b) + ", " + std::to_string(t) + "] = " + std::to_string(v) +
                       " must be 0 (a sample starts) or one more than the position before it");
    }
  return pos;
}
}  // namespace

void CpuBackend::attention_fwd(const AttentionFwdArgs& args) {
  const Tensor out = args.out, lse = args.lse, qkv = args.qkv;
  const int B = args.shape.B, T = args.shape.T, Hq = args.shape.Hq, Hkv = args.shape.Hkv, D = args.shape.D;
  const auto L = check_attention("attention_fwd", qkv, out, lse, B, T, Hq, Hkv, D);
  const int32_t* pos = check_positions("attention_fwd", args.positions, B, T);
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float* x = qkv.as<float>();
  float* o = out.as<float>();
  float* lse_p = lse.as<float>();
  const double work = double(B) * Hq * T * T * D;
  cpu::parallel_for(int64_t(B) * Hq, threads(), work, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(T));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq;
      const int h = int(bh % Hq), kvh = h / L.group;
      const float* seq = x + b * T * L.row;
      for (int t = 0; t < T; ++t) {
        const float* q = seq + t * L.row + int64_t(h) * D;
        const int lo = pos ? t - pos[b * T + t] : 0;  // first key of t's sample
        float max_s = -INFINITY;
        for (int j = lo; j <= t; ++j) {
          p[j] = dot(q, seq + j * L.row + L.k_off + int64_t(kvh) * D, D) * scale;
          max_s = std::max(max_s, p[j]);
        }
        double sum = 0.0;
        for (int j = lo; j <= t; ++j) {
          p[j] = std::exp(p[j] - max_s);
          sum += p[j];
        }
        float* y = o + (b * T + t) * int64_t(Hq) * D + int64_t(h) * D;
        std::memset(y, 0, sizeof(float) * size_t(D));
        for (int j = lo; j <= t; ++j) axpy(y, p[j], seq + j * L.row + L.v_off + int64_t(kvh) * D, D);
        const float inv = float(1.0 / sum);
        for (int d = 0; d < D; ++d) y[d] *= inv;
        lse_p[(b * Hq + h) * T + t] = max_s + float(std::log(sum));
      }
    }
  });
}

void CpuBackend::attention_bwd(const AttentionBwdArgs& args) {
  const Tensor dqkv = args.dqkv, dout = args.dout, qkv = args.qkv, out = args.out, lse = args.lse;
  const int B = args.shape.B, T = args.shape.T, Hq = args.shape.Hq, Hkv = args.shape.Hkv, D = args.shape.D;
  const char* op = "attention_bwd";
  const auto L = check_attention(op, qkv, out, lse, B, T, Hq, Hkv, D);
  cpu::require_tensor(dqkv, op, "dqkv", DType::f32);
  cpu::require_numel(dqkv, qkv.numel(), op, "dqkv");
  cpu::require_tensor(dout, op, "dout", DType::f32);
  cpu::require_numel(dout, out.numel(), op, "dout");
  const int32_t* pos = check_positions(op, args.positions, B, T);
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float* x = qkv.as<float>();
  const float* o = out.as<float>();
  const float* dy = dout.as<float>();
  const float* lse_p = lse.as<float>();
  float* dx = dqkv.as<float>();
  std::memset(dx, 0, dqkv.bytes());
  const double work = 2.0 * B * Hq * T * T * D;
  cpu::parallel_for(int64_t(B) * Hkv, threads(), work, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(T)), ds(static_cast<size_t>(T));
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / Hkv;
      const int g = int(bg % Hkv);
      const float* seq = x + b * T * L.row;
      float* dseq = dx + b * T * L.row;
      for (int h = g * L.group; h < (g + 1) * L.group; ++h) {
        for (int t = 0; t < T; ++t) {
          const float* q = seq + t * L.row + int64_t(h) * D;
          const int64_t o_idx = (b * T + t) * int64_t(Hq) * D + int64_t(h) * D;
          const float* do_t = dy + o_idx;
          const float lse_t = lse_p[(b * Hq + h) * T + t];
          const float delta = dot(do_t, o + o_idx, D);  // rowsum(dO∘O) = Σ_j P_j·dP_j
          float* dq = dseq + t * L.row + int64_t(h) * D;
          const int lo = pos ? t - pos[b * T + t] : 0;  // first key of t's sample
          for (int j = lo; j <= t; ++j) {
            const float* k = seq + j * L.row + L.k_off + int64_t(g) * D;
            const float* v = seq + j * L.row + L.v_off + int64_t(g) * D;
            p[j] = std::exp(dot(q, k, D) * scale - lse_t);
            ds[j] = p[j] * (dot(do_t, v, D) - delta) * scale;
            axpy(dq, ds[j], k, D);
          }
          for (int j = lo; j <= t; ++j) {
            float* dk = dseq + j * L.row + L.k_off + int64_t(g) * D;
            float* dv = dseq + j * L.row + L.v_off + int64_t(g) * D;
            axpy(dk, ds[j], q, D);
            axpy(dv, p[j], do_t, D);
          }
        }
      }
    }
  });
}

}  // namespace recipe::kernels
