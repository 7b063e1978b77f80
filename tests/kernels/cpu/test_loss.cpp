// CPU cross entropy: losses vs the direct formula, dlogits in place vs central differences, padding
// columns and ignored targets (< 0) get zero gradient, out-of-vocab targets are refused, and the
// per-row dloss scales each row by its own weight (bitwise the scalar form's arithmetic per row).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
constexpr int N = 4, kVocab = 7, kPadded = 10;
constexpr float kDloss = 0.25f;
std::vector<int32_t> targets() { return {3, -100, 0, 6}; }

std::vector<float> logits_with_padding(uint32_t seed) {
  auto z = randn(N * kPadded, seed, 2.0f);
  for (int n = 0; n < N; ++n)
    for (int v = kVocab; v < kPadded; ++v) z[n * kPadded + v] = 50.0f;  // huge: must be ignored
  return z;
}
}  // namespace

TEST_CASE("cpu cross_entropy losses match -log softmax over the real vocab") {
  auto be = make_cpu_backend();
  auto z = logits_with_padding(1);
  auto tgt = targets();
  std::vector<float> losses(N, 9.0f);
  be->cross_entropy(view(losses, {N}), view(z, {N, kPadded}), view(tgt, {N}), kVocab, Tensor(), false);
  for (int n = 0; n < N; ++n) {
    if (tgt[n] < 0) {
      CHECK(losses[n] == 0.0f);
      continue;
    }
    double sum = 0;
    for (int v = 0; v < kVocab; ++v) sum += std::exp(double(z[n * kPadded + v]));
    CHECK(losses[n] == doctest::Approx(std::log(sum) - z[n * kPadded + tgt[n]]).epsilon(1e-6));
  }
  CHECK(z == logits_with_padding(1));  // no gradient requested: logits untouched

  // Stable for large logits.
  std::vector<float> big(kPadded, 0.0f);
  big[2] = 1000.0f;  // not in column 0, so the max must really be searched
  std::vector<int32_t> t0 = {1};
  std::vector<float> l0(1);
  be->cross_entropy(view(l0, {1}), view(big, {1, kPadded}), view(t0, {1}), kVocab, Tensor(), false);
  CHECK(l0[0] == doctest::Approx(1000.0).epsilon(1e-6));
}

TEST_CASE("cpu cross_entropy dlogits in place match finite differences of dloss·Σ losses") {
  auto be = make_cpu_backend();
  auto z = logits_with_padding(2);
  auto tgt = targets();
  auto objective = [&] {
    auto copy = z;
    std::vector<float> losses(N);
    be->cross_entropy(view(losses, {N}), view(copy, {N, kPadded}), view(tgt, {N}), kVocab, Tensor(), false);
    double s = 0;
    for (float l : losses) s += double(kDloss) * l;
    return s;
  };
  auto grad = z;
  std::vector<float> losses(N), dloss(N, kDloss);
  be->cross_entropy(view(losses, {N}), view(grad, {N, kPadded}), view(tgt, {N}), kVocab, view(dloss, {N}), true);
  check_gradient("dlogits", z, grad, objective);
  for (int n = 0; n < N; ++n)
    for (int v = kVocab; v < kPadded; ++v) CHECK(grad[n * kPadded + v] == 0.0f);
  for (int v = 0; v < kPadded; ++v) CHECK(grad[1 * kPadded + v] == 0.0f);  // ignored row
  double row_sum = 0;
  for (int v = 0; v < kVocab; ++v) row_sum += grad[v];
  CHECK(std::fabs(row_sum) < 1e-6);  // softmax − onehot sums to zero
}

namespace {
// The dlogits of the kernel's scalar-dloss form (before the per-row weights), written out as it
// computed them: the per-row form must give these bits for a row whose weight is `dloss`.
std::vector<float> scalar_dloss_dlogits(std::vector<float> z, const std::vector<int32_t>& tgt, float dloss) {
  for (int n = 0; n < N; ++n) {
    float* row = z.data() + n * kPadded;
    if (tgt[size_t(n)] < 0) {
      std::fill(row, row + kPadded, 0.0f);
      continue;
    }
    float max_z = row[0];
    for (int v = 1; v < kVocab; ++v) max_z = std::max(max_z, row[v]);
    double sum = 0.0;
    for (int v = 0; v < kVocab; ++v) sum += std::exp(double(row[v] - max_z));
    const double lse = double(max_z) + std::log(sum);
    for (int v = 0; v < kVocab; ++v) {
      double prob = std::exp(double(row[v]) - lse);
      row[v] = float((prob - (v == tgt[size_t(n)] ? 1.0 : 0.0)) * double(dloss));
    }
    for (int v = kVocab; v < kPadded; ++v) row[v] = 0.0f;
  }
  return z;
}
}  // namespace

TEST_CASE("cpu cross_entropy: per-row dloss scales each row; uniform rows equal the scalar form bitwise") {
  auto be = make_cpu_backend();
  const auto z = logits_with_padding(4);
  auto tgt = targets();
  std::vector<float> losses(N);
  // The same weight in every row: bit for bit what the scalar dloss gave.
  std::vector<float> uniform(N, kDloss);
  auto g = z;
  be->cross_entropy(view(losses, {N}), view(g, {N, kPadded}), view(tgt, {N}), kVocab, view(uniform, {N}), true);
  const auto want = scalar_dloss_dlogits(z, tgt, kDloss);
  CHECK(std::memcmp(g.data(), want.data(), g.size() * sizeof(float)) == 0);
  // Different weights (row 1 is ignored: zero whatever its weight): each row is the scalar form's
  // row at its own weight, bitwise, and so proportional to the uniform row.
  std::vector<float> w = {0.5f, 7.0f, -2.0f, 0.03125f};
  auto gw = z;
  be->cross_entropy(view(losses, {N}), view(gw, {N, kPadded}), view(tgt, {N}), kVocab, view(w, {N}), true);
  for (int n = 0; n < N; ++n) {
    CAPTURE(n);
    const auto row_want = scalar_dloss_dlogits(z, tgt, w[size_t(n)]);
    CHECK(std::memcmp(gw.data() + n * kPadded, row_want.data() + n * kPadded, kPadded * sizeof(float)) == 0);
    for (int v = 0; v < kPadded; ++v) {
      const float scaled = g[size_t(n * kPadded + v)] * (w[size_t(n)] / kDloss);
      CHECK(gw[size_t(n * kPadded + v)] == doctest::Approx(scaled).epsilon(1e-6));
    }
  }
  for (int v = 0; v < kPadded; ++v) CHECK(gw[size_t(1 * kPadded + v)] == 0.0f);
}

TEST_CASE("cpu cross_entropy refuses targets outside the vocab") {
  auto be = make_cpu_backend();
  auto z = logits_with_padding(3);
  std::vector<int32_t> tgt = {1, kVocab, 0, 0};
  std::vector<float> losses(N), dloss(N, 1.0f);
  CHECK_THROWS_WITH_AS(
      be->cross_entropy(view(losses, {N}), view(z, {N, kPadded}), view(tgt, {N}), kVocab, view(dloss, {N}), true),
      doctest::Contains("row 1"), std::invalid_argument);
  // A gradient needs one weight per row.
  std::vector<int32_t> ok = {1, 2, 0, 0};
  std::vector<float> short_dloss(N - 1, 1.0f);
  CHECK_THROWS_WITH_AS(be->cross_entropy(view(losses, {N}), view(z, {N, kPadded}), view(ok, {N}), kVocab,
                                         view(short_dloss, {N - 1}), true),
                       doctest::Contains("dloss"), std::invalid_argument);
}

TEST_SUITE_END();
