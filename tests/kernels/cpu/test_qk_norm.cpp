// CPU qk-norm (Qwen3's per-head RMSNorm of the q and k heads of packed qkv rows): the forward
// against a double reference written here from the definition (each D-wide head vector normalised
// on its own, q heads with q_weight, k heads with k_weight, v heads untouched), the input and both
// weight gradients against central differences, the v heads' gradient passed through, in-place
// use (out = inp, dinp = dout), and the weight gradients accumulating.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
// 3 rows of 4 q heads, 2 k heads and 2 v heads of D = 6: every head of a row sees another scale.
constexpr int kRows = 3, Hq = 4, Hkv = 2, D = 6, W = (Hq + 2 * Hkv) * D;
constexpr float kEps = 1e-6f;

// Weights around 1, as a trained norm's.
std::vector<float> offset_ones(std::vector<float> v) {
  for (auto& x : v) x += 1.f;
  return v;
}

std::vector<float> qkv_values(uint32_t seed) {
  auto x = randn(size_t(kRows) * W, seed);
  for (int i = 0; i < kRows * W; ++i) x[size_t(i)] *= 0.5f + float((i / D) % 5);  // per-head scales
  return x;
}
}  // namespace

TEST_CASE("cpu qk_norm_fwd normalises each q and k head on its own and copies the v heads") {
  auto be = make_cpu_backend();
  auto x = qkv_values(1), wq = randn(D, 2), wk = randn(D, 3);
  std::vector<float> out(x.size(), 7.f);
  be->qk_norm_fwd({.out = view(out, {kRows, W}),
                   .inp = view(x, {kRows, W}),
                   .q_weight = view(wq, {D}),
                   .k_weight = view(wk, {D}),
                   .Hq = Hq,
                   .Hkv = Hkv,
                   .D = D,
                   .eps = kEps});
  for (int n = 0; n < kRows; ++n)
    for (int h = 0; h < Hq + 2 * Hkv; ++h) {
      const float* v = x.data() + n * W + h * D;
      double ss = 0;
      for (int c = 0; c < D; ++c) ss += double(v[c]) * v[c];
      const double r = 1.0 / std::sqrt(ss / D + kEps);
      for (int c = 0; c < D; ++c) {
        CAPTURE(n);
        CAPTURE(h);
        CAPTURE(c);
        const double want = h < Hq ? v[c] * r * wq[size_t(c)] : h < Hq + Hkv ? v[c] * r * wk[size_t(c)] : v[c];
        CHECK(out[size_t(n * W + h * D + c)] == doctest::Approx(want).epsilon(1e-6));
      }
    }
  // In place (what generation does): the same values.
  auto inplace = x;
  be->qk_norm_fwd({.out = view(inplace, {kRows, W}),
                   .inp = view(inplace, {kRows, W}),
                   .q_weight = view(wq, {D}),
                   .k_weight = view(wk, {D}),
                   .Hq = Hq,
                   .Hkv = Hkv,
                   .D = D,
                   .eps = kEps});
  CHECK(inplace == out);
}

TEST_CASE("cpu qk_norm_bwd gradients match finite differences; in place; weight gradients accumulate") {
  auto be = make_cpu_backend();
  auto x = qkv_values(11), wq = offset_ones(randn(D, 12, 0.3f)), wk = offset_ones(randn(D, 13, 0.3f));
  const auto r = randn(size_t(kRows) * W, 14);
  std::vector<float> out(x.size());
  auto objective = [&] {
    be->qk_norm_fwd({.out = view(out, {kRows, W}),
                     .inp = view(x, {kRows, W}),
                     .q_weight = view(wq, {D}),
                     .k_weight = view(wk, {D}),
                     .Hq = Hq,
                     .Hkv = Hkv,
                     .D = D,
                     .eps = kEps});
    return weighted_sum(out, r);
  };
  std::vector<float> dx(x.size(), 123.f), dwq(D, 0.f), dwk(D, 0.f);
  auto rr = r;
  be->qk_norm_bwd({.dinp = view(dx, {kRows, W}),
                   .dq_weight = view(dwq, {D}),
                   .dk_weight = view(dwk, {D}),
                   .dout = view(rr, {kRows, W}),
                   .inp = view(x, {kRows, W}),
                   .q_weight = view(wq, {D}),
                   .k_weight = view(wk, {D}),
                   .Hq = Hq,
                   .Hkv = Hkv,
                   .D = D,
                   .eps = kEps});
  // dinp is overwritten (123 is gone), the v heads' gradient is dout's.
  check_gradient("dinp", x, dx, objective, {.step = 1e-2f, .rtol = 1e-2, .atol = 2e-3});
  check_gradient("dq_weight", wq, dwq, objective);
  check_gradient("dk_weight", wk, dwk, objective);
  for (int n = 0; n < kRows; ++n)
    for (int c = (Hq + Hkv) * D; c < W; ++c) CHECK(dx[size_t(n * W + c)] == r[size_t(n * W + c)]);

  // In place (the model's use: dqkv holds dout and receives dinp), and a second call adds to the
  // weight gradients.
  auto inplace = r;
  auto dwq2 = dwq, dwk2 = dwk;
  be->qk_norm_bwd({.dinp = view(inplace, {kRows, W}),
                   .dq_weight = view(dwq2, {D}),
                   .dk_weight = view(dwk2, {D}),
                   .dout = view(inplace, {kRows, W}),
                   .inp = view(x, {kRows, W}),
                   .q_weight = view(wq, {D}),
                   .k_weight = view(wk, {D}),
                   .Hq = Hq,
                   .Hkv = Hkv,
                   .D = D,
                   .eps = kEps});
  CHECK(inplace == dx);
  for (int c = 0; c < D; ++c) {
    CHECK(dwq2[size_t(c)] == doctest::Approx(2.0 * dwq[size_t(c)]).epsilon(1e-6));
    CHECK(dwk2[size_t(c)] == doctest::Approx(2.0 * dwk[size_t(c)]).epsilon(1e-6));
  }
}

TEST_CASE("cpu qk_norm refuses rows that are not packed qkv of its heads") {
  auto be = make_cpu_backend();
  std::vector<float> x(size_t(kRows) * W + 1), out(x.size()), wq(D), wk(D);
  CHECK_THROWS_AS(be->qk_norm_fwd({.out = view(out, {int64_t(out.size())}),
                                   .inp = view(x, {int64_t(x.size())}),
                                   .q_weight = view(wq, {D}),
                                   .k_weight = view(wk, {D}),
                                   .Hq = Hq,
                                   .Hkv = Hkv,
                                   .D = D,
                                   .eps = kEps}),
                  std::invalid_argument);
}

TEST_SUITE_END();
