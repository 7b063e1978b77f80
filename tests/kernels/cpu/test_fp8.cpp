// FP8 on the CPU reference: the E4M3/E5M2 encodings against the formats' tables (hand-picked
// values: zero, ones, the largest finite, saturation, subnormals, ties to even, NaN, and the round
// trip of every byte), tensorwise current scaling (amax, scale = max/amax, amax 0 → 1), the
// quantize op (with its transposed copy and its fused amax record), its fusions into the SwiGLU
// backward and forward, delayed scaling's history roll, and the emulated FP8 linear against a double-precision
// evaluation of q(x)·q(W)ᵀ.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/fp8_format.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;
using fp8::decode;
using fp8::encode;
using fp8::kE4M3;
using fp8::kE5M2;

namespace {

Tensor bytes_view(std::vector<uint8_t>& v, DType t, std::initializer_list<int64_t> shape) {
  Tensor x(v.data(), t, Device::cpu, shape);
  REQUIRE(x.numel() == int64_t(v.size()));
  return x;
}

}  // namespace

TEST_CASE("fp8 E4M3 encoding: table values, saturation, subnormals, ties to even, NaN") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(encode(0.f, kE4M3) == 0x00);
  CHECK(encode(-0.f, kE4M3) == 0x80);
  CHECK(encode(1.f, kE4M3) == 0x38);    // 0.0111.000
  CHECK(encode(-2.f, kE4M3) == 0xC0);   // 1.1000.000
  CHECK(encode(240.f, kE4M3) == 0x77);  // 1.875·2^7 = 0.1110.111
  CHECK(encode(448.f, kE4M3) == 0x7E);  // largest finite: 0.1111.110
  CHECK(encode(464.f, kE4M3) == 0x7E);  // the midpoint to 480 (which would be NaN) saturates
  CHECK(encode(1e6f, kE4M3) == 0x7E);   // saturation
  CHECK(encode(inf, kE4M3) == 0x7E);    // satfinite: ±inf → ±max
  CHECK(encode(-inf, kE4M3) == 0xFE);
  CHECK(encode(std::ldexp(1.f, -6), kE4M3) == 0x08);     // smallest normal
  CHECK(encode(std::ldexp(1.f, -9), kE4M3) == 0x01);     // smallest subnormal
  CHECK(encode(std::ldexp(7.f, -9), kE4M3) == 0x07);     // largest subnormal
  CHECK(encode(std::ldexp(7.5f, -9), kE4M3) == 0x08);    // tie → even: rounds up into the normals
  CHECK(encode(std::ldexp(1.f, -10), kE4M3) == 0x00);    // tie between 0 and 2^-9 → 0 (even)
  CHECK(encode(std::ldexp(1.5f, -9), kE4M3) == 0x02);    // tie between 1 and 2 (·2^-9) → 2
  CHECK(encode(std::ldexp(2.5f, -9), kE4M3) == 0x02);    // tie between 2 and 3 → 2
  CHECK(encode(std::ldexp(1.01f, -10), kE4M3) == 0x01);  // just above the tie → up
  CHECK(encode(1.0625f, kE4M3) == 0x38);                 // tie between 1 and 1.125 → 1 (mantissa 0)
  CHECK(encode(1.1875f, kE4M3) == 0x3A);                 // tie between 1.125 and 1.25 → 1.25 (mantissa 2)
  CHECK(encode(1.9375f, kE4M3) == 0x40);                 // tie between 1.875 and 2 → 2: carries into the exponent
  CHECK(encode(1.07f, kE4M3) == 0x39);                   // nearest: 1.125
  CHECK(encode(nan, kE4M3) == 0x7F);
  CHECK(std::isnan(decode(0x7F, kE4M3)));
  CHECK(std::isnan(decode(0xFF, kE4M3)));
  CHECK(decode(0x7E, kE4M3) == 448.f);
  CHECK(decode(0x01, kE4M3) == std::ldexp(1.f, -9));
  CHECK(decode(0xB8, kE4M3) == -1.f);
}

TEST_CASE("fp8 E5M2 encoding: table values, saturation, subnormals, ties to even, inf and NaN") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(encode(1.f, kE5M2) == 0x3C);      // 0.01111.00
  CHECK(encode(57344.f, kE5M2) == 0x7B);  // largest finite: 0.11110.11
  CHECK(encode(61440.f, kE5M2) == 0x7B);  // the midpoint to inf saturates
  CHECK(encode(inf, kE5M2) == 0x7B);      // satfinite
  CHECK(encode(-1e9f, kE5M2) == 0xFB);
  CHECK(encode(std::ldexp(1.f, -14), kE5M2) == 0x04);  // smallest normal
  CHECK(encode(std::ldexp(1.f, -16), kE5M2) == 0x01);  // smallest subnormal
  CHECK(encode(std::ldexp(1.f, -17), kE5M2) == 0x00);  // tie → 0
  CHECK(encode(std::ldexp(3.f, -17), kE5M2) == 0x02);  // tie between 1 and 2 (·2^-16) → 2
  CHECK(encode(1.125f, kE5M2) == 0x3C);                // tie between 1 and 1.25 → 1
  CHECK(encode(1.375f, kE5M2) == 0x3E);                // tie between 1.25 and 1.5 → 1.5
  CHECK(encode(nan, kE5M2) == 0x7F);
  CHECK(decode(0x7C, kE5M2) == inf);
  CHECK(decode(0xFC, kE5M2) == -inf);
  CHECK(std::isnan(decode(0x7D, kE5M2)));
  CHECK(decode(0x7B, kE5M2) == 57344.f);
}

TEST_CASE("fp8 encodings: every finite byte decodes to a value that encodes back to it, in increasing order") {
  for (const fp8::Format* f : {&kE4M3, &kE5M2}) {
    CAPTURE(f->mantissa_bits);
    float previous = -1.f;
    int finite = 0;
    for (int b = 0; b < 0x80; ++b) {
      const float v = decode(uint8_t(b), *f);
      if (!std::isfinite(v)) continue;
      ++finite;
      CHECK(encode(v, *f) == b);
      CHECK(encode(-v, *f) == (b | 0x80));
      CHECK(v > previous);
      previous = v;
    }
    CHECK(previous == f->max);
    CHECK(finite == (f == &kE4M3 ? 127 : 124));  // E4M3: one NaN; E5M2: inf and three NaNs
  }
}

TEST_CASE("fp8 tensorwise scale: max/amax in f32, 1 for amax 0, non-finite amax, or an overflowing quotient") {
  CHECK(fp8::scale_from_amax(448.f, kE4M3) == 1.f);
  CHECK(fp8::scale_from_amax(2.f, kE4M3) == 224.f);
  CHECK(fp8::scale_from_amax(3.f, kE4M3) == 448.f / 3.f);
  CHECK(fp8::scale_from_amax(2.f, kE5M2) == 28672.f);
  CHECK(fp8::scale_from_amax(0.f, kE4M3) == 1.f);
  CHECK(fp8::scale_from_amax(std::numeric_limits<float>::infinity(), kE4M3) == 1.f);
  CHECK(fp8::scale_from_amax(std::numeric_limits<float>::quiet_NaN(), kE4M3) == 1.f);
  CHECK(fp8::scale_from_amax(1e-40f, kE4M3) == 1.f);  // 448/1e-40 overflows f32
}

TEST_CASE("fp8 amax and quantize (CPU): the largest magnitude maps to the format's max, out_t is the transpose") {
  auto be = make_cpu_backend();
  const int64_t rows = 3, cols = 5;
  std::vector<float> x = {0.5f, -1.f, 2.f, 0.f, 0.25f, -4.f, 1e-3f, 3.f, -0.75f, 1.f, 0.1f, -0.2f, 0.3f, 3.5f, -2.5f};
  x.push_back(std::numeric_limits<float>::quiet_NaN());  // amax ignores NaN (checked on x without it below)
  std::vector<float> amax(1), scale_inv(1);
  be->fp8_amax(view(amax, {1}), view(x, {16}));
  CHECK(amax[0] == 4.f);
  x.pop_back();
  for (DType t : {DType::e4m3, DType::e5m2}) {
    CAPTURE(dtype_name(t));
    const fp8::Format& f = fp8::format_of(t);
    std::vector<uint8_t> q(size_t(rows * cols)), qt(size_t(rows * cols));
    be->fp8_quantize({.out = bytes_view(q, t, {rows, cols}),
                      .out_t = bytes_view(qt, t, {cols, rows}),
                      .scale_inv = view(scale_inv, {1}),
                      .inp = view(x, {rows, cols}),
                      .amax = view(amax, {1}),
                      .cols = cols});
    const float scale = f.max / 4.f;
    CHECK(scale_inv[0] == 1.f / scale);
    CHECK(decode(q[5], f) == -f.max);  // -4 is the amax
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        CHECK(q[size_t(r * cols + c)] == encode(x[size_t(r * cols + c)] * scale, f));
        CHECK(qt[size_t(c * rows + r)] == q[size_t(r * cols + c)]);
      }
    // Dequantized values are within the format's half spacing (relative 2^-(m+1)) of the input.
    for (size_t i = 0; i < x.size(); ++i)
      if (std::fabs(x[i]) * scale >= std::ldexp(1.f, 2 - f.mantissa_bits))  // normal range
        CHECK(std::fabs(decode(q[i], f) * scale_inv[0] - x[i]) <=
              std::fabs(x[i]) * std::ldexp(1.f, -f.mantissa_bits - 1) * 1.0001f);
  }
  // amax 0 (an all-zero tensor): scale 1, every byte 0.
  std::vector<float> zeros(6, 0.f), a0(1);
  std::vector<uint8_t> q0(6, 0xAA);
  be->fp8_amax(view(a0, {1}), view(zeros, {6}));
  be->fp8_quantize({.out = bytes_view(q0, DType::e4m3, {2, 3}),
                    .scale_inv = view(scale_inv, {1}),
                    .inp = view(zeros, {2, 3}),
                    .amax = view(a0, {1}),
                    .cols = 3});
  CHECK(scale_inv[0] == 1.f);
  for (uint8_t b : q0) CHECK(b == 0);
}

TEST_CASE("fp8 quantize with amax_out (CPU): the cast records max |x| into amax_out, accumulating, NaN ignored") {
  auto be = make_cpu_backend();
  std::vector<float> x = {0.5f, -3.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 1.f, -0.25f};
  std::vector<float> src = {8.f}, scale_inv(1), rec = {0.f};
  std::vector<uint8_t> q(6), q_ref(6);
  auto cast = [&](std::vector<uint8_t>& out, Tensor amax_out) {
    be->fp8_quantize({.out = bytes_view(out, DType::e4m3, {2, 3}),
                      .scale_inv = view(scale_inv, {1}),
                      .inp = view(x, {2, 3}),
                      .amax = view(src, {1}),
                      .cols = 3,
                      .amax_out = amax_out});
  };
  cast(q, view(rec, {1}));
  CHECK(rec[0] == 3.f);  // recorded in the same pass; the scale came from src (8), not from x
  CHECK(scale_inv[0] == 1.f / (448.f / 8.f));
  cast(q_ref, Tensor());  // recording does not change the bytes
  CHECK(q == q_ref);
  rec[0] = 5.f;  // a larger amax of an earlier micro-batch stays
  cast(q, view(rec, {1}));
  CHECK(rec[0] == 5.f);
  rec[0] = 1.f;
  cast(q, view(rec, {1}));
  CHECK(rec[0] == 3.f);
}

// The fused cast of the SwiGLU backward (delayed scaling's fc1 output gradient) against the two ops
// it replaces, on shapes with rows and F not multiples of the CUDA tiles: the same bytes in both
// layouts and either alone, the same inverse scale, the same recorded amax.
TEST_CASE("fp8 quantize of the SwiGLU backward (CPU): bit for bit swiglu_bwd then fp8_quantize, odd shapes") {
  auto be = make_cpu_backend();
  struct Shape {
    int64_t rows, F;
  };
  uint32_t seed = 7;
  for (Shape sh : {Shape{1, 1}, Shape{3, 5}, Shape{37, 24}, Shape{65, 67}, Shape{130, 40}}) {
    for (DType t : {DType::e4m3, DType::e5m2}) {
      CAPTURE(sh.rows);
      CAPTURE(sh.F);
      CAPTURE(dtype_name(t));
      const int64_t rows = sh.rows, F = sh.F, n = rows * 2 * F;
      std::vector<float> gu = randn(size_t(n), ++seed, 2.f), dact = randn(size_t(rows * F), ++seed, 1e-2f);
      std::vector<float> dgu(static_cast<size_t>(n)), src = {0.03f}, inv_ref(1), inv(1), rec_ref = {1e-4f},
                                                      rec = {1e-4f};
      be->swiglu_bwd(view(dgu, {rows, 2 * F}), view(dact, {rows, F}), view(gu, {rows, 2 * F}));
      std::vector<uint8_t> q_ref(static_cast<size_t>(n)), qt_ref(static_cast<size_t>(n));
      be->fp8_quantize({.out = bytes_view(q_ref, t, {rows, 2 * F}),
                        .out_t = bytes_view(qt_ref, t, {2 * F, rows}),
                        .scale_inv = view(inv_ref, {1}),
                        .inp = view(dgu, {rows, 2 * F}),
                        .amax = view(src, {1}),
                        .cols = 2 * F,
                        .amax_out = view(rec_ref, {1})});
      for (int layouts = 1; layouts <= 3; ++layouts) {  // out, out_t, both
        CAPTURE(layouts);
        std::vector<uint8_t> q(size_t(n), 0xAA), qt(size_t(n), 0xAA);
        rec[0] = 1e-4f;
        be->fp8_quantize_swiglu_bwd({.out = layouts & 1 ? bytes_view(q, t, {rows, 2 * F}) : Tensor(),
                                     .out_t = layouts & 2 ? bytes_view(qt, t, {2 * F, rows}) : Tensor(),
                                     .scale_inv = view(inv, {1}),
                                     .dout = view(dact, {rows, F}),
                                     .gate_up = view(gu, {rows, 2 * F}),
                                     .amax = view(src, {1}),
                                     .amax_out = view(rec, {1})});
        if (layouts & 1) CHECK(q == q_ref);
        if (layouts & 2) CHECK(qt == qt_ref);
        CHECK(inv[0] == inv_ref[0]);
        CHECK(rec[0] == rec_ref[0]);
      }
      CHECK(rec_ref[0] > 1e-4f);  // the record saw the gradient (not only the seed value)
    }
  }
}

// The SwiGLU forward with its output's cast (delayed scaling's fc2 input) against swiglu_fwd then
// fp8_quantize: the same act-dtype output, bytes, inverse scale and recorded amax, on odd shapes.
TEST_CASE("fp8 SwiGLU forward with its cast (CPU): bit for bit swiglu_fwd then fp8_quantize, odd shapes") {
  auto be = make_cpu_backend();
  uint32_t seed = 70;
  for (const std::pair<int64_t, int64_t> shape : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {37, 24}, {65, 67}}) {
    for (DType t : {DType::e4m3, DType::e5m2}) {
      const int64_t rows = shape.first, F = shape.second;
      CAPTURE(rows);
      CAPTURE(F);
      CAPTURE(dtype_name(t));
      std::vector<float> gu = randn(static_cast<size_t>(rows * 2 * F), ++seed, 2.f);
      std::vector<float> act_ref(static_cast<size_t>(rows * F)), act(static_cast<size_t>(rows * F), -1.f);
      std::vector<float> src = {1.5f}, inv_ref(1), inv(1), rec_ref = {1e-4f}, rec = {1e-4f};
      std::vector<uint8_t> q_ref(static_cast<size_t>(rows * F)), q(static_cast<size_t>(rows * F), 0xAA);
      be->swiglu_fwd(view(act_ref, {rows, F}), view(gu, {rows, 2 * F}));
      be->fp8_quantize({.out = bytes_view(q_ref, t, {rows, F}),
                        .scale_inv = view(inv_ref, {1}),
                        .inp = view(act_ref, {rows, F}),
                        .amax = view(src, {1}),
                        .cols = F,
                        .amax_out = view(rec_ref, {1})});
      be->fp8_swiglu_fwd_quantize({.out = view(act, {rows, F}),
                                   .q = bytes_view(q, t, {rows, F}),
                                   .scale_inv = view(inv, {1}),
                                   .gate_up = view(gu, {rows, 2 * F}),
                                   .amax = view(src, {1}),
                                   .amax_out = view(rec, {1})});
      CHECK(act == act_ref);
      CHECK(q == q_ref);
      CHECK(inv[0] == inv_ref[0]);
      CHECK(rec[0] == rec_ref[0]);
      CHECK(rec_ref[0] > 1e-4f);
    }
  }
}

TEST_CASE("fp8 amax history (CPU): push drops the oldest, max vs most_recent, H = 1, push=false only recomputes") {
  auto be = make_cpu_backend();
  // Two tensors, H = 3, cells of 4 floats (the value in the first).
  std::vector<float> hist = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::vector<float> amax = {2.f, 9, 9, 9, 7.f, 9, 9, 9}, src(8, -1.f);
  auto roll = [&](bool most_recent, bool push = true) {
    be->fp8_amax_history({.history = view(hist, {2, 3}),
                          .amax = view(amax, {2, 4}),
                          .scale_amax = view(src, {2, 4}),
                          .most_recent = most_recent,
                          .push = push});
  };
  roll(false);
  CHECK(hist == std::vector<float>{2.f, 0.f, 0.f, 7.f, 0.f, 0.f});
  CHECK(amax[0] == 0.f);  // reset for the next step's recording
  CHECK(amax[4] == 0.f);
  CHECK(amax[1] == 9.f);  // the cell's padding is not touched
  CHECK(src[0] == 2.f);
  CHECK(src[4] == 7.f);
  CHECK(src[1] == -1.f);
  amax[0] = 1.f, amax[4] = 3.f;
  roll(false);
  CHECK(hist == std::vector<float>{1.f, 2.f, 0.f, 3.f, 7.f, 0.f});
  CHECK(src[0] == 2.f);  // max over the history
  CHECK(src[4] == 7.f);
  amax[0] = 0.5f, amax[4] = 4.f;
  roll(true);
  CHECK(hist == std::vector<float>{0.5f, 1.f, 2.f, 4.f, 3.f, 7.f});
  CHECK(src[0] == 0.5f);  // most recent
  CHECK(src[4] == 4.f);
  amax[0] = 0.25f, amax[4] = 1.f;
  roll(false);  // the oldest (2 and 7) dropped: the max is what is left
  CHECK(hist == std::vector<float>{0.25f, 0.5f, 1.f, 1.f, 4.f, 3.f});
  CHECK(src[0] == 1.f);
  CHECK(src[4] == 4.f);
  // push = false (after a restore): the sources from the history as it is, nothing moves.
  src.assign(8, -1.f);
  amax[0] = 100.f;
  roll(false, false);
  CHECK(hist == std::vector<float>{0.25f, 0.5f, 1.f, 1.f, 4.f, 3.f});
  CHECK(amax[0] == 100.f);
  CHECK(src[0] == 1.f);
  CHECK(src[4] == 4.f);
  // H = 1: max and most recent agree, the history is the last step's amax; an infinite amax is
  // kept (the scale from it is 1, fp8_quantize's guard).
  std::vector<float> h1 = {5.f}, a1 = {std::numeric_limits<float>::infinity(), 0, 0, 0}, s1(4);
  be->fp8_amax_history({.history = view(h1, {1, 1}), .amax = view(a1, {1, 4}), .scale_amax = view(s1, {1, 4})});
  CHECK(std::isinf(h1[0]));
  CHECK(std::isinf(s1[0]));
  CHECK(fp8::scale_from_amax(s1[0], kE4M3) == 1.f);
}

TEST_CASE("fp8 linear (CPU emulation): forward and backward are q(x)·q(W)ᵀ in exact arithmetic, ~E4M3-close to f32") {
  auto be = make_cpu_backend();
  const int64_t N = 16, IC = 32, OC = 16;
  std::vector<float> x = randn(size_t(N * IC), 1), w = randn(size_t(OC * IC), 2, 0.1f), b = randn(size_t(OC), 3);
  std::vector<float> dy = randn(size_t(N * OC), 4);
  struct Q {
    std::vector<uint8_t> q, qt;
    std::vector<float> amax = {0}, sinv = {0};
  };
  // Quantize x (e4m3), W (e4m3) and dy (e5m2), each with its transpose.
  auto quantize = [&](std::vector<float>& v, int64_t rows, int64_t cols, DType t) {
    Q r;
    r.q.resize(size_t(rows * cols));
    r.qt.resize(size_t(rows * cols));
    be->fp8_amax(view(r.amax, {1}), view(v, {rows, cols}));
    be->fp8_quantize({.out = bytes_view(r.q, t, {rows, cols}),
                      .out_t = bytes_view(r.qt, t, {cols, rows}),
                      .scale_inv = view(r.sinv, {1}),
                      .inp = view(v, {rows, cols}),
                      .amax = view(r.amax, {1}),
                      .cols = cols});
    return r;
  };
  Q qx = quantize(x, N, IC, DType::e4m3), qw = quantize(w, OC, IC, DType::e4m3), qg = quantize(dy, N, OC, DType::e5m2);
  auto dq = [](const Q& q, size_t i, const fp8::Format& f) { return double(decode(q.q[i], f)) * q.sinv[0]; };

  std::vector<float> y(size_t(N * OC));
  be->fp8_linear_fwd({.out = view(y, {N, OC}),
                      .inp = bytes_view(qx.q, DType::e4m3, {N, IC}),
                      .inp_scale_inv = view(qx.sinv, {1}),
                      .weight = bytes_view(qw.q, DType::e4m3, {OC, IC}),
                      .weight_scale_inv = view(qw.sinv, {1}),
                      .bias = view(b, {OC})});
  std::vector<float> y32(size_t(N * OC));
  be->linear_fwd(
      {.out = view(y32, {N, OC}), .inp = view(x, {N, IC}), .weight = view(w, {OC, IC}), .bias = view(b, {OC})});
  double err = 0, ref = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double s = b[size_t(o)];
      for (int64_t i = 0; i < IC; ++i) s += dq(qx, size_t(n * IC + i), kE4M3) * dq(qw, size_t(o * IC + i), kE4M3);
      CHECK(std::fabs(y[size_t(n * OC + o)] - s) <= 1e-5 * (1 + std::fabs(s)));
      err += std::pow(y[size_t(n * OC + o)] - y32[size_t(n * OC + o)], 2);
      ref += std::pow(y32[size_t(n * OC + o)], 2);
    }
  // E4M3 keeps 3 mantissa bits: per-element errors up to 6%, averaging down in the dot products;
  // the FP8 result is close to the f32 one but not equal (the quantization did happen).
  const double rel = std::sqrt(err / ref);
  MESSAGE("fp8 vs f32 linear forward: relative error " << rel);
  CHECK(rel < 0.08);
  CHECK(rel > 1e-4);

  std::vector<float> dx(size_t(N * IC)), dw(size_t(OC * IC), 1.f), db(size_t(OC), 1.f);
  be->fp8_linear_bwd({.dinp = view(dx, {N, IC}),
                      .dweight = view(dw, {OC, IC}),
                      .dbias = view(db, {OC}),
                      .dout = view(dy, {N, OC}),
                      .dout_fp8 = bytes_view(qg.q, DType::e5m2, {N, OC}),
                      .dout_t = bytes_view(qg.qt, DType::e5m2, {OC, N}),
                      .dout_scale_inv = view(qg.sinv, {1}),
                      .weight_t = bytes_view(qw.qt, DType::e4m3, {IC, OC}),
                      .weight_scale_inv = view(qw.sinv, {1}),
                      .inp_t = bytes_view(qx.qt, DType::e4m3, {IC, N}),
                      .inp_scale_inv = view(qx.sinv, {1})});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < IC; ++i) {
      double s = 0;
      for (int64_t o = 0; o < OC; ++o) s += dq(qg, size_t(n * OC + o), kE5M2) * dq(qw, size_t(o * IC + i), kE4M3);
      CHECK(std::fabs(dx[size_t(n * IC + i)] - s) <= 1e-5 * (1 + std::fabs(s)));
    }
  for (int64_t o = 0; o < OC; ++o) {
    double sb = 1;
    for (int64_t n = 0; n < N; ++n) sb += dy[size_t(n * OC + o)];  // the bias gradient sums dy itself
    CHECK(std::fabs(db[size_t(o)] - sb) <= 1e-5 * (1 + std::fabs(sb)));
    for (int64_t i = 0; i < IC; ++i) {
      double s = 1;  // dweight accumulates
      for (int64_t n = 0; n < N; ++n) s += dq(qg, size_t(n * OC + o), kE5M2) * dq(qx, size_t(n * IC + i), kE4M3);
      CHECK(std::fabs(dw[size_t(o * IC + i)] - s) <= 1e-5 * (1 + std::fabs(s)));
    }
  }
}
