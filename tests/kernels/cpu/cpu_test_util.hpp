// Shared helpers of the CPU kernel tests: host buffers viewed as Tensors, seeded random data, the
// scalar objective L = Σ out∘R, and a central-difference gradient checker.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "family/rope.hpp"
#include "kernels/ops.hpp"

namespace recipe::kernels::test {

inline Tensor view(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  Tensor t(v.data(), DType::f32, Device::cpu, shape);
  REQUIRE(t.numel() == int64_t(v.size()));
  return t;
}

inline Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  Tensor t(v.data(), DType::i32, Device::cpu, shape);
  REQUIRE(t.numel() == int64_t(v.size()));
  return t;
}

inline Tensor view(std::vector<double>& v, std::initializer_list<int64_t> shape) {
  Tensor t(v.data(), DType::f64, Device::cpu, shape);
  REQUIRE(t.numel() == int64_t(v.size()));
  return t;
}

// RopeArgs::inv_freq for base θ and head dim D: the table a run makes (family/rope.hpp), f64 [D/2],
// one per (θ, D) kept for the whole test process (the map's nodes do not move).
inline Tensor rope_freqs(float theta, int D) {
  static std::map<std::pair<float, int>, std::vector<double>> tables;
  auto [it, fresh] = tables.try_emplace({theta, D});
  if (fresh) it->second = recipe::core::rope_inv_freq({.theta = theta}, D);
  return view(it->second, {D / 2});
}

inline std::vector<float> randn(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Σ a∘b in double: the objective whose gradient w.r.t. `a` is `b`.
inline double weighted_sum(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

struct GradCheck {
  float step = 1e-2f;
  double rtol = 1e-2;
  double atol = 1e-3;
};

// Perturbs every element of x by ±step (x is read by `objective`), compares the central difference
// with `analytic` and fails listing the first mismatches. Also fails if the analytic gradient is
// identically zero while the numeric one is not (an op that forgot to write its gradient).
inline void check_gradient(const std::string& what, std::vector<float>& x, const std::vector<float>& analytic,
                           const std::function<double()>& objective, GradCheck opt = {}) {
  REQUIRE(x.size() == analytic.size());
  int bad = 0;
  double worst = 0.0, max_numeric = 0.0;
  std::ostringstream report;
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    const float hi = saved + opt.step, lo = saved - opt.step;
    x[i] = hi;
    const double l_hi = objective();
    x[i] = lo;
    const double l_lo = objective();
    x[i] = saved;
    const double numeric = (l_hi - l_lo) / (double(hi) - double(lo));
    const double err = std::fabs(numeric - analytic[i]);
    const double tol = opt.atol + opt.rtol * std::max(std::fabs(numeric), std::fabs(double(analytic[i])));
    max_numeric = std::max(max_numeric, std::fabs(numeric));
    worst = std::max(worst, err);
    if (err > tol && bad++ < 5)
      report << "  [" << i << "] analytic " << analytic[i] << " vs numeric " << numeric << "\n";
  }
  INFO(what << ": " << bad << " of " << x.size() << " elements off, worst |error| " << worst << "\n" << report.str());
  CHECK(bad == 0);
  CHECK(max_numeric > 1e-3);  // the objective must actually depend on x, else the check proves nothing
}

}  // namespace recipe::kernels::test
