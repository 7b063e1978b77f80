// CPU embeddings: token rows of a vocab shard (vocab_start) plus learned positions; forward vs a
// direct lookup, gradients by central differences for wte and wpe, out-of-shard tokens get zero
// rows and no gradient, and the scatter-add is accumulating and bitwise deterministic.
#include <doctest/doctest.h>

#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {
constexpr int B = 2, T = 4, N = B * T, C = 3, kRows = 5, kMaxPos = 6, kStart = 3;
// Shard rows hold tokens [3, 8). Tokens 1 and 9 are outside; 4 and 6 repeat.
std::vector<int32_t> tokens() { return {4, 1, 6, 4, 9, 3, 6, 7}; }
}  // namespace

TEST_CASE("cpu embedding_fwd reads shard rows, zero rows outside the shard, plus positions") {
  auto be = make_cpu_backend();
  auto tok = tokens();
  auto wte = randn(kRows * C, 1), wpe = randn(kMaxPos * C, 2);
  std::vector<float> out(N * C, 9.0f);
  be->embedding_fwd({.out = view(out, {N, C}),
                     .tokens = view(tok, {B, T}),
                     .wte = view(wte, {kRows, C}),
                     .wpe = view(wpe, {kMaxPos, C}),
                     .T = T,
                     .vocab_start = kStart});
  for (int n = 0; n < N; ++n) {
    int row = tok[n] - kStart;
    bool in_shard = row >= 0 && row < kRows;
    for (int c = 0; c < C; ++c) CHECK(out[n * C + c] == (in_shard ? wte[row * C + c] : 0.0f) + wpe[(n % T) * C + c]);
  }
  // Without wpe: plain lookup.
  be->embedding_fwd({.out = view(out, {N, C}),
                     .tokens = view(tok, {B, T}),
                     .wte = view(wte, {kRows, C}),
                     .T = T,
                     .vocab_start = kStart});
  CHECK(out[0] == wte[(4 - kStart) * C]);
  CHECK(out[1 * C] == 0.0f);
}

TEST_CASE("cpu embedding_bwd gradients match finite differences for wte and wpe") {
  auto be = make_cpu_backend();
  auto tok = tokens();
  auto wte = randn(kRows * C, 11), wpe = randn(kMaxPos * C, 12), r = randn(N * C, 13);
  auto objective = [&] {
    std::vector<float> out(N * C);
    be->embedding_fwd({.out = view(out, {N, C}),
                       .tokens = view(tok, {N}),
                       .wte = view(wte, {kRows, C}),
                       .wpe = view(wpe, {kMaxPos, C}),
                       .T = T,
                       .vocab_start = kStart});
    return weighted_sum(out, r);
  };
  std::vector<float> dwte(kRows * C, 0.0f), dwpe(kMaxPos * C, 0.0f);
  be->embedding_bwd({.dwte = view(dwte, {kRows, C}),
                     .dwpe = view(dwpe, {kMaxPos, C}),
                     .dout = view(r, {N, C}),
                     .tokens = view(tok, {N}),
                     .T = T,
                     .vocab_start = kStart});
  check_gradient("dwte", wte, dwte, objective);
  check_gradient("dwpe", wpe, dwpe, objective);
  // Positions ≥ T are never used.
  for (int i = T * C; i < kMaxPos * C; ++i) CHECK(dwpe[i] == 0.0f);
  // Row of token 5 (index 2) is not in the batch: no gradient.
  for (int c = 0; c < C; ++c) CHECK(dwte[2 * C + c] == 0.0f);
}

TEST_CASE("cpu embedding_bwd accumulates and is bitwise deterministic") {
  auto be = make_cpu_backend();
  auto tok = tokens();
  auto r = randn(N * C, 21);
  auto run = [&] {
    std::vector<float> dwte(kRows * C, 0.5f), dwpe(kMaxPos * C, 0.25f);
    be->embedding_bwd({.dwte = view(dwte, {kRows, C}),
                       .dwpe = view(dwpe, {kMaxPos, C}),
                       .dout = view(r, {N, C}),
                       .tokens = view(tok, {N}),
                       .T = T,
                       .vocab_start = kStart});
    return std::pair{dwte, dwpe};
  };
  auto [a_wte, a_wpe] = run();
  auto [b_wte, b_wpe] = run();
  CHECK(std::memcmp(a_wte.data(), b_wte.data(), a_wte.size() * 4) == 0);
  CHECK(std::memcmp(a_wpe.data(), b_wpe.data(), a_wpe.size() * 4) == 0);
  // Token 4 appears at n = 0 and n = 3: its row gets 0.5 + r[0] + r[3].
  for (int c = 0; c < C; ++c)
    CHECK(a_wte[(4 - kStart) * C + c] == doctest::Approx(0.5 + r[0 * C + c] + r[3 * C + c]).epsilon(1e-6));
  // Position 1 collects n = 1 and n = 5.
  for (int c = 0; c < C; ++c)
    CHECK(a_wpe[1 * C + c] == doctest::Approx(0.25 + r[1 * C + c] + r[5 * C + c]).epsilon(1e-6));
}

TEST_SUITE_END();
