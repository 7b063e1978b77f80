// CPU vocab-parallel cross entropy and sharded embeddings. The logits' columns are split into 1, 2
// and 4 shards (the last ones partly or wholly padding), the three passes run per shard with the
// max / sum over the "TP group" done here between passes, and the losses and the concatenated
// dlogits must equal cross_entropy over the whole rows. Sharded embedding forward (summed over
// shards) and backward (shard gradients concatenated) must equal the unsharded ops.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;
using namespace recipe::kernels::test;

namespace {

struct CeResult {
  std::vector<float> losses;   // [n]
  std::vector<float> dlogits;  // [n, Vp]: the logits after the op (gradient or untouched)
};

// Row-major columns [begin, begin + width) of a [n, cols] matrix.
std::vector<float> columns(const std::vector<float>& m, int64_t n, int64_t cols, int64_t begin, int64_t width) {
  std::vector<float> out(size_t(n * width));
  for (int64_t r = 0; r < n; ++r) std::copy_n(m.begin() + r * cols + begin, width, out.begin() + r * width);
  return out;
}

// Runs the three passes on `shards` equal column shards of logits [n, Vp], reducing between
// passes the way the TP group's all-reduces would (max, then sum in rank order).
CeResult sharded_ce(Backend& be, const std::vector<float>& logits, int64_t n, int64_t Vp, int vocab,
                    std::vector<int32_t> targets, int shards, std::vector<float> row_dloss, bool compute_grad) {
  REQUIRE(Vp % shards == 0);
  const int64_t Vl = Vp / shards;
  std::vector<std::vector<float>> shard(shards);
  std::vector<int> start(shards), valid(shards);
  for (int s = 0; s < shards; ++s) {
    start[s] = int(s * Vl);
    valid[s] = int(std::clamp<int64_t>(vocab - start[s], 0, Vl));
    shard[s] = columns(logits, n, Vp, start[s], Vl);
  }
  const int64_t N = n;
  std::vector<float> rowmax(N, -std::numeric_limits<float>::infinity());
  for (int s = 0; s < shards; ++s) {
    std::vector<float> local(N, 7.0f);
    be.vocab_parallel_ce_max(view(local, {N}), view(shard[s], {N, Vl}), valid[s]);
    for (int64_t r = 0; r < N; ++r) rowmax[r] = std::max(rowmax[r], local[r]);
  }
  std::vector<float> sums(2 * N, 0.0f);
  for (int s = 0; s < shards; ++s) {
    std::vector<float> local(2 * N, 7.0f);
    be.vocab_parallel_ce_sums({.sums = view(local, {2, N}),
                               .logits = view(shard[s], {N, Vl}),
                               .rowmax = view(rowmax, {N}),
                               .targets = view(targets, {N}),
                               .vocab_start = start[s],
                               .valid_cols = valid[s]});
    for (int64_t i = 0; i < 2 * N; ++i) sums[i] += local[i];
  }
  CeResult res{std::vector<float>(N), std::vector<float>(N * Vp)};
  for (int s = 0; s < shards; ++s) {
    std::vector<float> losses(N, 7.0f);
    be.vocab_parallel_ce_finish({.losses = view(losses, {N}),
                                 .logits = view(shard[s], {N, Vl}),
                                 .rowmax = view(rowmax, {N}),
                                 .sums = view(sums, {2, N}),
                                 .targets = view(targets, {N}),
                                 .vocab_start = start[s],
                                 .valid_cols = valid[s],
                                 .dloss = view(row_dloss, {N}),
                                 .compute_grad = compute_grad});
    if (s == 0)
      res.losses = losses;
    else
      CHECK(losses == res.losses);  // every rank computes the same losses
    for (int64_t r = 0; r < N; ++r) std::copy_n(shard[s].begin() + r * Vl, Vl, res.dlogits.begin() + r * Vp + start[s]);
  }
  return res;
}

// max |a − b| / max(1, |b|): losses of a few nats differ by an f32 ulp, which is ~5e-7 absolute.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double(a[i]) - b[i]) / std::max(1.0, std::fabs(double(b[i]))));
  return m;
}

std::vector<int32_t> random_targets(int64_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = dist(rng);
  t[1] = -1;
  t[4] = -100;
  t[2] = vocab - 1;  // the last real column
  t[3] = 0;
  return t;
}

}  // namespace

TEST_CASE("cpu vocab-parallel cross entropy over 1, 2 and 4 shards equals cross_entropy") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 9, Vp = 24;
  constexpr float kDloss = 0.37f;
  // vocab 17: with 4 shards of 6 columns the third shard is part padding and the fourth all padding.
  for (int vocab : {17, 24}) {
    auto logits = randn(N * Vp, uint32_t(vocab), 3.0f);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t v = vocab; v < Vp; ++v) logits[r * Vp + v] = 60.0f;  // padding: must be ignored
    auto targets = random_targets(N, vocab, 5u + uint32_t(vocab));
    for (bool compute_grad : {false, true}) {
      auto ref = logits;
      std::vector<float> ref_losses(N), ref_dloss(N, kDloss);
      be->cross_entropy(view(ref_losses, {N}), view(ref, {N, Vp}), view(targets, {N}), vocab, view(ref_dloss, {N}),
                        compute_grad);
      for (int shards : {1, 2, 4}) {
        CAPTURE(vocab);
        CAPTURE(compute_grad);
        CAPTURE(shards);
        auto got = sharded_ce(*be, logits, N, Vp, vocab, targets, shards, ref_dloss, compute_grad);
        const double tol = shards == 1 ? 2e-7 : 1e-6;
        CHECK(max_rel_diff(got.losses, ref_losses) < tol);
        CHECK(max_abs_diff(got.dlogits, ref) < tol);
        CHECK(got.losses[1] == 0.0f);
        CHECK(got.losses[4] == 0.0f);
        CHECK(got.losses[0] > 0.1f);
        if (compute_grad) {
          for (int64_t v = 0; v < Vp; ++v) CHECK(got.dlogits[1 * Vp + v] == 0.0f);  // ignored row
          for (int64_t r = 0; r < N; ++r)
            for (int64_t v = vocab; v < Vp; ++v) CHECK(got.dlogits[r * Vp + v] == 0.0f);
          // The target column carries the −dloss of the one-hot.
          CHECK(got.dlogits[2 * Vp + vocab - 1] < 0.0f);
        } else {
          CHECK(got.dlogits == logits);  // no gradient requested: logits untouched
        }
      }
    }
  }
}

TEST_CASE("cpu vocab-parallel cross entropy: per-row dloss weights each row as cross_entropy does") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 9, Vp = 24;
  const int vocab = 17;
  auto logits = randn(N * Vp, 11u, 3.0f);
  auto targets = random_targets(N, vocab, 12u);
  std::vector<float> w(N);
  for (int64_t r = 0; r < N; ++r) w[size_t(r)] = 0.25f * float(r) - 0.5f;  // negative, zero and positive weights
  auto ref = logits;
  std::vector<float> ref_losses(N);
  be->cross_entropy(view(ref_losses, {N}), view(ref, {N, Vp}), view(targets, {N}), vocab, view(w, {N}), true);
  for (int shards : {1, 2, 4}) {
    CAPTURE(shards);
    auto got = sharded_ce(*be, logits, N, Vp, vocab, targets, shards, w, true);
    CHECK(max_abs_diff(got.dlogits, ref) < 4e-6);  // weights up to 1.5: the per-shard tolerance above, scaled
    for (int64_t v = 0; v < Vp; ++v) CHECK(got.dlogits[size_t(2 * Vp + v)] == 0.0f);  // weight 0: zero row
  }
}

TEST_CASE("cpu vocab_parallel_ce passes: per-shard max, sums and empty shards") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 2, Vl = 4;
  std::vector<float> z = {1.0f,  5.0f,  2.0f,  99.0f,  //
                          -3.0f, -1.0f, -2.0f, 99.0f};
  std::vector<int32_t> tgt = {11, 8};  // shard holds global columns [10, 14), 3 valid
  std::vector<float> m(N);
  be->vocab_parallel_ce_max(view(m, {N}), view(z, {N, Vl}), 3);
  CHECK(m == std::vector<float>{5.0f, -1.0f});
  std::vector<float> sums(2 * N);
  be->vocab_parallel_ce_sums({.sums = view(sums, {2, N}),
                              .logits = view(z, {N, Vl}),
                              .rowmax = view(m, {N}),
                              .targets = view(tgt, {N}),
                              .vocab_start = 10,
                              .valid_cols = 3});
  CHECK(sums[0] == doctest::Approx(std::exp(-4.0) + 1.0 + std::exp(-3.0)).epsilon(1e-6));
  CHECK(sums[1] == doctest::Approx(std::exp(-2.0) + 1.0 + std::exp(-1.0)).epsilon(1e-6));
  CHECK(sums[2] == 5.0f);  // row 0's target 11 is local column 1
  CHECK(sums[3] == 0.0f);  // row 1's target 8 lives in another shard

  // A shard wholly past the vocabulary: max −inf, sums 0, dlogits 0.
  std::vector<int32_t> low = {0, 3};
  be->vocab_parallel_ce_max(view(m, {N}), view(z, {N, Vl}), 0);
  CHECK(std::isinf(m[0]));
  CHECK(m[0] < 0);
  std::vector<float> global_max = {5.0f, -1.0f};
  be->vocab_parallel_ce_sums({.sums = view(sums, {2, N}),
                              .logits = view(z, {N, Vl}),
                              .rowmax = view(global_max, {N}),
                              .targets = view(low, {N}),
                              .vocab_start = 40,
                              .valid_cols = 0});
  CHECK(sums == std::vector<float>(2 * N, 0.0f));
  std::vector<float> global_sums = {2.0f, 3.0f, 1.0f, 0.5f}, losses(N), ones(N, 1.0f);
  be->vocab_parallel_ce_finish({.losses = view(losses, {N}),
                                .logits = view(z, {N, Vl}),
                                .rowmax = view(global_max, {N}),
                                .sums = view(global_sums, {2, N}),
                                .targets = view(low, {N}),
                                .vocab_start = 40,
                                .valid_cols = 0,
                                .dloss = view(ones, {N}),
                                .compute_grad = true});
  CHECK(losses[0] == doctest::Approx(std::log(2.0) + 5.0 - 1.0).epsilon(1e-6));
  CHECK(losses[1] == doctest::Approx(std::log(3.0) - 1.0 - 0.5).epsilon(1e-6));
  CHECK(z == std::vector<float>(N * Vl, 0.0f));
}

TEST_CASE("cpu vocab_parallel_ce refuses bad shapes, dtypes and out-of-vocab targets") {
  auto be = make_cpu_backend();
  constexpr int64_t N = 3, Vl = 8;
  auto z = randn(N * Vl, 1);
  std::vector<float> m(N, 0.0f), sums(2 * N, 1.0f), losses(N), short_buf(N - 1), ones(N, 1.0f);
  std::vector<int32_t> tgt = {0, 1, 2};
  std::vector<int32_t> zi(N * Vl, 0);
  auto throws = [](auto&& call, const char* what) {
    CHECK_THROWS_WITH_AS(call(), doctest::Contains(what), std::invalid_argument);
  };
  throws(
      [&] {
        be->vocab_parallel_ce_max(view(short_buf, {N - 1}), view(z, {N, Vl}), 4);
      },
      "vocab_parallel_ce_max: logits");
  throws([&] { be->vocab_parallel_ce_max(view(m, {N}), view(z, {N, Vl}), 9); }, "valid_cols=9");
  throws([&] { be->vocab_parallel_ce_max(view(m, {N}), view(z, {N, Vl}), -1); }, "valid_cols=-1");
  throws([&] { be->vocab_parallel_ce_max(view(m, {N}), view(zi, {N, Vl}), 4); }, "logits");
  throws([&] { be->vocab_parallel_ce_max(view(m, {N}), Tensor(), 4); }, "logits is undefined");
  throws(
      [&] {
        be->vocab_parallel_ce_sums({.sums = view(losses, {N}),
                                    .logits = view(z, {N, Vl}),
                                    .rowmax = view(m, {N}),
                                    .targets = view(tgt, {N}),
                                    .vocab_start = 0,
                                    .valid_cols = 8});
      },
      "vocab_parallel_ce_sums: sums");
  throws(
      [&] {
        be->vocab_parallel_ce_sums({.sums = view(sums, {2, N}),
                                    .logits = view(z, {N, Vl}),
                                    .rowmax = view(short_buf, {N - 1}),
                                    .targets = view(tgt, {N}),
                                    .vocab_start = 0,
                                    .valid_cols = 8});
      },
      "rowmax");
  throws(
      [&] {
        be->vocab_parallel_ce_sums({.sums = view(sums, {2, N}),
                                    .logits = view(z, {N, Vl}),
                                    .rowmax = view(m, {N}),
                                    .targets = view(tgt, {N}),
                                    .vocab_start = -8,
                                    .valid_cols = 8});
      },
      "vocab_start=-8");
  // The shard that ends the vocabulary (it has padding) knows the vocab size: target 6 ≥ vocab 6.
  std::vector<int32_t> past = {0, 6, -1};
  throws(
      [&] {
        be->vocab_parallel_ce_sums({.sums = view(sums, {2, N}),
                                    .logits = view(z, {N, Vl}),
                                    .rowmax = view(m, {N}),
                                    .targets = view(past, {N}),
                                    .vocab_start = 0,
                                    .valid_cols = 6});
      },
      "row 1");
  throws(
      [&] {
        be->vocab_parallel_ce_finish({.losses = view(short_buf, {N - 1}),
                                      .logits = view(z, {N, Vl}),
                                      .rowmax = view(m, {N}),
                                      .sums = view(sums, {2, N}),
                                      .targets = view(tgt, {N}),
                                      .vocab_start = 0,
                                      .valid_cols = 8,
                                      .dloss = view(ones, {N}),
                                      .compute_grad = true});
      },
      "vocab_parallel_ce_finish: losses");
  throws(
      [&] {
        be->vocab_parallel_ce_finish({.losses = view(losses, {N}),
                                      .logits = view(z, {N, Vl}),
                                      .rowmax = view(m, {N}),
                                      .sums = view(m, {N}),
                                      .targets = view(tgt, {N}),
                                      .vocab_start = 0,
                                      .valid_cols = 8,
                                      .dloss = view(ones, {N}),
                                      .compute_grad = true});
      },
      "sums");
  CHECK(z == randn(N * Vl, 1));  // failed calls must not have written the logits
}

TEST_CASE("cpu sharded embedding: summed shard outputs and concatenated shard grads equal the full ops") {
  auto be = make_cpu_backend();
  constexpr int B = 3, T = 5, N = B * T, C = 6, kVocab = 13, kPadded = 16, kMaxPos = 7;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(0, kVocab - 1);
  std::vector<int32_t> tok(N);
  for (auto& t : tok) t = dist(rng);
  tok[0] = tok[7] = tok[11] = 12;  // repeats in the last shard
  auto wte = randn(kPadded * C, 31), wpe = randn(kMaxPos * C, 32), dout = randn(N * C, 33);

  std::vector<float> full_out(N * C);
  be->embedding_fwd({.out = view(full_out, {N, C}),
                     .tokens = view(tok, {B, T}),
                     .wte = view(wte, {kPadded, C}),
                     .wpe = view(wpe, {kMaxPos, C}),
                     .T = T,
                     .vocab_start = 0});
  std::vector<float> full_dwte(kPadded * C, 0.0f), full_dwpe(kMaxPos * C, 0.0f);
  be->embedding_bwd({.dwte = view(full_dwte, {kPadded, C}),
                     .dwpe = view(full_dwpe, {kMaxPos, C}),
                     .dout = view(dout, {N, C}),
                     .tokens = view(tok, {N}),
                     .T = T,
                     .vocab_start = 0});

  for (int shards : {1, 2, 4}) {
    CAPTURE(shards);
    const int rows = kPadded / shards;
    std::vector<float> sum_out(N * C, 0.0f), cat_dwte(kPadded * C, 0.0f), dwpe(kMaxPos * C, 0.0f);
    for (int s = 0; s < shards; ++s) {
      std::vector<float> shard_wte(wte.begin() + s * rows * C, wte.begin() + (s + 1) * rows * C);
      std::vector<float> out(N * C, 9.0f), dwte(rows * C, 0.0f);
      // Positions are added (and their gradient taken) by rank 0 only, so the sum counts them once.
      Tensor wpe_t = s == 0 ? view(wpe, {kMaxPos, C}) : Tensor();
      Tensor dwpe_t = s == 0 ? view(dwpe, {kMaxPos, C}) : Tensor();
      be->embedding_fwd({.out = view(out, {N, C}),
                         .tokens = view(tok, {B, T}),
                         .wte = view(shard_wte, {rows, C}),
                         .wpe = wpe_t,
                         .T = T,
                         .vocab_start = s * rows});
      for (int i = 0; i < N * C; ++i) sum_out[i] += out[i];
      be->embedding_bwd({.dwte = view(dwte, {rows, C}),
                         .dwpe = dwpe_t,
                         .dout = view(dout, {N, C}),
                         .tokens = view(tok, {N}),
                         .T = T,
                         .vocab_start = s * rows});
      std::copy(dwte.begin(), dwte.end(), cat_dwte.begin() + s * rows * C);
    }
    CHECK(max_abs_diff(sum_out, full_out) == 0.0);
    CHECK(max_abs_diff(cat_dwte, full_dwte) == 0.0);
    CHECK(max_abs_diff(dwpe, full_dwpe) == 0.0);
  }
  // The last shard's row of token 12 collected three dout rows; the padding rows none.
  for (int c = 0; c < C; ++c) CHECK(full_dwte[12 * C + c] != 0.0f);
  for (int i = kVocab * C; i < kPadded * C; ++i) CHECK(full_dwte[i] == 0.0f);
}

TEST_SUITE_END();
