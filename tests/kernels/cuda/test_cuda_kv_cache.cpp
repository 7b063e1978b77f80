// CUDA vs CPU: decoding with a KV cache. A sequence is appended in chunks (a prefill, then single
// tokens) with kv_cache_append (RoPE at positions past + t, or none) and each chunk's queries
// attend over the cache with kv_attention; the outputs, the rotated qkv and the caches agree with
// the CPU reference, for GQA and MHA, head dims 16, 64 and 128, and a cache longer than the 4-warp
// key split (so every warp of the CUDA kernel holds keys, and some hold none at the first steps).
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

namespace {

struct KvCase {
  int B, T, Hq, Hkv, D, S;
  float theta;
};

void check_kv_decode(const KvCase& c, uint32_t seed) {
  Rng r(seed);
  const int64_t row = int64_t(c.Hq + 2 * c.Hkv) * c.D;
  const std::vector<float> all = r.normal(size_t(c.B) * c.T * row);
  const std::vector<float> junk(size_t(c.B) * c.Hkv * c.S * c.D, 0.f);
  auto kc = make_dual(Kind::act, {c.B, c.Hkv, c.S, c.D}, junk);
  auto vc = make_dual(Kind::act, {c.B, c.Hkv, c.S, c.D}, junk);
  const Dual freqs = c.theta > 0 ? rope_freqs(c.theta, c.D) : Dual();  // undefined tensors: no RoPE
  std::vector<std::pair<int, int>> chunks = {{0, c.T - 3}, {c.T - 3, 1}, {c.T - 2, 1}, {c.T - 1, 1}};
  for (const auto& [t0, n] : chunks) {
    std::vector<float> x(size_t(c.B) * n * row);
    for (int b = 0; b < c.B; ++b)
      for (int t = 0; t < n; ++t)
        for (int64_t i = 0; i < row; ++i) x[(size_t(b) * n + t) * row + i] = all[(size_t(b) * c.T + t0 + t) * row + i];
    auto qkv = make_dual(Kind::act, {c.B, n, row}, x);
    auto out =
        make_dual(Kind::act, {c.B, n, int64_t(c.Hq) * c.D}, std::vector<float>(size_t(c.B) * n * c.Hq * c.D, 9.f));
    const AttentionShape shape{.B = c.B, .T = n, .Hq = c.Hq, .Hkv = c.Hkv, .D = c.D};
    for (Backend* be : {&cpu_backend(), &gpu_backend()}) {
      const bool gpu = be == &gpu_backend();
      be->kv_cache_append({.qkv = gpu ? qkv.g : qkv.c,
                           .k_cache = gpu ? kc.g : kc.c,
                           .v_cache = gpu ? vc.g : vc.c,
                           .shape = shape,
                           .past = t0,
                           .rope_inv_freq = gpu ? freqs.g : freqs.c});
      be->kv_attention({.out = gpu ? out.g : out.c,
                        .qkv = gpu ? qkv.g : qkv.c,
                        .k_cache = gpu ? kc.g : kc.c,
                        .v_cache = gpu ? vc.g : vc.c,
                        .shape = shape,
                        .past = t0});
    }
    INFO("chunk at " << t0 << " of " << n << " tokens");
    CHECK_CLOSE(qkv, kBf16Tol);
    CHECK_CLOSE(out, kBf16Tol);
  }
  CHECK_CLOSE(kc, kBf16Tol);
  CHECK_CLOSE(vc, kBf16Tol);
}

}  // namespace

TEST_CASE("cuda kv_cache_append + kv_attention vs CPU, GQA with RoPE" * doctest::skip(!has_gpu())) {
  check_kv_decode({.B = 2, .T = 37, .Hq = 8, .Hkv = 2, .D = 64, .S = 48, .theta = 10000.f}, 1);
  check_kv_decode({.B = 1, .T = 300, .Hq = 4, .Hkv = 4, .D = 128, .S = 300, .theta = 500000.f}, 2);
}

TEST_CASE("cuda kv_cache_append + kv_attention vs CPU, no RoPE, head dim 16" * doctest::skip(!has_gpu())) {
  check_kv_decode({.B = 1, .T = 9, .Hq = 4, .Hkv = 4, .D = 16, .S = 12, .theta = 0.f}, 3);
  check_kv_decode({.B = 3, .T = 5, .Hq = 6, .Hkv = 3, .D = 16, .S = 5, .theta = 0.f}, 4);
}

TEST_SUITE_END();
