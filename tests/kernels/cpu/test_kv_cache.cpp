// CPU decode attention over a KV cache: appending a sequence to the cache in chunks (a prefill,
// then one token at a time) and attending each chunk's queries over the cache gives, at every
// position, exactly the outputs of rope_fwd + attention_fwd over the whole sequence (the same
// arithmetic term for term), for GQA with and without RoPE; and the cache holds the rotated keys
// and the values at [b, kv head, position].
#include <doctest/doctest.h>

#include <vector>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {

constexpr int B = 2, T = 7, Hq = 4, Hkv = 2, D = 8, S = 9;  // cache capacity S > T
constexpr int kRow = (Hq + 2 * Hkv) * D;

// Rows [t0, t0 + n) of every batch row of a [B, T, width] buffer, as a [B, n, width] buffer.
std::vector<float> slice(const std::vector<float>& x, int t0, int n, int width) {
  std::vector<float> out(size_t(B) * n * width);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < width; ++i) out[(size_t(b) * n + t) * width + i] = x[(size_t(b) * T + t0 + t) * width + i];
  return out;
}

void check_decode_matches_full(float theta) {
  auto be = make_cpu_backend();
  const std::vector<float> x = randn(size_t(B) * T * kRow, 11);
  const AttentionShape full{.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D};

  std::vector<float> rotated = x, out_full(size_t(B) * T * Hq * D), lse(size_t(B) * Hq * T);
  const Tensor inv_freq = theta > 0 ? rope_freqs(theta, D) : Tensor();  // undefined: no RoPE
  if (theta > 0) be->rope_fwd({.qkv = view(rotated, {B, T, kRow}), .shape = full, .inv_freq = inv_freq});
  be->attention_fwd({.out = view(out_full, {B, T, Hq * D}),
                     .lse = view(lse, {B, Hq, T}),
                     .qkv = view(rotated, {B, T, kRow}),
                     .shape = full});

  std::vector<float> k_cache(size_t(B) * Hkv * S * D, -7.f), v_cache(k_cache.size(), -7.f);
  const Tensor kc = view(k_cache, {B, Hkv, S, D}), vc = view(v_cache, {B, Hkv, S, D});
  const int chunks[][2] = {{0, 3}, {3, 1}, {4, 1}, {5, 2}};  // prefill 3, then 1, 1, 2 tokens
  for (const auto& [t0, n] : chunks) {
    std::vector<float> qkv = slice(x, t0, n, kRow), out(size_t(B) * n * Hq * D);
    const AttentionShape shape{.B = B, .T = n, .Hq = Hq, .Hkv = Hkv, .D = D};
    be->kv_cache_append({.qkv = view(qkv, {B, n, kRow}),
                         .k_cache = kc,
                         .v_cache = vc,
                         .shape = shape,
                         .past = t0,
                         .rope_inv_freq = inv_freq});
    CHECK(qkv == slice(rotated, t0, n, kRow));  // q and k rotated in place exactly as rope_fwd
    be->kv_attention({.out = view(out, {B, n, Hq * D}),
                      .qkv = view(qkv, {B, n, kRow}),
                      .k_cache = kc,
                      .v_cache = vc,
                      .shape = shape,
                      .past = t0});
    CHECK(out == slice(out_full, t0, n, Hq * D));
  }
  // The cache: rotated k and v of kv head g at [b, g, t, :]; positions past T untouched.
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < Hkv; ++g)
      for (int t = 0; t < S; ++t)
        for (int d = 0; d < D; ++d) {
          const size_t slot = ((size_t(b) * Hkv + g) * S + t) * D + d;
          const size_t row = (size_t(b) * T + t) * kRow;
          CHECK(k_cache[slot] == (t < T ? rotated[row + (Hq + g) * D + d] : -7.f));
          CHECK(v_cache[slot] == (t < T ? rotated[row + (Hq + Hkv + g) * D + d] : -7.f));
        }
}

}  // namespace

TEST_CASE("cpu kv_cache_append + kv_attention equal rope_fwd + attention_fwd at every position (GQA, RoPE)") {
  check_decode_matches_full(10000.f);
}

TEST_CASE("cpu kv_cache_append + kv_attention equal attention_fwd at every position (GQA, no RoPE)") {
  check_decode_matches_full(0.f);
}

TEST_CASE("cpu kv_cache_append reads the run's table: a perturbed entry changes only its pair's rotation") {
  auto be = make_cpu_backend();
  std::vector<double> table = recipe::core::rope_inv_freq({.theta = 10000.f}, D), perturbed = table;
  constexpr int j = 1, past = 3, n = 4;  // the perturbed pair (j, j + D/2); positions 3 .. 6
  perturbed[j] *= 0.5;
  const std::vector<float> x = randn(size_t(B) * T * kRow, 13);
  std::vector<float> full = x;  // rope_fwd over the whole sequence with the perturbed table
  be->rope_fwd({.qkv = view(full, {B, T, kRow}),
                .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D},
                .inv_freq = view(perturbed, {D / 2})});
  const AttentionShape shape{.B = B, .T = n, .Hq = Hq, .Hkv = Hkv, .D = D};
  auto append = [&](std::vector<double>& freqs) {
    std::vector<float> qkv = slice(x, past, n, kRow), kc(size_t(B) * Hkv * S * D), vc(kc.size());
    be->kv_cache_append({.qkv = view(qkv, {B, n, kRow}),
                         .k_cache = view(kc, {B, Hkv, S, D}),
                         .v_cache = view(vc, {B, Hkv, S, D}),
                         .shape = shape,
                         .past = past,
                         .rope_inv_freq = view(freqs, {D / 2})});
    return qkv;
  };
  const std::vector<float> a = append(table), b = append(perturbed);
  CHECK(b == slice(full, past, n, kRow));  // exactly rope_fwd at positions past + t, from the same table
  for (size_t r = 0; r < size_t(B) * n; ++r)
    for (int h = 0; h < Hq + 2 * Hkv; ++h)
      for (int i = 0; i < D; ++i) {
        const size_t idx = r * kRow + size_t(h) * D + size_t(i);
        if (i % (D / 2) == j && h < Hq + Hkv)
          CHECK(b[idx] != a[idx]);  // the perturbed pair of q and k heads (positions > 0)
        else
          CHECK(b[idx] == a[idx]);  // every other pair and the v heads: bitwise the same
      }
}

TEST_CASE("cpu kv ops refuse positions past the cache and mismatched caches") {
  auto be = make_cpu_backend();
  std::vector<float> qkv(size_t(B) * 2 * kRow), out(size_t(B) * 2 * Hq * D), kc(size_t(B) * Hkv * S * D), vc(kc.size());
  const AttentionShape shape{.B = B, .T = 2, .Hq = Hq, .Hkv = Hkv, .D = D};
  CHECK_THROWS_WITH_AS(be->kv_cache_append({.qkv = view(qkv, {B, 2, kRow}),
                                            .k_cache = view(kc, {B, Hkv, S, D}),
                                            .v_cache = view(vc, {B, Hkv, S, D}),
                                            .shape = shape,
                                            .past = S - 1}),
                       doctest::Contains("do not fit the cache"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(be->kv_attention({.out = view(out, {B, 2, Hq * D}),
                                         .qkv = view(qkv, {B, 2, kRow}),
                                         .k_cache = view(kc, {B, Hkv, S, D}),
                                         .v_cache = view(vc, {B, Hkv * S, D, 1}),
                                         .shape = shape}),
                       doctest::Contains("v_cache"), std::invalid_argument);
}

TEST_SUITE_END();
