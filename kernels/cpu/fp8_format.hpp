// The two FP8 formats of the OCP 8-bit floating point specification (and of Hopper's tensor cores,
// cuda_fp8.h's __NV_E4M3 / __NV_E5M2), encoded and decoded on the host. The CPU backend emulates
// FP8 GEMMs with them, and the CUDA casts are tested byte for byte against them.
//
//   E4M3 ("fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities: S.1111.111 is NaN,
//                so the largest finite value is S.1111.110 = 1.75·2^8 = 448. Smallest normal 2^-6,
//                subnormals k·2^-9 (k = 1..7).
//   E5M2:        sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: S.11111.00 is ±inf,
//                S.11111.xx (xx ≠ 0) NaN; largest finite 1.75·2^15 = 57344. Smallest normal 2^-14,
//                subnormals k·2^-16 (k = 1..3).
// Encoding (what cuda_fp8.h's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, fmt) does): round to nearest,
// ties to even, into the format's grid (subnormals included); magnitudes beyond the largest finite
// value, infinities included, saturate to ±max; NaN becomes 0x7F (a NaN in both formats).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/tensor.hpp"

namespace recipe::kernels::fp8 {

struct Format {
  int mantissa_bits, exponent_bias;
  float max;
};
constexpr Format kE4M3{3, 7, 448.f};
constexpr Format kE5M2{2, 15, 57344.f};
inline const Format& format_of(DType t) { return t == DType::e5m2 ? kE5M2 : kE4M3; }

constexpr uint8_t kNaN = 0x7F;

inline uint8_t encode(float x, const Format& f) {
  if (std::isnan(x)) return kNaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a > f.max) a = f.max;                 // saturate (±inf too)
  const int min_exp = 1 - f.exponent_bias;  // exponent of the smallest normal
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const int exp = std::max(e - 1, min_exp);
  // The grid spacing at a's binade (subnormals share the smallest normal's); a / step is exact in
  // f32 (a power of two), and nearbyint rounds it to nearest even.
  const float q = std::nearbyint(std::ldexp(a, f.mantissa_bits - exp));
  if (q == 0.f) return sign;
  // q in [0, 2^(m+1)]: 2^(m+1) means the rounding carried into the next binade.
  int qi = static_cast<int>(q), bexp = exp;
  if (qi == (2 << f.mantissa_bits)) qi >>= 1, ++bexp;
  const int implicit = 1 << f.mantissa_bits;
  if (qi < implicit) return static_cast<uint8_t>(sign | qi);  // subnormal (bexp == min_exp)
  const int field = bexp + f.exponent_bias;
  return static_cast<uint8_t>(sign | (field << f.mantissa_bits) | (qi - implicit));
}

inline float decode(uint8_t b, const Format& f) {
  const bool neg = b & 0x80;
  const int field = (b & 0x7F) >> f.mantissa_bits, mant = b & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << (7 - f.mantissa_bits)) - 1;  // the all-ones exponent field
  float v;
  if (f.mantissa_bits == 3 && field == top && mant == 7)
    v = NAN;  // E4M3: only S.1111.111 is special
  else if (f.mantissa_bits == 2 && field == top)
    v = mant ? NAN : INFINITY;
  else if (field == 0)
    v = std::ldexp(float(mant), 1 - f.exponent_bias - f.mantissa_bits);
  else
    v = std::ldexp(float(mant + (1 << f.mantissa_bits)), field - f.exponent_bias - f.mantissa_bits);
  return neg ? -v : v;
}

// The scale of tensorwise current scaling (ops.hpp, Fp8QuantizeArgs): fp8_max / amax in f32; 1 when
// amax is 0 or not finite, or when the quotient is not finite (an amax so small that every value
// would be scaled past f32's range: they are negligible, and scale 1 flushes them to 0).
inline float scale_from_amax(float amax, const Format& f) {
  if (!(amax > 0.f) || !std::isfinite(amax)) return 1.f;
  const float s = f.max / amax;
  return std::isfinite(s) ? s : 1.f;
}

// Delayed scaling (Fp8AmaxHistoryArgs in kernels/ops.hpp): amaxes and their scale sources live in
// 16-byte cells of this many floats, the value in the first.
inline constexpr int64_t kCellFloats = 4;

// One tensor's history roll: with push, h[0 .. H) shifts one older (h[H-1] drops), h[0] = *amax,
// *amax = 0. Returns the amax its next scale comes from: h[0] (most_recent) or the history's max
// (fmax: order-independent, the CUDA kernel's loop gives the same value).
inline float roll_amax_history(float* h, int64_t H, float* amax, bool push, bool most_recent) {
  if (push) {
    for (int64_t i = H - 1; i > 0; --i) h[i] = h[i - 1];
    h[0] = *amax;
    *amax = 0.f;
  }
  if (most_recent) return h[0];
  float m = 0.f;
  for (int64_t i = 0; i < H; ++i) m = std::fmax(m, h[i]);
  return m;
}

}  // namespace recipe::kernels::fp8
