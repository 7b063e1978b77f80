// CPU cross entropy: losses vs the direct formula, dlogits in place vs central differences, padding
// columns and ignored targets (< 0) get zero gradient, out-of-vocab targets are refused.
#include <doctest/doctest.h>

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

TEST_CASE("cpu cross_entropy refuses targets outside the vocab") {
  auto be = make_cpu_backend();
  auto z = logits_with_padding(3);
  std::vector<int32_t> tgt = {1, kVocab, 0, 0};
  std::vector<float> losses(N), dloss(N, 1.0f);
  CHECK_THROWS_WITH_AS(
      be->cross_entropy(view(losses, {N}), view(z, {N, kPadded}), view(tgt, {N}), kVocab, view(dloss, {N}), true),
      doctest::Contains("row 1"), std::invalid_argument);
}

TEST_SUITE_END();
