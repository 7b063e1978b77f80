// Rotary position embedding on the q and k heads of packed qkv [B, T, (Hq + 2·Hkv)·D], in place;
// v heads are untouched. "rotate_half" pairing as HF Llama: element i pairs with i + D/2 and is
// rotated by angle t·θ^(-2i/D), t the 0-based position in the sequence:
//   y[i] = x[i]·cos − x[i+D/2]·sin,   y[i+D/2] = x[i+D/2]·cos + x[i]·sin.
// The backward applies the inverse (transposed) rotation to the gradient, also in place.
// Angles, cos and sin are computed in double for a reference-quality result.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
void rope_apply(const char* op, Tensor qkv, int B, int T, int Hq, int Hkv, int D, float theta, float sign) {
  cpu::require_tensor(qkv, op, "qkv", DType::f32);
  cpu::require(B >= 0 && T >= 0 && Hq > 0 && Hkv > 0 && D > 0 && D % 2 == 0, op,
               "need B, T >= 0, Hq, Hkv > 0 and an even head dim D; got B=" + std::to_string(B) +
                   " T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) +
                   " D=" + std::to_string(D));
  cpu::require(theta > 0.0f, op, "theta=" + std::to_string(theta) + " must be positive");
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  cpu::require_numel(qkv, int64_t(B) * T * row, op, "qkv");
  const int half = D / 2;
  std::vector<double> cos_t(half), sin_t(half), inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(double(theta), -2.0 * i / D);
  float* base = qkv.as<float>();
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      double angle = double(t) * inv_freq[i];
      cos_t[i] = std::cos(angle);
      sin_t[i] = sign * std::sin(angle);
    }
    for (int b = 0; b < B; ++b) {
      float* tok = base + (int64_t(b) * T + t) * row;
      for (int h = 0; h < Hq + Hkv; ++h) {  // q heads then k heads are contiguous
        float* x = tok + int64_t(h) * D;
        for (int i = 0; i < half; ++i) {
          double x1 = x[i], x2 = x[i + half];
          x[i] = float(x1 * cos_t[i] - x2 * sin_t[i]);
          x[i + half] = float(x2 * cos_t[i] + x1 * sin_t[i]);
        }
      }
    }
  }
}
}  // namespace

void CpuBackend::rope_fwd(Tensor qkv, int B, int T, int Hq, int Hkv, int D, float theta) {
  rope_apply("rope_fwd", qkv, B, T, Hq, Hkv, D, theta, 1.0f);
}

// The rotation is orthogonal, so its transpose (the backward) is the rotation by −angle.
void CpuBackend::rope_bwd(Tensor dqkv, int B, int T, int Hq, int Hkv, int D, float theta) {
  rope_apply("rope_bwd", dqkv, B, T, Hq, Hkv, D, theta, -1.0f);
}

}  // namespace recipe::kernels
