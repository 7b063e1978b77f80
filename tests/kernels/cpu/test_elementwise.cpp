// CPU elementwise ops: residual add (with aliasing), GELU (tanh approximation) and SwiGLU, forward
// against closed forms in double and backward against central differences; the fused SwiGLU
// backward + rebuild against the two ops.
#include <doctest/doctest.h>

#include <numbers>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

TEST_CASE("cpu add supports out aliasing either input") {
  auto be = make_cpu_backend();
  auto a = randn(10, 1), b = randn(10, 2);
  std::vector<float> expect(10);
  for (int i = 0; i < 10; ++i) expect[i] = a[i] + b[i];
  std::vector<float> out(10);
  be->add(view(out, {10}), view(a, {10}), view(b, {10}));
  CHECK(out == expect);
  auto a2 = a;
  be->add(view(a2, {10}), view(a2, {10}), view(b, {10}));
  CHECK(a2 == expect);
  auto b2 = b;
  be->add(view(b2, {10}), view(a, {10}), view(b2, {10}));
  CHECK(b2 == expect);
  std::vector<float> short_b(9);
  CHECK_THROWS_AS(be->add(view(out, {10}), view(a, {10}), view(short_b, {9})), std::invalid_argument);
}

TEST_CASE("cpu gelu is the tanh approximation and its gradient matches finite differences") {
  auto be = make_cpu_backend();
  std::vector<float> x = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f};
  std::vector<float> y(x.size());
  be->gelu_fwd(view(y, {int64_t(x.size())}), view(x, {int64_t(x.size())}));
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double ref = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    CHECK(y[i] == doctest::Approx(ref).epsilon(1e-6));
  }
  CHECK(y[3] == 0.0f);
  // The tanh form differs from the exact erf GELU by a small but visible amount at x = 1.
  CHECK(std::fabs(y[5] - 0.8413447) > 1e-5);

  auto in = randn(24, 3, 1.5f), r = randn(24, 4);
  auto objective = [&] {
    std::vector<float> out(24);
    be->gelu_fwd(view(out, {4, 6}), view(in, {4, 6}));
    return weighted_sum(out, r);
  };
  std::vector<float> din(24, 42.0f);
  be->gelu_bwd(view(din, {4, 6}), view(r, {4, 6}), view(in, {4, 6}));
  check_gradient("gelu dinp", in, din, objective);
}

TEST_CASE("cpu swiglu: out = silu(gate)·up on [gate | up] rows; gradient matches finite differences") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 3, F = 5;
  auto gu = randn(N * 2 * F, 11, 1.5f), r = randn(N * F, 12);
  std::vector<float> out(N * F);
  be->swiglu_fwd(view(out, {N, F}), view(gu, {N, 2 * F}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f) {
      double g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f];
      CHECK(out[n * F + f] == doctest::Approx(g / (1.0 + std::exp(-g)) * u).epsilon(1e-6));
    }
  auto objective = [&] {
    std::vector<float> o(N * F);
    be->swiglu_fwd(view(o, {N, F}), view(gu, {N, 2 * F}));
    return weighted_sum(o, r);
  };
  std::vector<float> dgu(N * 2 * F, 7.0f);
  be->swiglu_bwd(view(dgu, {N, 2 * F}), view(r, {N, F}), view(gu, {N, 2 * F}));
  check_gradient("swiglu dgate_up", gu, dgu, objective);
}

TEST_CASE("cpu swiglu_bwd_rebuild is swiglu_bwd and, with act, swiglu_fwd, bit for bit") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 3, F = 5;
  auto gu = randn(N * 2 * F, 21, 1.5f), d = randn(N * F, 22);
  std::vector<float> dgu_ref(N * 2 * F), act_ref(N * F);
  be->swiglu_bwd(view(dgu_ref, {N, 2 * F}), view(d, {N, F}), view(gu, {N, 2 * F}));
  be->swiglu_fwd(view(act_ref, {N, F}), view(gu, {N, 2 * F}));
  std::vector<float> dgu(N * 2 * F, 7.0f), act(N * F, 7.0f);
  be->swiglu_bwd_rebuild({.dgate_up = view(dgu, {N, 2 * F}),
                          .act = view(act, {N, F}),
                          .dout = view(d, {N, F}),
                          .gate_up = view(gu, {N, 2 * F})});
  CHECK(dgu == dgu_ref);
  CHECK(act == act_ref);
  std::vector<float> dgu_only(N * 2 * F, 9.0f);
  be->swiglu_bwd_rebuild(
      {.dgate_up = view(dgu_only, {N, 2 * F}), .dout = view(d, {N, F}), .gate_up = view(gu, {N, 2 * F})});
  CHECK(dgu_only == dgu_ref);
}

TEST_SUITE_END();
