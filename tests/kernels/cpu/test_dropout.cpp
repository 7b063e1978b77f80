// CPU dropout (the adapter dropout's op): the mask is a pure function of (key, global position),
// so a block of a larger matrix gets exactly the big matrix's mask at its positions (TP shards,
// micro-batches), the same call drops the same elements (a backward regenerates the forward's
// mask), kept elements are scaled by 1/(1−p), the dropped fraction is p, and accumulate adds.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

TEST_CASE("cpu dropout: scale, fraction, determinism, accumulate") {
  auto be = make_cpu_backend();
  const int64_t R = 64, C = 96;
  const float p = 0.25f;
  std::vector<float> x = randn(size_t(R * C), 3), y(x.size()), y2(x.size());
  const DropoutArgs a{.out = view(y, {R, C}), .inp = view(x, {R, C}), .p = p, .key = 77, .row_stride = C};
  be->dropout(a);
  int64_t dropped = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
    } else {
      CHECK(y[i] == x[i] * (1.0f / (1.0f - p)));
    }
  }
  // 6144 draws: the dropped fraction is p within ±4 standard deviations (about ±0.022).
  const double frac = double(dropped) / double(x.size());
  CHECK(std::abs(frac - p) < 4 * std::sqrt(p * (1 - p) / double(x.size())));
  // The same call drops the same elements; another key others.
  DropoutArgs again = a;
  again.out = view(y2, {R, C});
  be->dropout(again);
  CHECK(y2 == y);
  again.key = 78;
  be->dropout(again);
  CHECK(y2 != y);
  // accumulate: out += dropout(inp).
  std::vector<float> acc(x.size(), 1.0f);
  DropoutArgs add = a;
  add.out = view(acc, {R, C});
  add.accumulate = true;
  be->dropout(add);
  for (size_t i = 0; i < x.size(); ++i) CHECK(acc[i] == 1.0f + y[i]);
  // p = 0 keeps everything unchanged; p outside [0, 1) is refused.
  DropoutArgs none = a;
  none.p = 0.0f;
  be->dropout(none);
  CHECK(y == x);
  none.p = 1.0f;
  CHECK_THROWS_AS(be->dropout(none), std::invalid_argument);
}

TEST_CASE("cpu dropout: a block of a larger matrix gets the larger matrix's mask at its positions") {
  auto be = make_cpu_backend();
  const int64_t R = 8, C = 12, r0 = 3, c0 = 4, r = 4, c = 6;
  std::vector<float> x(size_t(R * C), 1.0f), full(x.size());
  be->dropout({.out = view(full, {R, C}), .inp = view(x, {R, C}), .p = 0.5f, .key = 5, .row_stride = C});
  std::vector<float> block_in(size_t(r * c), 1.0f), block(block_in.size());
  be->dropout({.out = view(block, {r, c}),
               .inp = view(block_in, {r, c}),
               .p = 0.5f,
               .key = 5,
               .first_row = r0,
               .row_stride = C,
               .first_col = c0});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) CHECK(block[size_t(i * c + j)] == full[size_t((r0 + i) * C + c0 + j)]);
  // A block that does not fit its row is refused.
  CHECK_THROWS_AS(be->dropout({.out = view(block, {r, c}),
                               .inp = view(block_in, {r, c}),
                               .p = 0.5f,
                               .key = 5,
                               .row_stride = C,
                               .first_col = C - 2}),
                  std::invalid_argument);
}

TEST_SUITE_END();
