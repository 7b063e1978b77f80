// CUDA vs CPU: every CUDA RoPE kernel reads the run's inverse-frequency table (ops.hpp
// RopeArgs::inv_freq, KvCacheAppendArgs::rope_inv_freq) instead of computing θ^(-2i/D): with a
// table unlike any θ's (inv_freq[i] = 0.9/(1 + i)), the angle-table kernel (D = 64), the scalar
// kernel (D = 12) and kv_cache_append's kernel agree with the CPU reference reading the same table.
// The backend keeps a (cos, sin) table derived from inv_freq across calls; after the table is
// rewritten with from_host, or freed and another allocated, the kernels follow the new values.
// Skipped without a GPU.
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

namespace {

std::vector<double> odd_table(int D, double scale) {
  std::vector<double> t(size_t(D / 2));
  for (size_t i = 0; i < t.size(); ++i) t[i] = scale * 0.9 / double(1 + i);
  return t;
}

// rope_fwd then rope_bwd of a fresh [B, T, row] qkv with the table f, CUDA against CPU.
void check_rope(const Dual& f, const AttentionShape& shape, uint32_t seed) {
  Rng r(seed);
  const int64_t row = int64_t(shape.Hq + 2 * shape.Hkv) * shape.D;
  auto qkv = make_dual(Kind::act, {shape.B, shape.T, row}, r.normal(size_t(shape.B) * shape.T * row));
  cpu_backend().rope_fwd({.qkv = qkv.c, .shape = shape, .inv_freq = f.c});
  gpu_backend().rope_fwd({.qkv = qkv.g, .shape = shape, .inv_freq = f.g});
  CHECK_CLOSE(qkv, kBf16Tol);
  cpu_backend().rope_bwd({.qkv = qkv.c, .shape = shape, .inv_freq = f.c});
  gpu_backend().rope_bwd({.qkv = qkv.g, .shape = shape, .inv_freq = f.g});
  CHECK_CLOSE(qkv, 2 * kBf16Tol);
}

}  // namespace

TEST_CASE("cuda rope and kv_cache_append read the inv_freq table, not theta, vs CPU" * doctest::skip(!has_gpu())) {
  for (const int D : {64, 12}) {
    CAPTURE(D);
    const AttentionShape shape{.B = 2, .T = 40, .Hq = 4, .Hkv = 2, .D = D};
    Dual f = rope_freqs(odd_table(D, 1.0));
    check_rope(f, shape, uint32_t(D));

    // The same tensor rewritten: the backend's (cos, sin) table made from it is not reused.
    const std::vector<double> halved = odd_table(D, 0.5);
    cpu_backend().from_host(f.c, halved.data());
    gpu_backend().from_host(f.g, halved.data());
    check_rope(f, shape, uint32_t(D + 1));

    // Freed and another table allocated (possibly at the same address): the new values are read.
    f = Dual();
    const Dual g = rope_freqs(odd_table(D, 2.0));
    check_rope(g, shape, uint32_t(D + 2));

    // kv_cache_append at positions past .. past + n − 1 reads the same table.
    const int past = 5, n = 3, S = 8;
    const int64_t row = int64_t(shape.Hq + 2 * shape.Hkv) * D;
    Rng r(uint32_t(D + 3));
    auto qkv = make_dual(Kind::act, {1, n, row}, r.normal(size_t(n) * row));
    const std::vector<float> zeros(size_t(shape.Hkv) * S * D, 0.f);
    auto kc = make_dual(Kind::act, {1, shape.Hkv, S, D}, zeros), vc = make_dual(Kind::act, {1, shape.Hkv, S, D}, zeros);
    const AttentionShape one{.B = 1, .T = n, .Hq = shape.Hq, .Hkv = shape.Hkv, .D = D};
    cpu_backend().kv_cache_append(
        {.qkv = qkv.c, .k_cache = kc.c, .v_cache = vc.c, .shape = one, .past = past, .rope_inv_freq = g.c});
    gpu_backend().kv_cache_append(
        {.qkv = qkv.g, .k_cache = kc.g, .v_cache = vc.g, .shape = one, .past = past, .rope_inv_freq = g.g});
    CHECK_CLOSE(qkv, kBf16Tol);
    CHECK_CLOSE(kc, kBf16Tol);
  }
}

TEST_CASE("cuda rope refuses a missing or mis-sized inv_freq table" * doctest::skip(!has_gpu())) {
  const AttentionShape shape{.B = 1, .T = 4, .Hq = 2, .Hkv = 1, .D = 16};
  auto qkv = make_dual(Kind::act, {1, 4, 4 * 16}, std::vector<float>(4 * 4 * 16, 1.f));
  const Dual short_table = rope_freqs(odd_table(8, 1.0));
  CHECK_THROWS_WITH_AS(gpu_backend().rope_fwd({.qkv = qkv.g, .shape = shape}), doctest::Contains("inv_freq"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(gpu_backend().rope_fwd({.qkv = qkv.g, .shape = shape, .inv_freq = short_table.g}),
                       doctest::Contains("inv_freq"), std::invalid_argument);
}

TEST_SUITE_END();
