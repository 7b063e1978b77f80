// CPU RoPE: rotate_half convention against a direct HF-style formula, identity at position 0,
// q·k depending only on the relative position, v untouched, and the backward as the exact adjoint;
// with per-sample positions each token rotates by its position in its sample.
#include <doctest/doctest.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
constexpr int B = 2, T = 5, Hq = 4, Hkv = 2, D = 8;
constexpr int kRow = (Hq + 2 * Hkv) * D;
constexpr float kTheta = 10000.0f;

Tensor qkv_view(std::vector<float>& v) { return view(v, {B, T, kRow}); }
Tensor inv_freq() { return rope_freqs(kTheta, D); }  // the run's table (family/rope.hpp)
}  // namespace

TEST_CASE("cpu rope_fwd matches the HF rotate_half formula and leaves v alone") {
  auto be = make_cpu_backend();
  auto x = randn(B * T * kRow, 1);
  auto y = x;
  be->rope_fwd({.qkv = qkv_view(y), .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}, .inv_freq = inv_freq()});
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hq + 2 * Hkv; ++h)
        for (int i = 0; i < D; ++i) {
          int64_t idx = (int64_t(b) * T + t) * kRow + h * D + i;
          double expect = x[idx];
          if (h < Hq + Hkv) {  // q and k heads are rotated: HF q·cos + rotate_half(q)·sin
            int pair = i % (D / 2);
            double angle = t * std::pow(double(kTheta), -2.0 * pair / D);
            double rotated = i < D / 2 ? -x[idx + D / 2] : x[idx - D / 2];
            expect = x[idx] * std::cos(angle) + rotated * std::sin(angle);
          }
          CHECK(y[idx] == doctest::Approx(expect).epsilon(1e-6).scale(1.0));
        }
}

TEST_CASE("cpu rope: position 0 is the identity; q·k depends only on the relative position") {
  auto be = make_cpu_backend();
  constexpr int TT = 9;
  auto q = randn(D, 2), k = randn(D, 3);
  std::vector<float> x(TT * kRow, 0.0f);
  for (int t = 0; t < TT; ++t)
    for (int i = 0; i < D; ++i) {
      x[t * kRow + 0 * D + i] = q[i];   // q head 0
      x[t * kRow + Hq * D + i] = k[i];  // k head 0
    }
  auto y = x;
  be->rope_fwd({.qkv = view(y, {1, TT, kRow}),
                .shape = {.B = 1, .T = TT, .Hq = Hq, .Hkv = Hkv, .D = D},
                .inv_freq = inv_freq()});
  for (int i = 0; i < kRow; ++i) CHECK(y[i] == x[i]);  // t = 0 untouched
  auto qk = [&](int tq, int tk) {
    double s = 0;
    for (int i = 0; i < D; ++i) s += double(y[tq * kRow + i]) * y[tk * kRow + Hq * D + i];
    return s;
  };
  for (int delta = 0; delta < 4; ++delta) {
    double base = qk(delta, 0);
    for (int t = 1; t + delta < TT; ++t) CHECK(qk(t + delta, t) == doctest::Approx(base).epsilon(1e-5));
  }
  CHECK(std::fabs(qk(3, 0) - qk(0, 0)) > 1e-3);  // rotation actually happened
}

TEST_CASE("cpu rope_bwd is the adjoint of rope_fwd (finite differences and inverse)") {
  auto be = make_cpu_backend();
  auto x = randn(B * T * kRow, 11), r = randn(B * T * kRow, 12);
  auto objective = [&] {
    auto y = x;
    be->rope_fwd({.qkv = qkv_view(y), .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}, .inv_freq = inv_freq()});
    return weighted_sum(y, r);
  };
  auto grad = r;
  be->rope_bwd(
      {.qkv = qkv_view(grad), .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}, .inv_freq = inv_freq()});
  check_gradient("rope dqkv", x, grad, objective);

  auto round_trip = x;
  be->rope_fwd(
      {.qkv = qkv_view(round_trip), .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}, .inv_freq = inv_freq()});
  be->rope_bwd(
      {.qkv = qkv_view(round_trip), .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}, .inv_freq = inv_freq()});
  CHECK(max_abs_diff(round_trip, x) < 1e-5);
  CHECK_THROWS_AS(be->rope_fwd({.qkv = qkv_view(round_trip),
                                .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = 7},
                                .inv_freq = inv_freq()}),
                  std::invalid_argument);
}

TEST_CASE("cpu rope with per-sample positions: each sample rotates as if it stood alone at t = 0") {
  auto be = make_cpu_backend();
  const AttentionShape shape{.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D};
  auto x = randn(size_t(B) * T * kRow, 11);
  // Row 0: samples of 2 and 3 tokens; row 1: 4 tokens, then one padding token.
  std::vector<int32_t> pos = {0, 1, 0, 1, 2, 0, 1, 2, 3, 0};
  auto packed = x;
  be->rope_fwd({.qkv = qkv_view(packed), .positions = view(pos, {B, T}), .shape = shape, .inv_freq = inv_freq()});
  auto alone = [&](int b, int start, int len) {
    std::vector<float> y(x.begin() + int64_t(b * T + start) * kRow, x.begin() + int64_t(b * T + start + len) * kRow);
    be->rope_fwd({.qkv = view(y, {1, len, kRow}),
                  .shape = {.B = 1, .T = len, .Hq = Hq, .Hkv = Hkv, .D = D},
                  .inv_freq = inv_freq()});
    CHECK(std::equal(y.begin(), y.end(), packed.begin() + int64_t(b * T + start) * kRow));
  };
  alone(0, 0, 2);
  alone(0, 2, 3);
  alone(1, 0, 4);
  alone(1, 4, 1);
  // Backward with the same positions undoes the forward; positions 0..T-1 are the unpacked op.
  be->rope_bwd({.qkv = qkv_view(packed), .positions = view(pos, {B, T}), .shape = shape, .inv_freq = inv_freq()});
  for (size_t i = 0; i < x.size(); ++i) CHECK(packed[i] == doctest::Approx(x[i]).epsilon(1e-5).scale(1.0));
  std::vector<int32_t> plain = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  auto a = x, b = x;
  be->rope_fwd({.qkv = qkv_view(a), .positions = view(plain, {B, T}), .shape = shape, .inv_freq = inv_freq()});
  be->rope_fwd({.qkv = qkv_view(b), .shape = shape, .inv_freq = inv_freq()});
  CHECK(a == b);
}

TEST_CASE("cpu rope reads the run's table: a perturbed entry changes only its pair's rotation") {
  auto be = make_cpu_backend();
  std::vector<double> table = recipe::core::rope_inv_freq({.theta = kTheta}, D), perturbed = table;
  constexpr int j = 2;  // the perturbed pair (j, j + D/2)
  perturbed[j] *= 3.0;
  const auto x = randn(B * T * kRow, 5);
  auto a = x, b = x;
  const AttentionShape shape{.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D};
  be->rope_fwd({.qkv = qkv_view(a), .shape = shape, .inv_freq = view(table, {D / 2})});
  be->rope_fwd({.qkv = qkv_view(b), .shape = shape, .inv_freq = view(perturbed, {D / 2})});
  auto c = x;  // the table the other tests pass (rope_freqs) is the run's table
  be->rope_fwd({.qkv = qkv_view(c), .shape = shape, .inv_freq = inv_freq()});
  CHECK(c == a);
  for (int bb = 0; bb < B; ++bb)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hq + 2 * Hkv; ++h)
        for (int i = 0; i < D; ++i) {
          const int64_t idx = (int64_t(bb) * T + t) * kRow + h * D + i;
          const int pair = i % (D / 2);
          if (pair != j || t == 0 || h >= Hq + Hkv) {
            CHECK(b[idx] == a[idx]);  // other pairs, position 0, v heads: bitwise as with the run table
            continue;
          }
          const double angle = t * perturbed[j];  // the table's entry, not θ^(-2j/D)
          const double rotated = i < D / 2 ? -x[idx + D / 2] : x[idx - D / 2];
          CHECK(b[idx] != a[idx]);
          CHECK(b[idx] ==
                doctest::Approx(x[idx] * std::cos(angle) + rotated * std::sin(angle)).epsilon(1e-6).scale(1.0));
        }
  CHECK_THROWS_WITH_AS(be->rope_fwd({.qkv = qkv_view(a), .shape = shape}), doctest::Contains("inv_freq"),
                       std::invalid_argument);
}

TEST_SUITE_END();
