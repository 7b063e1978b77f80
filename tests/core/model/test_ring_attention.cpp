// Ring attention (context parallelism) on one process: the sample cut into 2·cp chunks, each CP
// rank's two chunks run through the blocks of ring_block against the K/V of the rank each ring step
// brings, merged by log-sum-exp, equal the full causal attention of the whole sample — forward (out,
// lse) and backward (dq, and dK/dV summed over the blocks that read them) within 1e-5, for
// cp = 1..4, MHA and GQA (ratios 1, 2, 4; B up to 2). The diagonal block alone is the plain op bit for bit. The MPI training
// parity (tests/core/parallel/test_context_parallel.cpp) covers the ring's communication.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/model/ring_attention.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe::kernels;
using namespace recipe::kernels::test;
using recipe::core::cp_global_position;
using recipe::core::ring_block;
using recipe::core::RingBlock;

namespace {

struct Case {
  int B, T, Hq, Hkv, D;
};

// Rows of a [B, T, width] tensor at the global positions of CP rank r's local rows.
std::vector<float> local_rows(const std::vector<float>& full, int B, int T, int64_t width, int cp, int r) {
  const int Tl = T / cp;
  std::vector<float> out(size_t(B) * size_t(Tl) * size_t(width));
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      const int64_t g = cp_global_position(cp, r, t, Tl);
      std::copy_n(full.begin() + (int64_t(b) * T + g) * width, width, out.begin() + (int64_t(b) * Tl + t) * width);
    }
  return out;
}

// The largest |local − full| over rank r's rows ([B, Tl, width] against [B, T, width]).
double worst_rows(const std::vector<float>& local, const std::vector<float>& full, int B, int T, int64_t width, int cp,
                  int r) {
  return max_abs_diff(local, local_rows(full, B, T, width, cp, r));
}

// lse is [B, H, T]: the same comparison with positions on the last axis.
double worst_lse(const std::vector<float>& local, const std::vector<float>& full, int B, int H, int T, int cp, int r) {
  const int Tl = T / cp;
  double worst = 0;
  for (int bh = 0; bh < B * H; ++bh)
    for (int t = 0; t < Tl; ++t)
      worst = std::max(worst, std::fabs(double(local[size_t(bh) * Tl + t]) -
                                        full[size_t(bh) * T + size_t(cp_global_position(cp, r, t, Tl))]));
  return worst;
}

void check_ring(const Case& c, int cp) {
  CAPTURE(cp);
  CAPTURE(c.Hkv);
  auto be = make_cpu_backend();
  const int B = c.B, T = c.T, Tl = T / cp;
  const int64_t row = int64_t(c.Hq + 2 * c.Hkv) * c.D, orow = int64_t(c.Hq) * c.D;
  std::vector<float> qkv = randn(size_t(B) * T * row, 11), dout = randn(size_t(B) * T * orow, 12);
  std::vector<float> out(size_t(B) * T * orow), lse(size_t(B) * c.Hq * T), dqkv(qkv.size());
  const AttentionShape full{.B = B, .T = T, .Hq = c.Hq, .Hkv = c.Hkv, .D = c.D};
  be->attention_fwd(
      {.out = view(out, {B, T, orow}), .lse = view(lse, {B, c.Hq, T}), .qkv = view(qkv, {B, T, row}), .shape = full});
  be->attention_bwd({.dqkv = view(dqkv, {B, T, row}),
                     .dout = view(dout, {B, T, orow}),
                     .qkv = view(qkv, {B, T, row}),
                     .out = view(out, {B, T, orow}),
                     .lse = view(lse, {B, c.Hq, T}),
                     .shape = full});

  const AttentionShape local{.B = B, .T = Tl, .Hq = c.Hq, .Hkv = c.Hkv, .D = c.D};
  const size_t ranks = size_t(cp);
  std::vector<std::vector<float>> lq(ranks), lo(ranks), ll(ranks), ld(ranks), ldq(ranks), ldkv(ranks);
  for (int r = 0; r < cp; ++r) {
    lq[size_t(r)] = local_rows(qkv, B, T, row, cp, r);
    ld[size_t(r)] = local_rows(dout, B, T, orow, cp, r);
    lo[size_t(r)].assign(size_t(B) * Tl * orow, 0.f);
    ll[size_t(r)].assign(size_t(B) * c.Hq * Tl, 0.f);
    ldq[size_t(r)].assign(lq[size_t(r)].size(), 0.f);
    ldkv[size_t(r)].assign(lq[size_t(r)].size(), 0.f);
  }
  auto T3 = [&](std::vector<float>& v, int64_t w) { return view(v, {B, Tl, w}); };
  // Forward: rank r at ring step i holds the K/V of rank (r − i) mod cp.
  for (int r = 0; r < cp; ++r)
    for (int i = 0; i < cp; ++i) {
      const int s = ((r - i) % cp + cp) % cp;
      const RingBlock k = ring_block(cp, r, i, Tl);
      be->attention_block_fwd({.out = T3(lo[size_t(r)], orow),
                               .lse = view(ll[size_t(r)], {B, c.Hq, Tl}),
                               .qkv = T3(lq[size_t(r)], row),
                               .kv = T3(lq[size_t(s)], row),
                               .shape = local,
                               .q_begin = k.q_begin,
                               .q_len = k.q_len,
                               .k_begin = k.k_begin,
                               .k_len = k.k_len,
                               .causal = k.causal,
                               .merge = i > 0});
    }
  // Backward from the merged out and lse: dq stays with its rank, dK/dV goes to the K/V's owner.
  for (int r = 0; r < cp; ++r)
    for (int i = 0; i < cp; ++i) {
      const int s = ((r - i) % cp + cp) % cp;
      const RingBlock k = ring_block(cp, r, i, Tl);
      be->attention_block_bwd({.dq = T3(ldq[size_t(r)], row),
                               .dkv = T3(ldkv[size_t(s)], row),
                               .dout = T3(ld[size_t(r)], orow),
                               .qkv = T3(lq[size_t(r)], row),
                               .kv = T3(lq[size_t(s)], row),
                               .out = T3(lo[size_t(r)], orow),
                               .lse = view(ll[size_t(r)], {B, c.Hq, Tl}),
                               .shape = local,
                               .q_begin = k.q_begin,
                               .q_len = k.q_len,
                               .k_begin = k.k_begin,
                               .k_len = k.k_len,
                               .causal = k.causal});
    }
  for (int r = 0; r < cp; ++r) {
    CAPTURE(r);
    std::vector<float> d = ldq[size_t(r)];
    for (size_t i = 0; i < d.size(); ++i) d[i] += ldkv[size_t(r)][i];
    CHECK(worst_rows(lo[size_t(r)], out, B, T, orow, cp, r) <= 1e-5);
    CHECK(worst_lse(ll[size_t(r)], lse, B, c.Hq, T, cp, r) <= 1e-5);
    CHECK(worst_rows(d, dqkv, B, T, row, cp, r) <= 1e-5);
  }
}

}  // namespace

TEST_CASE("ring attention over cp chunks equals full causal attention, forward and backward") {
  for (const Case& c : {Case{2, 24, 4, 4, 8}, Case{2, 24, 4, 2, 8}, Case{1, 24, 4, 1, 6}, Case{2, 24, 8, 2, 16}})
    for (int cp : {1, 2, 3, 4}) check_ring(c, cp);
}

TEST_CASE("load-balanced chunking: every position once, each rank an early and a late chunk") {
  for (int cp : {1, 2, 3, 4}) {
    const int T = 8 * cp * 2, Tl = T / cp, c = Tl / 2;
    std::vector<int> seen(size_t(T), 0);
    for (int r = 0; r < cp; ++r) {
      for (int t = 0; t < Tl; ++t) ++seen[size_t(cp_global_position(cp, r, t, Tl))];
      CHECK(cp_global_position(cp, r, 0, Tl) == int64_t(r) * c);
      CHECK(cp_global_position(cp, r, c, Tl) == int64_t(2 * cp - 1 - r) * c);
    }
    for (int n : seen) CHECK(n == 1);
  }
}

TEST_CASE("the diagonal block alone is attention_fwd / attention_bwd bit for bit") {
  auto be = make_cpu_backend();
  const int B = 2, T = 10, Hq = 4, Hkv = 2, D = 8;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D, orow = int64_t(Hq) * D;
  const AttentionShape sh{.B = B, .T = T, .Hq = Hq, .Hkv = Hkv, .D = D};
  std::vector<float> qkv = randn(size_t(B) * T * row, 3), dout = randn(size_t(B) * T * orow, 4);
  std::vector<float> o1(size_t(B) * T * orow), l1(size_t(B) * Hq * T), o2 = o1, l2 = l1;
  std::vector<float> d1(qkv.size()), d2(qkv.size(), 0.f);
  be->attention_fwd(
      {.out = view(o1, {B, T, orow}), .lse = view(l1, {B, Hq, T}), .qkv = view(qkv, {B, T, row}), .shape = sh});
  be->attention_block_fwd({.out = view(o2, {B, T, orow}),
                           .lse = view(l2, {B, Hq, T}),
                           .qkv = view(qkv, {B, T, row}),
                           .kv = view(qkv, {B, T, row}),
                           .shape = sh,
                           .q_len = T,
                           .k_len = T,
                           .causal = true});
  CHECK(o1 == o2);
  CHECK(l1 == l2);
  be->attention_bwd({.dqkv = view(d1, {B, T, row}),
                     .dout = view(dout, {B, T, orow}),
                     .qkv = view(qkv, {B, T, row}),
                     .out = view(o1, {B, T, orow}),
                     .lse = view(l1, {B, Hq, T}),
                     .shape = sh});
  be->attention_block_bwd({.dq = view(d2, {B, T, row}),
                           .dkv = view(d2, {B, T, row}),
                           .dout = view(dout, {B, T, orow}),
                           .qkv = view(qkv, {B, T, row}),
                           .kv = view(qkv, {B, T, row}),
                           .out = view(o1, {B, T, orow}),
                           .lse = view(l1, {B, Hq, T}),
                           .shape = sh,
                           .q_len = T,
                           .k_len = T,
                           .causal = true});
  CHECK(d1 == d2);
}
