// Rotary position embedding on the q and k heads of packed qkv [B, T, (Hq + 2·Hkv)·D], in place;
// v heads are untouched. "rotate_half" pairing as HF Llama: element i pairs with i + D/2 and is
// rotated by angle t·inv_freq[i] (the run's table, ops.hpp; θ^(-2i/D) unscaled), t the 0-based
// position in the sequence:
//   y[i] = x[i]·cos − x[i+D/2]·sin,   y[i+D/2] = x[i+D/2]·cos + x[i]·sin.
// With positions (packed samples, or positions in the whole sample under context parallelism;
// ops.hpp) the angle uses positions[b, t] instead of t.
// The backward applies the inverse (transposed) rotation to the gradient, also in place.
// Angles, cos and sin are computed in double for a reference-quality result.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

namespace {
void rope_apply(const char* op, const RopeArgs& a, float sign) {
  const Tensor qkv = a.qkv;
  const int B = a.shape.B, T = a.shape.T, Hq = a.shape.Hq, Hkv = a.shape.Hkv, D = a.shape.D;
  cpu::require_tensor(qkv, op, "qkv", DType::f32);
  cpu::require(B >= 0 && T >= 0 && Hq > 0 && Hkv > 0 && D > 0 && D % 2 == 0, op,
               "need B, T >= 0, Hq, Hkv > 0 and an even head dim D; got B=" + std::to_string(B) +
                   " T=" + std::to_string(T) + " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) +
                   " D=" + std::to_string(D));
  cpu::require_tensor(a.inv_freq, op, "inv_freq", DType::f64);
  cpu::require_numel(a.inv_freq, D / 2, op, "inv_freq");
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  cpu::require_numel(qkv, int64_t(B) * T * row, op, "qkv");
  cpu::RopeAngles rope(a.inv_freq.as<double>(), D);
  float* base = qkv.as<float>();
  if (a.positions.defined()) {
    cpu::require_tensor(a.positions, op, "positions", DType::i32);
    cpu::require_numel(a.positions, int64_t(B) * T, op, "positions");
    const int32_t* pos = a.positions.as<int32_t>();
    for (int64_t bt = 0; bt < int64_t(B) * T; ++bt) {
      // Any non-negative position is an angle (ops.hpp: context parallelism passes positions in the
      // whole sample, beyond this call's T).
      cpu::require(pos[bt] >= 0, op,
                   "positions[" + std::to_string(bt) + "] = " + std::to_string(pos[bt]) + " is negative");
      rope.at(pos[bt], sign);
      rope.rotate(base + bt * row, Hq + Hkv, D);  // q heads then k heads are contiguous
    }
    return;
  }
  for (int t = 0; t < T; ++t) {
    rope.at(t, sign);
    for (int b = 0; b < B; ++b) rope.rotate(base + (int64_t(b) * T + t) * row, Hq + Hkv, D);
  }
}
}  // namespace

void CpuBackend::rope_fwd(const RopeArgs& a) { rope_apply("rope_fwd", a, 1.0f); }

// The rotation is orthogonal, so its transpose (the backward) is the rotation by −angle.
void CpuBackend::rope_bwd(const RopeArgs& a) { rope_apply("rope_bwd", a, -1.0f); }

}  // namespace recipe::kernels
