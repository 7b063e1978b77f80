// CPU optimizer ops: AdamW steps vs hand-computed values (bias correction, decoupled weight decay,
// grad_scale, bf16 compute copy), sum_squares in double, scale.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

TEST_CASE("cpu adamw: two steps match the formula by hand") {
  auto be = make_cpu_backend();
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g1 = {0.5f, -1.0f, 0.0f}, g2 = {-0.25f, 2.0f, 4.0f};
  std::vector<bf16_t> copy(3);
  AdamWArgs args{
      .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1, .grad_scale = 2.0f};

  // Step 1 by hand: g = 2·grad; m = 0.1·g, v = 0.05·g²; m̂ = g, v̂ = g²; update = sign(g) + wd·w.
  std::vector<double> ew(3), em(3), ev(3);
  for (int i = 0; i < 3; ++i) {
    double g = 2.0 * g1[i];
    em[i] = 0.1 * g;
    ev[i] = 0.05 * g * g;
    double mh = em[i] / (1 - 0.9), vh = ev[i] / (1 - 0.95);
    ew[i] = w[i] - 0.1 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * w[i]);
  }
  CHECK(ew[0] == doctest::Approx(1.0 - 0.1 * (1.0 + 0.1)));  // sanity of the hand formula
  CHECK(ew[2] == doctest::Approx(0.5 - 0.1 * 0.1 * 0.5));    // zero gradient: weight decay only
  auto g = g1;
  be->adamw(view(w, {3}), view(g, {3}), view(m, {3}), view(v, {3}), Tensor(copy.data(), DType::bf16, Device::cpu, {3}),
            args);
  for (int i = 0; i < 3; ++i) {
    CHECK(w[i] == doctest::Approx(ew[i]).epsilon(1e-6));
    CHECK(m[i] == doctest::Approx(em[i]).epsilon(1e-6));
    CHECK(v[i] == doctest::Approx(ev[i]).epsilon(1e-6));
    CHECK(copy[i] == f32_to_bf16(w[i]));
  }

  // Step 2: bias corrections 1 − β².
  args.step = 2;
  for (int i = 0; i < 3; ++i) {
    double gg = 2.0 * g2[i];
    em[i] = 0.9 * em[i] + 0.1 * gg;
    ev[i] = 0.95 * ev[i] + 0.05 * gg * gg;
    double mh = em[i] / (1 - 0.81), vh = ev[i] / (1 - 0.9025);
    ew[i] = ew[i] - 0.1 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * ew[i]);
  }
  g = g2;
  be->adamw(view(w, {3}), view(g, {3}), view(m, {3}), view(v, {3}), {}, args);
  for (int i = 0; i < 3; ++i) {
    CHECK(w[i] == doctest::Approx(ew[i]).epsilon(1e-6));
    CHECK(m[i] == doctest::Approx(em[i]).epsilon(1e-6));
    CHECK(v[i] == doctest::Approx(ev[i]).epsilon(1e-6));
  }
  CHECK(g == g2);  // gradients are not modified

  args.step = 0;
  CHECK_THROWS_AS(be->adamw(view(w, {3}), view(g, {3}), view(m, {3}), view(v, {3}), {}, args), std::invalid_argument);
}

TEST_CASE("cpu sum_squares accumulates in double; scale multiplies in place") {
  auto be = make_cpu_backend();
  // 1 + 4·(1e-4)² · 10000 terms: a float accumulator would lose the small terms next to 1e8.
  std::vector<float> x(10001, 1e-4f);
  x[0] = 1e4f;
  double expect = 1e8;
  for (size_t i = 1; i < x.size(); ++i) expect += double(x[i]) * x[i];
  CHECK(be->sum_squares(view(x, {int64_t(x.size())})) == doctest::Approx(expect).epsilon(1e-15));
  CHECK(be->sum_squares(view(x, {int64_t(x.size())})) != 1e8);

  std::vector<float> y = {1.0f, -2.0f, 3.5f};
  be->scale(view(y, {3}), 0.5f);
  CHECK(y == std::vector<float>{0.5f, -1.0f, 1.75f});
  std::vector<bf16_t> h = {f32_to_bf16(3.0f), f32_to_bf16(-1.5f)};
  be->scale(Tensor(h.data(), DType::bf16, Device::cpu, {2}), 2.0f);
  CHECK(bf16_to_f32(h[0]) == 6.0f);
  CHECK(bf16_to_f32(h[1]) == -3.0f);
}

// The two halves of the multi-rank clip (the world sum goes between them) give what the one-call
// clip gives over the same gradients and losses, the guard included.
TEST_CASE("cpu norm_loss_sums + clip_from_sums equal grad_norm_clip over the concatenation") {
  auto be = make_cpu_backend();
  std::vector<float> all = {0.5f, -1.25f, 3.0f, 0.0f, 2.5f, -0.75f, 1e-3f};
  std::vector<float> a(all.begin(), all.begin() + 3), b(all.begin() + 3, all.end());
  std::vector<float> losses = {1.0f, 2.0f, 4.0f};
  std::vector<double> sums(2);
  std::vector<float> split(2), whole(2);
  const Tensor sums_t(sums.data(), DType::f64, Device::cpu, {2});
  for (double limit : {100.0, 6.5}) {  // 7 > 6.5: the guard skips (NaN)
    CAPTURE(limit);
    be->norm_loss_sums(sums_t, {view(a, {3}), view(b, {4})}, view(losses, {3}));
    CHECK(sums[1] == 7.0);
    be->clip_from_sums(view(split, {2}), sums_t, 1.0f, limit);
    be->grad_norm_clip(view(whole, {2}), view(all, {7}), 1.0f, view(losses, {3}), limit);
    CHECK(split[0] == whole[0]);
    CHECK(std::isnan(split[1]) == std::isnan(whole[1]));
    if (!std::isnan(whole[1])) CHECK(split[1] == whole[1]);
  }
  CHECK(std::isnan(split[1]));
  be->norm_loss_sums(sums_t, {view(a, {3})}, Tensor());  // no losses on this rank: 0
  CHECK(sums[1] == 0.0);
  CHECK(sums[0] == doctest::Approx(0.25 + 1.5625 + 9.0));
}

TEST_SUITE_END();
