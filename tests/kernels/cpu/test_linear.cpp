// CPU linear: forward vs a naive double reference, gradients by central differences (bias, GELU
// epilogue, dGELU epilogue), accumulate-vs-overwrite semantics.
#include <doctest/doctest.h>

#include <numbers>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
constexpr int N = 5, IC = 7, OC = 6;

std::vector<float> naive_linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b) {
  std::vector<float> y(N * OC);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int i = 0; i < IC; ++i) s += double(x[n * IC + i]) * w[o * IC + i];
      y[n * OC + o] = float(s);
    }
  return y;
}

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
}  // namespace

TEST_CASE("cpu linear_fwd matches a naive reference, with and without bias and GELU epilogue") {
  auto be = make_cpu_backend();
  auto x = randn(N * IC, 1), w = randn(OC * IC, 2, 0.5f), b = randn(OC, 3);
  std::vector<float> out(N * OC, 7.0f), pre(N * OC);

  be->linear_fwd({.out = view(out, {N, OC}), .inp = view(x, {N, IC}), .weight = view(w, {OC, IC})});
  CHECK(max_abs_diff(out, naive_linear(x, w, nullptr)) < 1e-5);

  be->linear_fwd(
      {.out = view(out, {N, OC}), .inp = view(x, {N, IC}), .weight = view(w, {OC, IC}), .bias = view(b, {OC})});
  auto ref = naive_linear(x, w, &b);
  CHECK(max_abs_diff(out, ref) < 1e-5);

  be->linear_fwd({.out = view(out, {N, OC}),
                  .inp = view(x, {N, IC}),
                  .weight = view(w, {OC, IC}),
                  .bias = view(b, {OC}),
                  .pre_gelu = view(pre, {N, OC})});
  CHECK(max_abs_diff(pre, ref) < 1e-5);
  double worst = 0.0;
  for (int i = 0; i < N * OC; ++i) worst = std::max(worst, std::fabs(out[i] - gelu_ref(pre[i])));
  CHECK(worst < 1e-6);
}

TEST_CASE("cpu linear_bwd gradients match finite differences (bias)") {
  auto be = make_cpu_backend();
  auto x = randn(N * IC, 11), w = randn(OC * IC, 12, 0.5f), b = randn(OC, 13), r = randn(N * OC, 14);
  auto objective = [&] {
    std::vector<float> out(N * OC);
    be->linear_fwd(
        {.out = view(out, {N, OC}), .inp = view(x, {N, IC}), .weight = view(w, {OC, IC}), .bias = view(b, {OC})});
    return weighted_sum(out, r);
  };
  std::vector<float> dx(N * IC, 123.0f), dw(OC * IC, 0.0f), db(OC, 0.0f);
  be->linear_bwd({.dinp = view(dx, {N, IC}),
                  .dweight = view(dw, {OC, IC}),
                  .dbias = view(db, {OC}),
                  .dout = view(r, {N, OC}),
                  .inp = view(x, {N, IC}),
                  .weight = view(w, {OC, IC})});
  check_gradient("dinp", x, dx, objective);
  check_gradient("dweight", w, dw, objective);
  check_gradient("dbias", b, db, objective);
}

TEST_CASE("cpu linear with GELU epilogue: gradients through pre_gelu match finite differences") {
  auto be = make_cpu_backend();
  auto x = randn(N * IC, 21), w = randn(OC * IC, 22, 0.5f), b = randn(OC, 23), r = randn(N * OC, 24);
  std::vector<float> out(N * OC), pre(N * OC);
  auto forward = [&] {
    be->linear_fwd({.out = view(out, {N, OC}),
                    .inp = view(x, {N, IC}),
                    .weight = view(w, {OC, IC}),
                    .bias = view(b, {OC}),
                    .pre_gelu = view(pre, {N, OC})});
  };
  auto objective = [&] {
    forward();
    return weighted_sum(out, r);
  };
  forward();
  std::vector<float> dpre(N * OC), dx(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
  be->gelu_bwd(view(dpre, {N, OC}), view(r, {N, OC}), view(pre, {N, OC}));
  be->linear_bwd({.dinp = view(dx, {N, IC}),
                  .dweight = view(dw, {OC, IC}),
                  .dbias = view(db, {OC}),
                  .dout = view(dpre, {N, OC}),
                  .inp = view(x, {N, IC}),
                  .weight = view(w, {OC, IC})});
  check_gradient("dinp", x, dx, objective);
  check_gradient("dweight", w, dw, objective);
  check_gradient("dbias", b, db, objective);
}

TEST_CASE("cpu linear_bwd dGELU epilogue gives the gradient w.r.t. the previous GELU's input") {
  // y = linear(gelu(a)); linear_bwd with dinp_gelu_aux = a must return dL/da.
  auto be = make_cpu_backend();
  auto a = randn(N * IC, 31), w = randn(OC * IC, 32, 0.5f), r = randn(N * OC, 33);
  std::vector<float> h(N * IC), y(N * OC);
  auto forward = [&] {
    be->gelu_fwd(view(h, {N, IC}), view(a, {N, IC}));
    be->linear_fwd({.out = view(y, {N, OC}), .inp = view(h, {N, IC}), .weight = view(w, {OC, IC})});
  };
  auto objective = [&] {
    forward();
    return weighted_sum(y, r);
  };
  forward();
  std::vector<float> da(N * IC, -5.0f);
  be->linear_bwd({.dinp = view(da, {N, IC}),
                  .dout = view(r, {N, OC}),
                  .inp = view(h, {N, IC}),
                  .weight = view(w, {OC, IC}),
                  .dinp_gelu_aux = view(a, {N, IC})});
  check_gradient("dinp with dGELU epilogue", a, da, objective);

  // dinp_sum: Σ_rows of the final dinp (after dGELU), added: the bias gradient of the layer
  // that produced a; exactly what that layer's own linear_bwd dbias would add from da.
  std::vector<float> da2(N * IC, 0.0f), sum(IC, 0.5f), dbias_prev(IC, 0.5f);
  be->linear_bwd({.dinp = view(da2, {N, IC}),
                  .dout = view(r, {N, OC}),
                  .inp = view(h, {N, IC}),
                  .weight = view(w, {OC, IC}),
                  .dinp_gelu_aux = view(a, {N, IC}),
                  .dinp_sum = view(sum, {IC})});
  be->linear_bwd({.dbias = view(dbias_prev, {IC}),
                  .dout = view(da2, {N, IC}),
                  .inp = view(r, {N, OC}),
                  .weight = view(w, {OC, IC}).view({IC, OC})});
  CHECK(sum == dbias_prev);
  CHECK(sum[0] != 0.5f);
}

TEST_CASE("cpu linear_bwd accumulates dweight/dbias and overwrites dinp") {
  auto be = make_cpu_backend();
  auto x = randn(N * IC, 41), w = randn(OC * IC, 42), r = randn(N * OC, 43);
  std::vector<float> dx1(N * IC, 0.0f), dx2(N * IC, 99.0f), dw(OC * IC, 0.0f), db(OC, 0.0f);
  auto call = [&](std::vector<float>& dx) {
    be->linear_bwd({.dinp = view(dx, {N, IC}),
                    .dweight = view(dw, {OC, IC}),
                    .dbias = view(db, {OC}),
                    .dout = view(r, {N, OC}),
                    .inp = view(x, {N, IC}),
                    .weight = view(w, {OC, IC})});
  };
  call(dx1);
  auto dw_once = dw, db_once = db;
  call(dx2);
  CHECK(dx1 == dx2);  // overwritten, not added onto the 99s
  for (int i = 0; i < OC * IC; ++i) CHECK(dw[i] == doctest::Approx(2.0 * dw_once[i]).epsilon(1e-6));
  for (int o = 0; o < OC; ++o) CHECK(db[o] == doctest::Approx(2.0 * db_once[o]).epsilon(1e-6));
  double sum0 = 0.0;
  for (int n = 0; n < N; ++n) sum0 += r[n * OC];
  CHECK(db_once[0] == doctest::Approx(sum0).epsilon(1e-6));
}

TEST_CASE("cpu linear rejects mismatched shapes with an error naming the tensor") {
  auto be = make_cpu_backend();
  std::vector<float> x(N * IC), w(OC * IC), out(N * OC + 1);
  CHECK_THROWS_WITH_AS(
      be->linear_fwd({.out = view(out, {N * OC + 1}), .inp = view(x, {N, IC}), .weight = view(w, {OC, IC})}),
      doctest::Contains("out"), std::invalid_argument);
}

TEST_SUITE_END();
