// CPU LayerNorm (with and without bias) and RMSNorm: forward and statistics vs a double reference,
// gradients by central differences, and accumulation of dinp/dweight/dbias.
#include <doctest/doctest.h>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
constexpr int N = 4, C = 9;
constexpr float kEps = 1e-5f;

std::vector<float> offset(std::vector<float> v, float by) {
  for (auto& x : v) x += by;
  return v;
}
}  // namespace

TEST_CASE("cpu layernorm_fwd matches a double reference and stores mean/rstd") {
  auto be = make_cpu_backend();
  auto x = offset(randn(N * C, 1, 2.0f), 3.0f), w = randn(C, 2), b = randn(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    be->layernorm_fwd({.out = view(out, {N, C}),
                       .mean = view(mean, {N}),
                       .rstd = view(rstd, {N}),
                       .inp = view(x, {N, C}),
                       .weight = view(w, {C}),
                       .bias = with_bias ? view(b, {C}) : Tensor{},
                       .eps = kEps});
    for (int n = 0; n < N; ++n) {
      double mu = 0, var = 0;
      for (int c = 0; c < C; ++c) mu += x[n * C + c];
      mu /= C;
      for (int c = 0; c < C; ++c) var += (x[n * C + c] - mu) * (x[n * C + c] - mu);
      var /= C;
      double r = 1.0 / std::sqrt(var + kEps);
      CHECK(mean[n] == doctest::Approx(mu).epsilon(1e-6));
      CHECK(rstd[n] == doctest::Approx(r).epsilon(1e-6));
      for (int c = 0; c < C; ++c) {
        double y = (x[n * C + c] - mu) * r * w[c] + (with_bias ? b[c] : 0.0);
        CHECK(out[n * C + c] == doctest::Approx(y).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

TEST_CASE("cpu layernorm_bwd gradients match finite differences") {
  auto be = make_cpu_backend();
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    auto x = randn(N * C, 11), w = randn(C, 12), b = randn(C, 13), r = randn(N * C, 14);
    std::vector<float> out(N * C), mean(N), rstd(N);
    auto forward = [&] {
      be->layernorm_fwd({.out = view(out, {N, C}),
                         .mean = view(mean, {N}),
                         .rstd = view(rstd, {N}),
                         .inp = view(x, {N, C}),
                         .weight = view(w, {C}),
                         .bias = with_bias ? view(b, {C}) : Tensor{},
                         .eps = kEps});
    };
    auto objective = [&] {
      forward();
      return weighted_sum(out, r);
    };
    forward();
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    be->layernorm_bwd({.dinp = view(dx, {N, C}),
                       .dweight = view(dw, {C}),
                       .dbias = with_bias ? view(db, {C}) : Tensor{},
                       .dout = view(r, {N, C}),
                       .inp = view(x, {N, C}),
                       .weight = view(w, {C}),
                       .mean = view(mean, {N}),
                       .rstd = view(rstd, {N})});
    check_gradient("dinp", x, dx, objective);
    check_gradient("dweight", w, dw, objective);
    if (with_bias) check_gradient("dbias", b, db, objective);
  }
}

TEST_CASE("cpu layernorm_bwd accumulates into dinp, dweight and dbias") {
  auto be = make_cpu_backend();
  auto x = randn(N * C, 21), w = randn(C, 22), b = randn(C, 23), r = randn(N * C, 24), prior = randn(N * C, 25);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_fwd({.out = view(out, {N, C}),
                     .mean = view(mean, {N}),
                     .rstd = view(rstd, {N}),
                     .inp = view(x, {N, C}),
                     .weight = view(w, {C}),
                     .bias = view(b, {C}),
                     .eps = kEps});
  std::vector<float> dx0(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f), dx1 = prior;
  auto call = [&](std::vector<float>& dx) {
    be->layernorm_bwd({.dinp = view(dx, {N, C}),
                       .dweight = view(dw, {C}),
                       .dbias = view(db, {C}),
                       .dout = view(r, {N, C}),
                       .inp = view(x, {N, C}),
                       .weight = view(w, {C}),
                       .mean = view(mean, {N}),
                       .rstd = view(rstd, {N})});
  };
  call(dx0);
  auto dw_once = dw, db_once = db;
  call(dx1);
  for (int i = 0; i < N * C; ++i) CHECK(dx1[i] == doctest::Approx(prior[i] + dx0[i]).epsilon(1e-6));
  for (int c = 0; c < C; ++c) {
    CHECK(dw[c] == doctest::Approx(2.0 * dw_once[c]).epsilon(1e-6));
    CHECK(db[c] == doctest::Approx(2.0 * db_once[c]).epsilon(1e-6));
  }
}

TEST_CASE("cpu layernorm_bwd dinp_sum accumulates the column sums of dinp after the backward") {
  auto be = make_cpu_backend();
  auto x = randn(N * C, 41), w = randn(C, 42), b = randn(C, 43), r = randn(N * C, 44), prior = randn(N * C, 45);
  auto sum0 = randn(C, 46);
  std::vector<float> out(N * C), mean(N), rstd(N), dw(C, 0.0f), db(C, 0.0f);
  be->layernorm_fwd({.out = view(out, {N, C}),
                     .mean = view(mean, {N}),
                     .rstd = view(rstd, {N}),
                     .inp = view(x, {N, C}),
                     .weight = view(w, {C}),
                     .bias = view(b, {C}),
                     .eps = kEps});
  std::vector<float> dx = prior, sum = sum0;
  be->layernorm_bwd({.dinp = view(dx, {N, C}),
                     .dweight = view(dw, {C}),
                     .dbias = view(db, {C}),
                     .dout = view(r, {N, C}),
                     .inp = view(x, {N, C}),
                     .weight = view(w, {C}),
                     .mean = view(mean, {N}),
                     .rstd = view(rstd, {N}),
                     .dinp_sum = view(sum, {C})});
  for (int c = 0; c < C; ++c) {
    double col = 0;
    for (int n = 0; n < N; ++n) col += dx[n * C + c];  // dinp AFTER the accumulation into prior
    CHECK(sum[c] == doctest::Approx(sum0[c] + col).epsilon(1e-6));
  }
  // It is a column sum of dinp, so it needs dinp.
  CHECK_THROWS_AS(be->layernorm_bwd({.dweight = view(dw, {C}),
                                     .dbias = view(db, {C}),
                                     .dout = view(r, {N, C}),
                                     .inp = view(x, {N, C}),
                                     .weight = view(w, {C}),
                                     .mean = view(mean, {N}),
                                     .rstd = view(rstd, {N}),
                                     .dinp_sum = view(sum, {C})}),
                  std::invalid_argument);
}

TEST_CASE("cpu rmsnorm forward vs reference, gradients vs finite differences, accumulation") {
  auto be = make_cpu_backend();
  auto x = offset(randn(N * C, 31), 0.5f), w = randn(C, 32), r = randn(N * C, 33), prior = randn(N * C, 34);
  std::vector<float> out(N * C), rstd(N);
  auto forward = [&] {
    be->rmsnorm_fwd({.out = view(out, {N, C}),
                     .rstd = view(rstd, {N}),
                     .inp = view(x, {N, C}),
                     .weight = view(w, {C}),
                     .eps = kEps});
  };
  forward();
  for (int n = 0; n < N; ++n) {
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += double(x[n * C + c]) * x[n * C + c];
    double rs = 1.0 / std::sqrt(ss / C + kEps);
    CHECK(rstd[n] == doctest::Approx(rs).epsilon(1e-6));
    for (int c = 0; c < C; ++c) CHECK(out[n * C + c] == doctest::Approx(x[n * C + c] * rs * w[c]).epsilon(1e-5));
  }
  auto objective = [&] {
    forward();
    return weighted_sum(out, r);
  };
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
  be->rmsnorm_bwd({.dinp = view(dx, {N, C}),
                   .dweight = view(dw, {C}),
                   .dout = view(r, {N, C}),
                   .inp = view(x, {N, C}),
                   .weight = view(w, {C}),
                   .rstd = view(rstd, {N})});
  check_gradient("dinp", x, dx, objective);
  check_gradient("dweight", w, dw, objective);

  forward();
  auto dx_acc = prior;
  auto dw_once = dw;
  be->rmsnorm_bwd({.dinp = view(dx_acc, {N, C}),
                   .dweight = view(dw, {C}),
                   .dout = view(r, {N, C}),
                   .inp = view(x, {N, C}),
                   .weight = view(w, {C}),
                   .rstd = view(rstd, {N})});
  for (int i = 0; i < N * C; ++i) CHECK(dx_acc[i] == doctest::Approx(prior[i] + dx[i]).epsilon(1e-6));
  for (int c = 0; c < C; ++c) CHECK(dw[c] == doctest::Approx(2.0 * dw_once[c]).epsilon(1e-6));
}

TEST_CASE("cpu residual_norm_fwd adds then normalizes") {
  auto be = make_cpu_backend();
  auto a = randn(N * C, 41), b = randn(N * C, 42), w = randn(C, 43);
  std::vector<float> residual(N * C), out(N * C), rstd(N), sum(N * C), ref(N * C), ref_rstd(N);
  be->residual_norm_fwd({.residual = view(residual, {N, C}),
                         .out = view(out, {N, C}),
                         .rstd = view(rstd, {N}),
                         .a = view(a, {N, C}),
                         .b = view(b, {N, C}),
                         .weight = view(w, {C}),
                         .eps = kEps,
                         .rms = true});
  for (int i = 0; i < N * C; ++i) sum[i] = a[i] + b[i];
  be->rmsnorm_fwd({.out = view(ref, {N, C}),
                   .rstd = view(ref_rstd, {N}),
                   .inp = view(sum, {N, C}),
                   .weight = view(w, {C}),
                   .eps = kEps});
  CHECK(residual == sum);
  CHECK(out == ref);
}

TEST_SUITE_END();
