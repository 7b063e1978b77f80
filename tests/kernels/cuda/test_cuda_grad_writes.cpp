// Backend::begin_grad_writes / end_grad_writes on the GPU: no memset, each gradient's first write
// overwrites. Stale values (a previous step's gradients) must not leak into the result, later
// micro-batches must accumulate, a gradient no op wrote must read zero, and memory between the
// gradients must stay untouched. The CPU backend (the default: zero, then accumulate) is the
// reference.
#include <utility>

#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

TEST_CASE("cuda grad writes: first write overwrites stale gradients, micro-batches accumulate" *
          doctest::skip(!has_gpu())) {
  const int64_t N = 512, C = 256, OC = 384, V = 50, T = 64, P = 2 * T;
  Rng r{2024};
  auto x = make_dual(Kind::act, {N, C}, r.normal(N * C));
  auto w = make_dual(Kind::act, {OC, C}, r.normal(OC * C, 0.1f));
  auto dout = make_dual(Kind::act, {N, OC}, r.normal(N * OC));
  auto ln_w = make_dual(Kind::act, {C}, r.normal(C, 0.2f, 1.f));
  auto ln_b = make_dual(Kind::act, {C}, r.normal(C, 0.2f));
  auto ln_dout = make_dual(Kind::act, {N, C}, r.normal(N * C));
  auto tokens = make_dual(Kind::i32, {N}, r.uniform_int(N, 0, int(V) - 1));
  auto ln_out = make_dual(Kind::act, {N, C}, std::vector<float>(N * C, 0.f));
  auto mean = make_dual(Kind::f32, {N}, std::vector<float>(N, 0.f));
  auto rstd = make_dual(Kind::f32, {N}, std::vector<float>(N, 0.f));
  cpu_backend().layernorm_fwd(
      {.out = ln_out.c, .mean = mean.c, .rstd = rstd.c, .inp = x.c, .weight = ln_w.c, .bias = ln_b.c, .eps = 1e-5f});
  gpu_backend().layernorm_fwd(
      {.out = ln_out.g, .mean = mean.g, .rstd = rstd.g, .inp = x.g, .weight = ln_w.g, .bias = ln_b.g, .eps = 1e-5f});

  // One flat f32 buffer of "stale" values, like the trainer's gradient buffer: the gradients at
  // these offsets, with gaps between some of them that no op may touch.
  const std::pair<int64_t, int64_t> dw{0, OC * C}, db{dw.second, OC}, gap{db.first + OC, 8}, lnw{gap.first + 8, C},
      lnb{lnw.first + C, C}, dsum{lnb.first + C, C}, unused{dsum.first + C, 40}, wte{unused.first + 40 + 4, V * C},
      wpe{wte.first + V * C, P * C};
  const int64_t total = wpe.first + wpe.second;
  auto grads = make_dual(Kind::f32, {total}, r.normal(total, 3.f));
  const auto stale = read(cpu_backend(), grads.c);

  auto run = [&](Backend& be, Tensor flat, Tensor xi, Tensor wi, Tensor douti, Tensor lnwi, Tensor lnbi,
                 Tensor ln_douti, Tensor meani, Tensor rstdi, Tensor tok, Tensor dinp) {
    auto at = [&](std::pair<int64_t, int64_t> s) { return flat.rows(s.first, s.second); };
    be.begin_grad_writes({at(dw), at(db), at(lnw), at(lnb), at(dsum), at(unused), at(wte), at(wpe)});
    for (int micro = 0; micro < 2; ++micro) {
      be.linear_bwd({.dweight = at(dw).view({OC, C}), .dbias = at(db), .dout = douti, .inp = xi, .weight = wi});
      be.layernorm_bwd({.dinp = dinp,
                        .dweight = at(lnw),
                        .dbias = at(lnb),
                        .dout = ln_douti,
                        .inp = xi,
                        .weight = lnwi,
                        .mean = meani,
                        .rstd = rstdi,
                        .dinp_sum = at(dsum)});
      be.embedding_bwd({.dwte = at(wte).view({V, C}),
                        .dwpe = at(wpe).view({P, C}),
                        .dout = ln_douti,
                        .tokens = tok,
                        .T = int(T),
                        .vocab_start = 0});
    }
    be.end_grad_writes();
  };
  auto dinp = make_dual(Kind::act, {N, C}, r.normal(N * C));
  run(cpu_backend(), grads.c, x.c, w.c, dout.c, ln_w.c, ln_b.c, ln_dout.c, mean.c, rstd.c, tokens.c, dinp.c);
  run(gpu_backend(), grads.g, x.g, w.g, dout.g, ln_w.g, ln_b.g, ln_dout.g, mean.g, rstd.g, tokens.g, dinp.g);

  const auto g = read(gpu_backend(), grads.g), c = read(cpu_backend(), grads.c);
  auto rel = [&](std::pair<int64_t, int64_t> s) {
    double num = 0, den = 0;
    for (int64_t i = s.first; i < s.first + s.second; ++i) {
      num += (double(g[size_t(i)]) - c[size_t(i)]) * (double(g[size_t(i)]) - c[size_t(i)]);
      den += double(c[size_t(i)]) * c[size_t(i)];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  };
  CHECK(rel(dw) < 1e-2);
  CHECK(rel(db) < 1e-2);
  CHECK(rel(lnw) < 1e-2);
  CHECK(rel(lnb) < 1e-2);
  CHECK(rel(dsum) < 2e-2);
  CHECK(rel(wte) < 1e-4);
  CHECK(rel(wpe) < 1e-4);
  // Rows T..P-1 of the position table saw no token: zero, not stale.
  for (int64_t i = wpe.first + T * C; i < total; ++i) REQUIRE(g[size_t(i)] == 0.f);
  for (int64_t i = unused.first; i < unused.first + unused.second; ++i) REQUIRE(g[size_t(i)] == 0.f);
  // Gaps keep their bytes.
  for (int64_t i = gap.first; i < gap.first + gap.second; ++i) REQUIRE(g[size_t(i)] == stale[size_t(i)]);
  for (int64_t i = unused.first + 40; i < wte.first; ++i) REQUIRE(g[size_t(i)] == stale[size_t(i)]);
  // Two micro-batches: the weight gradient is twice one micro-batch's (overwrite, then accumulate),
  // so nothing of the stale values is left in it.
  auto once = make_dual(Kind::f32, {OC, C}, std::vector<float>(OC * C, 0.f));
  gpu_backend().linear_bwd({.dweight = once.g, .dout = dout.g, .inp = x.g, .weight = w.g});
  const auto o = read(gpu_backend(), once.g);
  double num = 0, den = 0;
  for (int64_t i = 0; i < OC * C; ++i) {
    num += (double(g[size_t(i)]) - 2.0 * o[size_t(i)]) * (double(g[size_t(i)]) - 2.0 * o[size_t(i)]);
    den += 4.0 * double(o[size_t(i)]) * o[size_t(i)];
  }
  CHECK(std::sqrt(num / den) < 1e-6);
}

TEST_SUITE_END();
