// CPU embeddings at context parallelism's positions (ops.hpp EmbeddingFwdArgs::positions): row t
// of every sample reads wpe row positions[t] (a CP rank's rows are two separated chunks of the whole
// sample's table), and its gradient adds into that row only, leaving the rows no position names as
// they were; a position outside the table is refused with the op, the index and the table's size.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

TEST_CASE("cpu embedding with positions: row t reads and accumulates wpe row positions[t]") {
  constexpr size_t B = 2, T = 4, N = B * T, C = 3, V = 5, S = 6;  // S: the table's rows (the whole sample)
  auto be = make_cpu_backend();
  std::vector<int32_t> tok = {4, 1, 0, 4, 3, 2, 0, 1};
  std::vector<int32_t> pos = {1, 2, 5, 4};  // any distinct rows of the table; rows 0 and 3 unnamed
  auto wte = randn(V * C, 1), wpe = randn(S * C, 2);
  std::vector<float> out(N * C, 9.0f);
  const int64_t b_ = B, t_ = T, n_ = N, c_ = C, v_ = V, s_ = S;  // the same sizes as tensor dims
  be->embedding_fwd({.out = view(out, {n_, c_}),
                     .tokens = view(tok, {b_, t_}),
                     .wte = view(wte, {v_, c_}),
                     .wpe = view(wpe, {s_, c_}),
                     .positions = view(pos, {t_}),
                     .T = int(T)});
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      CHECK(out[n * C + c] == wte[size_t(tok[n]) * C + c] + wpe[size_t(pos[n % T]) * C + c]);

  auto dout = randn(N * C, 3);
  const std::vector<float> dwpe0 = randn(S * C, 4);
  std::vector<float> dwpe = dwpe0;
  be->embedding_bwd({.dwpe = view(dwpe, {s_, c_}),
                     .dout = view(dout, {n_, c_}),
                     .tokens = view(tok, {b_, t_}),
                     .positions = view(pos, {t_}),
                     .T = int(T)});
  for (size_t p = 0; p < S; ++p) {
    CAPTURE(p);
    bool named = false;
    for (size_t t = 0; t < T; ++t) named = named || size_t(pos[t]) == p;
    for (size_t c = 0; c < C; ++c) {
      float want = dwpe0[p * C + c];
      for (size_t n = 0; n < N; ++n)
        if (size_t(pos[n % T]) == p) want += dout[n * C + c];
      if (named)
        CHECK(dwpe[p * C + c] == doctest::Approx(want).epsilon(1e-6));
      else
        CHECK(dwpe[p * C + c] == dwpe0[p * C + c]);  // rows 0 and 3: untouched, bit for bit
    }
  }

  pos[2] = int32_t(S);  // past the table
  CHECK_THROWS_WITH_AS(be->embedding_fwd({.out = view(out, {n_, c_}),
                                          .tokens = view(tok, {b_, t_}),
                                          .wte = view(wte, {v_, c_}),
                                          .wpe = view(wpe, {s_, c_}),
                                          .positions = view(pos, {t_}),
                                          .T = int(T)}),
                       doctest::Contains("positions[2] = 6 is outside the 6 rows"), std::invalid_argument);
}
