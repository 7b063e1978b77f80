// CUDA vs CPU: attention (cuDNN and the own kernels, GQA, fwd/bwd, deterministic backward; packed
// samples with per-sample positions, and RoPE at those positions),
// embeddings (deterministic backward), cross-entropy, AdamW, sum_squares, memory ops.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>

#include "tests/kernels/cuda/cuda_test_util.hpp"

#ifdef RECIPE_WITH_CUDA
#include "kernels/cuda/cuda_backend.hpp"
#endif

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

namespace {

struct AttnCase {
  int B, T, Hq, Hkv, D;
};

// A CUDA backend whose attention always takes the own kernels.
Backend& fallback_backend() {
  static std::unique_ptr<Backend> b = [] {
    BackendOptions o = recipe::kernels::testing::cuda_options();
    o.attention_fallback = true;  // the plan's kernels.attention="fallback"
    return make_cuda_backend(o);
  }();
  return *b;
}
Backend& deterministic_backend() {
  static std::unique_ptr<Backend> b = [] {
    BackendOptions o = recipe::kernels::testing::cuda_options();
    o.deterministic = true;
    return make_cuda_backend(o);
  }();
  return *b;
}

// positions (optional): per-sample positions [B·T] (packed samples, kernels/ops.hpp); max_samples:
// AttentionShape::max_samples (packed rows: > 0 lets cuDNN run them as ragged graphs).
void check_attention(Backend& gpu, const AttnCase& a, uint32_t seed, const std::vector<float>* positions = nullptr,
                     int max_samples = 0) {
  const AttentionShape shape{.B = a.B, .T = a.T, .Hq = a.Hq, .Hkv = a.Hkv, .D = a.D, .max_samples = max_samples};
  Rng r(seed);
  Dual pos;
  if (positions) pos = make_dual(Kind::i32, {a.B, a.T}, *positions, cpu_backend(), gpu);
  const int64_t row = int64_t(a.Hq + 2 * a.Hkv) * a.D, N = int64_t(a.B) * a.T;
  auto qkv = make_dual(Kind::act, {a.B, a.T, row}, r.normal(N * row), cpu_backend(), gpu);
  auto out = make_dual(Kind::act, {a.B, a.T, int64_t(a.Hq) * a.D}, std::vector<float>(N * a.Hq * a.D, 9.f),
                       cpu_backend(), gpu);
  auto lse =
      make_dual(Kind::f32, {a.B, a.Hq, a.T}, std::vector<float>(size_t(a.B) * a.Hq * a.T, 9.f), cpu_backend(), gpu);
  cpu_backend().attention_fwd({.out = out.c,
                               .lse = lse.c,
                               .qkv = qkv.c,
                               .positions = pos.c,
                               .shape = {.B = a.B, .T = a.T, .Hq = a.Hq, .Hkv = a.Hkv, .D = a.D}});
  gpu.attention_fwd({.out = out.g, .lse = lse.g, .qkv = qkv.g, .positions = pos.g, .shape = shape});
  CHECK_CLOSE(out, kBf16Tol);
  CHECK_CLOSE(lse, 1e-3);
  // Backward from the GPU's own forward results on both sides (bf16-rounded out), so the two
  // backward passes see identical inputs.
  std::vector<float> out_g = read(gpu, out.g), lse_g = read(gpu, lse.g);
  auto out2 = make_dual(Kind::act, {a.B, a.T, int64_t(a.Hq) * a.D}, out_g, cpu_backend(), gpu);
  auto lse2 = make_dual(Kind::f32, {a.B, a.Hq, a.T}, lse_g, cpu_backend(), gpu);
  auto dout = make_dual(Kind::act, {a.B, a.T, int64_t(a.Hq) * a.D}, r.normal(N * a.Hq * a.D), cpu_backend(), gpu);
  auto dqkv = make_dual(Kind::act, {a.B, a.T, row}, std::vector<float>(N * row, 9.f), cpu_backend(), gpu);
  cpu_backend().attention_bwd({.dqkv = dqkv.c,
                               .dout = dout.c,
                               .qkv = qkv.c,
                               .out = out2.c,
                               .lse = lse2.c,
                               .positions = pos.c,
                               .shape = {.B = a.B, .T = a.T, .Hq = a.Hq, .Hkv = a.Hkv, .D = a.D}});
  gpu.attention_bwd(
      {.dqkv = dqkv.g, .dout = dout.g, .qkv = qkv.g, .out = out2.g, .lse = lse2.g, .positions = pos.g, .shape = shape});
  CHECK_CLOSE(dqkv, 2e-2);
}

// Per-sample positions of B rows of T tokens cut into samples of pseudo-random lengths (1..max_len,
// some longer than 32 so that samples span several key blocks), each row ending in padding.
std::vector<float> random_packing(int B, int T, int max_len, uint32_t seed) {
  std::vector<float> pos;
  uint32_t st = seed;
  for (int b = 0; b < B; ++b) {
    int used = 0;
    const int fill = T - T / 8;  // the last eighth (at least) is padding
    while (used < fill) {
      st = st * 1664525u + 1013904223u;
      const int len = std::min(1 + int((st >> 8) % uint32_t(max_len)), fill - used);
      for (int t = 0; t < len; ++t) pos.push_back(float(t));
      used += len;
    }
    for (; used < T; ++used) pos.push_back(0.f);
  }
  return pos;
}

const AttnCase kAttnCases[] = {
    {2, 128, 8, 2, 64}, {1, 77, 4, 4, 32}, {2, 256, 4, 1, 128}, {1, 1024, 16, 16, 64}, {3, 33, 6, 3, 64}};

}  // namespace

TEST_CASE("cuda attention (default path: cuDNN when available) vs CPU, GQA" * doctest::skip(!has_gpu())) {
  for (const auto& a : kAttnCases) {
    CAPTURE(a.B);
    CAPTURE(a.T);
    CAPTURE(a.Hq);
    CAPTURE(a.Hkv);
    CAPTURE(a.D);
    check_attention(gpu_backend(), a, uint32_t(a.T * 7 + a.D));
  }
#ifdef RECIPE_WITH_CUDA
  auto& cb = dynamic_cast<cuda::CudaBackend&>(gpu_backend());
  MESSAGE("attention calls: cuDNN " << cb.cudnn_attention_calls() << ", own kernels " << cb.fallback_attention_calls()
                                    << " (cuDNN enabled: " << cb.cudnn_attention_enabled() << ")");
#ifdef RECIPE_WITH_CUDNN
  CHECK(cb.cudnn_attention_calls() > 0);
#endif
#endif
}

TEST_CASE("cuda attention own kernels vs CPU, GQA" * doctest::skip(!has_gpu())) {
  for (const auto& a : kAttnCases) {
    CAPTURE(a.B);
    CAPTURE(a.T);
    CAPTURE(a.Hq);
    CAPTURE(a.Hkv);
    CAPTURE(a.D);
    check_attention(fallback_backend(), a, uint32_t(a.T * 13 + a.D));
  }
#ifdef RECIPE_WITH_CUDA
  auto& cb = dynamic_cast<cuda::CudaBackend&>(fallback_backend());
  CHECK(cb.cudnn_attention_calls() == 0);
  CHECK(cb.fallback_attention_calls() > 0);
#endif
}

// The most samples one row of positions holds.
int max_samples_per_row(const std::vector<float>& pos, int B, int T) {
  int most = 0;
  for (int b = 0; b < B; ++b)
    most = std::max(most, int(std::count(pos.begin() + int64_t(b) * T, pos.begin() + int64_t(b + 1) * T, 0.f)));
  return most;
}

TEST_CASE("cuda packed attention (per-sample positions) vs CPU: cuDNN ragged, deterministic, own kernels" *
          doctest::skip(!has_gpu())) {
  for (const auto& a : kAttnCases) {
    CAPTURE(a.B);
    CAPTURE(a.T);
    CAPTURE(a.Hq);
    CAPTURE(a.Hkv);
    CAPTURE(a.D);
    const auto pos = random_packing(a.B, a.T, std::max(2, a.T / 3), uint32_t(a.T + a.D));
    const int most = max_samples_per_row(pos, a.B, a.T);
    // A fresh default backend, so its kernel paths say what these calls ran: cuDNN, ragged.
    std::unique_ptr<Backend> ragged = make_cuda_backend(recipe::kernels::testing::cuda_options());
    check_attention(*ragged, a, uint32_t(a.T * 5 + a.D), &pos, most);
#ifdef RECIPE_WITH_CUDNN
    CHECK(ragged->kernel_paths().attention == "cudnn");
#endif
    // Slots beyond the rows' samples (length 0) change nothing.
    check_attention(*ragged, a, uint32_t(a.T * 7 + a.D), &pos, most + 3);
    check_attention(deterministic_backend(), a, uint32_t(a.T * 3 + a.D), &pos, most);
    // No bound on samples per row: the own kernels, as on the fallback backend.
    check_attention(gpu_backend(), a, uint32_t(a.T * 13 + a.D), &pos);
    check_attention(fallback_backend(), a, uint32_t(a.T * 11 + a.D), &pos, most);
  }
}

TEST_CASE("cuda rope with per-sample positions vs CPU (table and scalar kernels)" * doctest::skip(!has_gpu())) {
  for (const AttnCase a : {AttnCase{2, 96, 8, 2, 64}, AttnCase{1, 50, 4, 4, 12}}) {
    CAPTURE(a.D);
    Rng r(uint32_t(a.D));
    const int64_t row = int64_t(a.Hq + 2 * a.Hkv) * a.D, N = int64_t(a.B) * a.T;
    auto qkv = make_dual(Kind::act, {a.B, a.T, row}, r.normal(N * row), cpu_backend(), gpu_backend());
    auto pos = make_dual(Kind::i32, {a.B, a.T}, random_packing(a.B, a.T, 40, 3), cpu_backend(), gpu_backend());
    const AttentionShape shape{.B = a.B, .T = a.T, .Hq = a.Hq, .Hkv = a.Hkv, .D = a.D};
    const Dual f1 = rope_freqs(10000.f, a.D), f2 = rope_freqs(500000.f, a.D);
    cpu_backend().rope_fwd({.qkv = qkv.c, .positions = pos.c, .shape = shape, .inv_freq = f1.c});
    gpu_backend().rope_fwd({.qkv = qkv.g, .positions = pos.g, .shape = shape, .inv_freq = f1.g});
    CHECK_CLOSE(qkv, kBf16Tol);
    cpu_backend().rope_bwd({.qkv = qkv.c, .positions = pos.c, .shape = shape, .inv_freq = f2.c});
    gpu_backend().rope_bwd({.qkv = qkv.g, .positions = pos.g, .shape = shape, .inv_freq = f2.g});
    CHECK_CLOSE(qkv, 2 * kBf16Tol);
  }
}

TEST_CASE("cuda attention backward is bitwise repeatable in deterministic mode" * doctest::skip(!has_gpu())) {
  for (Backend* gpu : {&deterministic_backend(), &fallback_backend()}) {
    const int B = 2, T = 512, Hq = 8, Hkv = 4, D = 64;
    const int64_t row = int64_t(Hq + 2 * Hkv) * D, N = int64_t(B) * T;
    Rng r(77);
    auto qkv = make_dual(Kind::act, {B, T, row}, r.normal(N * row), cpu_backend(), *gpu);
    auto out = make_dual(Kind::act, {B, T, int64_t(Hq) * D}, std::vector<float>(N * Hq * D, 0.f), cpu_backend(), *gpu);
    auto lse = make_dual(Kind::f32, {B, Hq, T}, std::vector<float>(size_t(B) * Hq * T, 0.f), cpu_backend(), *gpu);
    auto dout = make_dual(Kind::act, {B, T, int64_t(Hq) * D}, r.normal(N * Hq * D), cpu_backend(), *gpu);
    auto dqkv = make_dual(Kind::act, {B, T, row}, std::vector<float>(N * row, 0.f), cpu_backend(), *gpu);
    gpu->attention_fwd(
        {.out = out.g, .lse = lse.g, .qkv = qkv.g, .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}});
    gpu->attention_bwd({.dqkv = dqkv.g,
                        .dout = dout.g,
                        .qkv = qkv.g,
                        .out = out.g,
                        .lse = lse.g,
                        .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}});
    auto first = read_bytes(*gpu, dqkv.g);
    for (int rep = 0; rep < 3; ++rep) {
      gpu->zero(dqkv.g);
      gpu->attention_bwd({.dqkv = dqkv.g,
                          .dout = dout.g,
                          .qkv = qkv.g,
                          .out = out.g,
                          .lse = lse.g,
                          .shape = {.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D}});
      CHECK(read_bytes(*gpu, dqkv.g) == first);
    }
  }
}

TEST_CASE("cuda embedding forward/backward, sharded vocab, deterministic dwte" * doctest::skip(!has_gpu())) {
  const int B = 4, T = 64, C = 96, V = 50, vocab_start = 10, rows = 30;  // shard holds tokens 10..39
  const int64_t N = int64_t(B) * T;
  Rng r(21);
  auto tokens = make_dual(Kind::i32, {N}, r.uniform_int(N, 0, V - 1));  // many repeats, some out of shard
  auto wte = make_dual(Kind::act, {rows, C}, r.normal(size_t(rows) * C));
  auto wpe = make_dual(Kind::act, {T, C}, r.normal(size_t(T) * C));
  auto out = make_dual(Kind::act, {N, C}, std::vector<float>(N * C, 4.f));
  cpu_backend().embedding_fwd(
      {.out = out.c, .tokens = tokens.c, .wte = wte.c, .wpe = wpe.c, .T = T, .vocab_start = vocab_start});
  gpu_backend().embedding_fwd(
      {.out = out.g, .tokens = tokens.g, .wte = wte.g, .wpe = wpe.g, .T = T, .vocab_start = vocab_start});
  CHECK_CLOSE(out, kBf16Tol);

  auto dout = make_dual(Kind::act, {N, C}, r.normal(N * C));
  std::vector<float> dwte0 = r.normal(size_t(rows) * C), dwpe0 = r.normal(size_t(T) * C);
  auto dwte = make_dual(Kind::f32, {rows, C}, dwte0);
  auto dwpe = make_dual(Kind::f32, {T, C}, dwpe0);
  cpu_backend().embedding_bwd(
      {.dwte = dwte.c, .dwpe = dwpe.c, .dout = dout.c, .tokens = tokens.c, .T = T, .vocab_start = vocab_start});
  gpu_backend().embedding_bwd(
      {.dwte = dwte.g, .dwpe = dwpe.g, .dout = dout.g, .tokens = tokens.g, .T = T, .vocab_start = vocab_start});
  CHECK_CLOSE(dwte, 1e-5);
  CHECK_CLOSE(dwpe, 1e-5);
  auto first = read_bytes(gpu_backend(), dwte.g);
  for (int rep = 0; rep < 3; ++rep) {
    gpu_backend().from_host(dwte.g, dwte0.data());
    gpu_backend().embedding_bwd(
        {.dwte = dwte.g, .dout = dout.g, .tokens = tokens.g, .T = T, .vocab_start = vocab_start});
    CHECK(read_bytes(gpu_backend(), dwte.g) == first);
  }
}

TEST_CASE("cuda cross-entropy: padding columns, ignored targets, in-place dlogits" * doctest::skip(!has_gpu())) {
  for (int64_t Vp : {1000, 50304, 77}) {
    CAPTURE(Vp);
    const int64_t N = 37;
    const int vocab = int(Vp) - 3;
    Rng r{uint32_t(Vp)};
    std::vector<float> tg = r.uniform_int(N, 0, vocab - 1);
    tg[3] = -1;
    tg[10] = -100;
    auto targets = make_dual(Kind::i32, {N}, tg);
    auto logits = make_dual(Kind::act, {N, Vp}, r.normal(N * Vp, 3.f));
    auto losses = make_dual(Kind::f32, {N}, std::vector<float>(N, 5.f));
    cpu_backend().cross_entropy(losses.c, logits.c, targets.c, vocab, Tensor(), false);
    gpu_backend().cross_entropy(losses.g, logits.g, targets.g, vocab, Tensor(), false);
    CHECK_CLOSE(losses, 1e-3);
    const float dloss = 1.f / float(N);
    auto dlosses = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), dloss));
    cpu_backend().cross_entropy(losses.c, logits.c, targets.c, vocab, dlosses.c, true);
    gpu_backend().cross_entropy(losses.g, logits.g, targets.g, vocab, dlosses.g, true);
    CHECK_CLOSE(losses, 1e-3);
    CHECK_CLOSE(logits, kBf16Tol);
    auto lg = read(gpu_backend(), logits.g);
    auto ls = read(gpu_backend(), losses.g);
    CHECK(ls[3] == 0.f);
    double pad = 0, ignored = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = vocab; j < Vp; ++j) pad += std::abs(lg[n * Vp + j]);
    for (int64_t j = 0; j < Vp; ++j) ignored += std::abs(lg[3 * Vp + j]) + std::abs(lg[10 * Vp + j]);
    CHECK(pad == 0.0);
    CHECK(ignored == 0.0);
  }
}

TEST_CASE("cuda adamw with bias correction, grad scale and the bf16 compute copy" * doctest::skip(!has_gpu())) {
  const int64_t n = 100003;
  Rng r(3);
  auto master = make_dual(Kind::f32, {n}, r.normal(n));
  auto grad = make_dual(Kind::f32, {n}, r.normal(n, 0.1f));
  auto m = make_dual(Kind::f32, {n}, r.normal(n, 0.01f));
  auto v = make_dual(Kind::f32, {n}, [&] {
    auto x = r.normal(n, 0.001f);
    for (auto& e : x) e = e * e;
    return x;
  }());
  auto copy = make_dual(Kind::act, {n}, std::vector<float>(n, 0.f));
  for (int step = 1; step <= 3; ++step) {
    AdamWArgs a{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f};
    cpu_backend().adamw(master.c, grad.c, m.c, v.c, copy.c, a);
    gpu_backend().adamw(master.g, grad.g, m.g, v.g, copy.g, a);
  }
  CHECK_CLOSE(master, 1e-6);
  CHECK_CLOSE(m, 1e-5);
  CHECK_CLOSE(v, 1e-5);
  CHECK_CLOSE(copy, kBf16Tol);
}

TEST_CASE("cuda sum_squares matches the CPU and is bitwise repeatable" * doctest::skip(!has_gpu())) {
  for (int64_t n : {1, 1000, 3 * 1000 * 1000 + 7}) {
    CAPTURE(n);
    Rng r{uint32_t(n)};
    auto x = make_dual(Kind::f32, {n}, r.normal(n));
    double c = cpu_backend().sum_squares(x.c), g = gpu_backend().sum_squares(x.g);
    CHECK(std::abs(g - c) <= 1e-9 * std::abs(c));
    for (int rep = 0; rep < 3; ++rep) {
      double g2 = gpu_backend().sum_squares(x.g);
      CHECK(std::bit_cast<uint64_t>(g) == std::bit_cast<uint64_t>(g2));  // the same bits
    }
  }
}

TEST_CASE("cuda memory: zero-filled alloc, copy, zero, peak tracking" * doctest::skip(!has_gpu())) {
  Backend& g = gpu_backend();
  size_t before = g.peak_memory_bytes();
  Tensor t = alloc_on(g, DType::f32, {1 << 20});
  CHECK(g.peak_memory_bytes() >= before);
  CHECK(g.peak_memory_bytes() >= size_t(4) << 20);
  auto zeros = read(g, t);
  bool all_zero = true;
  for (float x : zeros) all_zero = all_zero && x == 0.f;
  CHECK(all_zero);
  Rng r(1);
  auto vals = r.normal(1 << 20);
  g.from_host(t, vals.data());
  Tensor u = alloc_on(g, DType::f32, {1 << 20});
  g.copy(u, t);
  CHECK(read(g, u) == vals);
  g.zero(u);
  CHECK(read(g, u)[12345] == 0.f);
  g.free(t.ptr);
  g.free(u.ptr);
}

TEST_SUITE_END();
