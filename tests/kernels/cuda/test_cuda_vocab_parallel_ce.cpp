// CUDA vs CPU: vocab-parallel cross entropy pass by pass over 1, 2 and 4 column shards (vectorized
// and scalar row lengths, a shard wholly in the padding), the combined result against
// cross_entropy over the whole rows, out-of-vocab targets turning into NaN, argument checks; and
// sharded embeddings (summed forward, concatenated dwte) against the unsharded CUDA ops.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

namespace {

// Row-major columns [begin, begin + width) of a [n, cols] matrix.
std::vector<float> columns(const std::vector<float>& m, int64_t n, int64_t cols, int64_t begin, int64_t width) {
  std::vector<float> out(size_t(n * width));
  for (int64_t r = 0; r < n; ++r) std::copy_n(m.begin() + r * cols + begin, width, out.begin() + r * width);
  return out;
}

// ‖a − b‖ / ‖b‖ of two host vectors (NaN anywhere gives +inf).
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct CeCase {
  int64_t N, Vp;
  int vocab;
};

}  // namespace

TEST_CASE("cuda vocab-parallel cross entropy matches the CPU pass by pass and cross_entropy overall" *
          doctest::skip(!has_gpu())) {
  Backend& cpu = cpu_backend();
  Backend& gpu = gpu_backend();
  const float dloss = 0.05f;
  // 256 columns split into 256/128/64 take the 8-wide loads; 100 into 100/50/25 the scalar path. With
  // 4 shards the last shard of either case holds padding only.
  for (CeCase cc : {CeCase{37, 256, 150}, CeCase{21, 100, 70}}) {
    const int64_t N = cc.N, Vp = cc.Vp;
    const int vocab = cc.vocab;
    Rng r{uint32_t(vocab)};
    auto full = r.normal(size_t(N * Vp), 3.f);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = vocab; v < Vp; ++v) full[n * Vp + v] = 60.f;  // padding: must be ignored
    auto tg = r.uniform_int(size_t(N), 0, vocab - 1);
    tg[1] = -1;
    tg[2] = float(vocab - 1);
    tg[3] = 0;
    tg[5] = -100;
    auto targets = make_dual(Kind::i32, {N}, tg);
    auto row_dloss = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), dloss));
    for (bool compute_grad : {false, true}) {
      // The reference: cross_entropy over the whole (bf16-rounded) rows on the CPU.
      auto ref = make_dual(Kind::act, {N, Vp}, full);
      auto ref_losses = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 0.f));
      cpu.cross_entropy(ref_losses.c, ref.c, targets.c, vocab, row_dloss.c, compute_grad);
      const auto want_losses = read(cpu, ref_losses.c), want_dlogits = read(cpu, ref.c);
      for (int shards : {1, 2, 4}) {
        CAPTURE(Vp);
        CAPTURE(compute_grad);
        CAPTURE(shards);
        const int64_t Vl = Vp / shards;
        std::vector<Dual> shard;
        std::vector<int> start(shards), valid(shards);
        for (int s = 0; s < shards; ++s) {
          start[s] = int(s * Vl);
          valid[s] = int(std::clamp<int64_t>(vocab - start[s], 0, Vl));
          shard.push_back(make_dual(Kind::act, {N, Vl}, columns(full, N, Vp, start[s], Vl)));
        }
        // Pass 1 and the max over the group, kept separately per backend.
        const float ninf = -std::numeric_limits<float>::infinity();
        std::vector<float> max_c(size_t(N), ninf), max_g(size_t(N), ninf);
        for (int s = 0; s < shards; ++s) {
          auto m = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 7.f));
          cpu.vocab_parallel_ce_max(m.c, shard[s].c, valid[s]);
          gpu.vocab_parallel_ce_max(m.g, shard[s].g, valid[s]);
          auto mc = read(cpu, m.c), mg = read(gpu, m.g);
          CHECK(mc == mg);  // the max of identical bf16 values is exact
          if (valid[s] == 0) CHECK(mg[0] == ninf);
          for (int64_t i = 0; i < N; ++i) max_c[i] = std::max(max_c[i], mc[i]), max_g[i] = std::max(max_g[i], mg[i]);
        }
        auto rowmax = make_dual(Kind::f32, {N}, max_c);
        gpu.from_host(rowmax.g, max_g.data());
        // Pass 2 and the sum over the group.
        std::vector<float> sum_c(size_t(2 * N), 0.f), sum_g(size_t(2 * N), 0.f);
        for (int s = 0; s < shards; ++s) {
          auto sums = make_dual(Kind::f32, {2, N}, std::vector<float>(size_t(2 * N), 7.f));
          cpu.vocab_parallel_ce_sums({.sums = sums.c,
                                      .logits = shard[s].c,
                                      .rowmax = rowmax.c,
                                      .targets = targets.c,
                                      .vocab_start = start[s],
                                      .valid_cols = valid[s]});
          gpu.vocab_parallel_ce_sums({.sums = sums.g,
                                      .logits = shard[s].g,
                                      .rowmax = rowmax.g,
                                      .targets = targets.g,
                                      .vocab_start = start[s],
                                      .valid_cols = valid[s]});
          CHECK_CLOSE(sums, 1e-4);
          auto sc = read(cpu, sums.c), sg = read(gpu, sums.g);
          for (int64_t i = N; i < 2 * N; ++i) CHECK(sg[i] == sc[i]);  // target logits are copied
          for (int64_t i = 0; i < 2 * N; ++i) sum_c[i] += sc[i], sum_g[i] += sg[i];
        }
        auto sums = make_dual(Kind::f32, {2, N}, sum_c);
        gpu.from_host(sums.g, sum_g.data());
        // Pass 3; the shards' dlogits concatenated give the full rows.
        std::vector<float> cat(size_t(N * Vp));
        for (int s = 0; s < shards; ++s) {
          auto losses = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 7.f));
          cpu.vocab_parallel_ce_finish({.losses = losses.c,
                                        .logits = shard[s].c,
                                        .rowmax = rowmax.c,
                                        .sums = sums.c,
                                        .targets = targets.c,
                                        .vocab_start = start[s],
                                        .valid_cols = valid[s],
                                        .dloss = row_dloss.c,
                                        .compute_grad = compute_grad});
          gpu.vocab_parallel_ce_finish({.losses = losses.g,
                                        .logits = shard[s].g,
                                        .rowmax = rowmax.g,
                                        .sums = sums.g,
                                        .targets = targets.g,
                                        .vocab_start = start[s],
                                        .valid_cols = valid[s],
                                        .dloss = row_dloss.g,
                                        .compute_grad = compute_grad});
          CHECK_CLOSE(losses, 1e-4);
          CHECK_CLOSE(shard[s], kBf16Tol);
          auto lg = read(gpu, losses.g);
          INFO("gpu losses vs cross_entropy: " << rel_err(lg, want_losses));
          CHECK(rel_err(lg, want_losses) < 1e-4);
          CHECK(lg[1] == 0.f);
          CHECK(lg[5] == 0.f);
          auto part = read(gpu, shard[s].g);
          for (int64_t n = 0; n < N; ++n) std::copy_n(part.begin() + n * Vl, Vl, cat.begin() + n * Vp + start[s]);
        }
        INFO("gpu dlogits vs cross_entropy: " << rel_err(cat, want_dlogits));
        CHECK(rel_err(cat, want_dlogits) < kBf16Tol);
        if (compute_grad) {
          double pad = 0, ignored = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t v = vocab; v < Vp; ++v) pad += std::abs(cat[n * Vp + v]);
          for (int64_t v = 0; v < Vp; ++v) ignored += std::abs(cat[1 * Vp + v]) + std::abs(cat[5 * Vp + v]);
          CHECK(pad == 0.0);
          CHECK(ignored == 0.0);
          CHECK(cat[2 * Vp + vocab - 1] < 0.f);  // the target column carries −dloss·(1 − p)
        }
      }
    }
  }
}

TEST_CASE("cuda vocab_parallel_ce: out-of-vocab targets give NaN, bad arguments throw" * doctest::skip(!has_gpu())) {
  Backend& gpu = gpu_backend();
  const int64_t N = 3, Vl = 16;
  Rng r(9);
  // This shard holds columns [32, 48) of which 10 are real: the vocabulary is 42 tokens.
  auto logits = make_dual(Kind::act, {N, Vl}, r.normal(size_t(N * Vl)));
  auto targets = make_dual(Kind::i32, {N}, {33, 44, 5});
  auto rowmax = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 0.f));
  auto sums = make_dual(Kind::f32, {2, N}, std::vector<float>(size_t(2 * N), 0.f));
  auto losses = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 0.f));
  auto ones = make_dual(Kind::f32, {N}, std::vector<float>(size_t(N), 1.f));
  gpu.vocab_parallel_ce_max(rowmax.g, logits.g, 10);
  gpu.vocab_parallel_ce_sums({.sums = sums.g,
                              .logits = logits.g,
                              .rowmax = rowmax.g,
                              .targets = targets.g,
                              .vocab_start = 32,
                              .valid_cols = 10});
  auto s = read(gpu, sums.g);
  auto x = read(gpu, logits.g);
  CHECK(s[N + 0] == x[0 * Vl + 1]);  // target 33 = local column 1
  CHECK(std::isnan(s[N + 1]));       // target 44 is past the vocabulary's end (42)
  CHECK(s[N + 2] == 0.f);            // target 5 lives in another shard
  gpu.vocab_parallel_ce_finish({.losses = losses.g,
                                .logits = logits.g,
                                .rowmax = rowmax.g,
                                .sums = sums.g,
                                .targets = targets.g,
                                .vocab_start = 32,
                                .valid_cols = 10,
                                .dloss = ones.g,
                                .compute_grad = false});
  CHECK(std::isnan(read(gpu, losses.g)[1]));

  auto invalid = [](auto&& call, const char* what) {
    CHECK_THROWS_WITH_AS(call(), doctest::Contains(what), std::invalid_argument);
  };
  invalid([&] { gpu.vocab_parallel_ce_max(rowmax.g, logits.g, 17); }, "valid_cols=17");
  invalid([&] { gpu.vocab_parallel_ce_max(sums.g, logits.g, 10); }, "vocab_parallel_ce_max: logits");
  invalid([&] { gpu.vocab_parallel_ce_max(rowmax.g, logits.c, 10); }, "logits");  // host tensor
  invalid(
      [&] {
        gpu.vocab_parallel_ce_sums({.sums = losses.g,
                                    .logits = logits.g,
                                    .rowmax = rowmax.g,
                                    .targets = targets.g,
                                    .vocab_start = 32,
                                    .valid_cols = 10});
      },
      "vocab_parallel_ce_sums: sums");
  invalid(
      [&] {
        gpu.vocab_parallel_ce_sums({.sums = sums.g,
                                    .logits = logits.g,
                                    .rowmax = rowmax.g,
                                    .targets = targets.g,
                                    .vocab_start = -1,
                                    .valid_cols = 10});
      },
      "vocab_start=-1");
  invalid(
      [&] {
        gpu.vocab_parallel_ce_finish({.losses = losses.g,
                                      .logits = logits.g,
                                      .rowmax = rowmax.g,
                                      .sums = rowmax.g,
                                      .targets = targets.g,
                                      .vocab_start = 32,
                                      .valid_cols = 10,
                                      .dloss = ones.g,
                                      .compute_grad = true});
      },
      "vocab_parallel_ce_finish: sums");
  invalid(
      [&] {
        gpu.vocab_parallel_ce_finish({.losses = losses.g,
                                      .logits = logits.g,
                                      .rowmax = rowmax.g,
                                      .sums = sums.g,
                                      .targets = logits.g,
                                      .vocab_start = 32,
                                      .valid_cols = 10,
                                      .dloss = ones.g,
                                      .compute_grad = true});
      },
      "targets");
}

TEST_CASE("cuda sharded embedding: summed shard outputs and concatenated dwte equal the full ops" *
          doctest::skip(!has_gpu())) {
  Backend& gpu = gpu_backend();
  const int B = 3, T = 32, C = 40, V = 61, Vp = 64;
  const int64_t N = int64_t(B) * T;
  Rng r(41);
  auto tok = r.uniform_int(size_t(N), 0, V - 1);
  tok[0] = tok[17] = tok[50] = float(V - 1);  // repeats in the last shard
  auto tokens = make_dual(Kind::i32, {N}, tok);
  auto wte_full = r.normal(size_t(Vp) * C);
  auto wte = make_dual(Kind::act, {Vp, C}, wte_full);
  auto wpe = make_dual(Kind::act, {T, C}, r.normal(size_t(T) * C));
  auto dout = make_dual(Kind::act, {N, C}, r.normal(size_t(N) * C));

  auto out = make_dual(Kind::act, {N, C}, std::vector<float>(size_t(N) * C, 0.f));
  auto out_nopos = make_dual(Kind::act, {N, C}, std::vector<float>(size_t(N) * C, 0.f));
  gpu.embedding_fwd({.out = out.g, .tokens = tokens.g, .wte = wte.g, .wpe = wpe.g, .T = T, .vocab_start = 0});
  gpu.embedding_fwd({.out = out_nopos.g, .tokens = tokens.g, .wte = wte.g, .T = T, .vocab_start = 0});
  auto dwte = make_dual(Kind::f32, {Vp, C}, std::vector<float>(size_t(Vp) * C, 0.f));
  auto dwpe = make_dual(Kind::f32, {T, C}, std::vector<float>(size_t(T) * C, 0.f));
  gpu.embedding_bwd({.dwte = dwte.g, .dwpe = dwpe.g, .dout = dout.g, .tokens = tokens.g, .T = T, .vocab_start = 0});
  cpu_backend().embedding_bwd(
      {.dwte = dwte.c, .dwpe = dwpe.c, .dout = dout.c, .tokens = tokens.c, .T = T, .vocab_start = 0});
  CHECK_CLOSE(dwte, 1e-5);
  const auto full_out = read(gpu, out.g), full_nopos = read(gpu, out_nopos.g);
  const auto full_dwte = read(gpu, dwte.g), full_dwpe = read(gpu, dwpe.g);

  for (int shards : {1, 2, 4}) {
    CAPTURE(shards);
    const int rows = Vp / shards;
    std::vector<float> sum_out(size_t(N) * C, 0.f), sum_nopos(size_t(N) * C, 0.f), cat_dwte(size_t(Vp) * C, 0.f);
    std::vector<float> shard_dwpe;
    for (int s = 0; s < shards; ++s) {
      auto w = make_dual(
          Kind::act, {rows, C},
          std::vector<float>(wte_full.begin() + int64_t(s) * rows * C, wte_full.begin() + int64_t(s + 1) * rows * C));
      auto o = make_dual(Kind::act, {N, C}, std::vector<float>(size_t(N) * C, 9.f));
      // Positions are added (and their gradient taken) by rank 0 only, so the sum counts them once.
      gpu.embedding_fwd({.out = o.g,
                         .tokens = tokens.g,
                         .wte = w.g,
                         .wpe = s == 0 ? wpe.g : Tensor(),
                         .T = T,
                         .vocab_start = s * rows});
      auto part = read(gpu, o.g);
      for (size_t i = 0; i < part.size(); ++i) sum_out[i] += part[i];
      gpu.embedding_fwd({.out = o.g, .tokens = tokens.g, .wte = w.g, .T = T, .vocab_start = s * rows});
      part = read(gpu, o.g);
      for (size_t i = 0; i < part.size(); ++i) sum_nopos[i] += part[i];
      auto dw = make_dual(Kind::f32, {rows, C}, std::vector<float>(size_t(rows) * C, 0.f));
      auto dp = make_dual(Kind::f32, {T, C}, std::vector<float>(size_t(T) * C, 0.f));
      gpu.embedding_bwd({.dwte = dw.g,
                         .dwpe = s == 0 ? dp.g : Tensor(),
                         .dout = dout.g,
                         .tokens = tokens.g,
                         .T = T,
                         .vocab_start = s * rows});
      auto g = read(gpu, dw.g);
      std::copy(g.begin(), g.end(), cat_dwte.begin() + int64_t(s) * rows * C);
      if (s == 0) shard_dwpe = read(gpu, dp.g);
    }
    // Without positions each token's row comes from exactly one shard, the others add exact zeros.
    CHECK(sum_nopos == full_nopos);
    // With positions rank 0 rounds wte + wpe to bf16 only for its own tokens: bf16 tolerance.
    INFO("summed forward vs full: " << rel_err(sum_out, full_out));
    CHECK(rel_err(sum_out, full_out) < kBf16Tol);
    // Each shard sums a token's rows in the same (sorted, stable) order as the full op: bitwise equal.
    CHECK(cat_dwte == full_dwte);
    CHECK(shard_dwpe == full_dwpe);
  }
  for (int64_t i = int64_t(V) * C; i < int64_t(Vp) * C; ++i) CHECK(full_dwte[i] == 0.f);  // padding rows
}

TEST_SUITE_END();
