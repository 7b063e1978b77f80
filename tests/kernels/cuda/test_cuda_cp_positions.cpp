// CUDA vs CPU: the ops that context parallelism (parallelism.cp) feeds its ranks' whole-sample
// positions, which run past the local sequence T (rank r holds chunks r and 2·cp − 1 − r of a
// sample of cp·T tokens; core/model/ring_attention.hpp):
//   - RoPE (rope_fwd / rope_bwd with positions): the angle-table kernel (head dims 16, 64, 128)
//     and the scalar kernel (12), with the table sized by max_positions = cp·T and with a table
//     too short for the positions (max_positions unset: positions past T are computed, not read
//     past the table; this read is what bent llama_tiny's q/k weights under CP on CUDA). Both
//     tables give bitwise the same result.
//   - the learned position embedding (embedding_fwd / embedding_bwd with positions): rows of the
//     whole table read and accumulated, the backward into a stale parameter gradient opened by
//     begin_grad_writes (CUDA lets the first write overwrite), so rows the positions name hold
//     their sum and all others zero after end_grad_writes (gpt_tiny's position table under CP).
// Skipped without a GPU.
#include <cstdint>
#include <vector>

#include "core/model/ring_attention.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;
using recipe::core::cp_global_position;

namespace {

// Rank `rank`'s global positions of its T local rows, repeated for B rows (i32 values as floats).
std::vector<float> cp_positions(int cp, int rank, int B, int T) {
  std::vector<float> p(size_t(B) * size_t(T));
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) p[size_t(b) * size_t(T) + size_t(t)] = float(cp_global_position(cp, rank, t, T));
  return p;
}

}  // namespace

TEST_CASE("cuda rope at context parallelism's whole-sample positions (past T) vs CPU" * doctest::skip(!has_gpu())) {
  struct Case {
    int B, T, Hq, Hkv, D;
  };
  for (const Case a : {Case{2, 32, 4, 2, 16}, Case{2, 48, 8, 2, 64}, Case{1, 40, 6, 3, 128}, Case{2, 24, 4, 4, 12}})
    for (const int cp : {2, 4})
      for (const int rank : {0, cp - 1}) {
        CAPTURE(a.D);
        CAPTURE(cp);
        CAPTURE(rank);
        // A fresh backend per case: its angle table starts empty, so the first call builds a table
        // of T rows only (max_positions unset) and the second one of cp·T rows.
        std::unique_ptr<Backend> gpu = make_cuda_backend(cuda_options());
        Rng r(uint32_t(a.D * 10 + cp + rank));
        const int64_t row = int64_t(a.Hq + 2 * a.Hkv) * a.D, N = int64_t(a.B) * a.T;
        const std::vector<float> x = r.normal(size_t(N * row));
        auto pos = make_dual(Kind::i32, {a.B, a.T}, cp_positions(cp, rank, a.B, a.T), cpu_backend(), *gpu);
        const Dual f1 = rope_freqs(10000.f, a.D, cpu_backend(), *gpu),
                   f2 = rope_freqs(500000.f, a.D, cpu_backend(), *gpu);
        const AttentionShape shape{.B = a.B, .T = a.T, .Hq = a.Hq, .Hkv = a.Hkv, .D = a.D};
        std::vector<uint8_t> first;
        for (const int max_positions : {0, cp * a.T}) {
          CAPTURE(max_positions);
          auto qkv = make_dual(Kind::act, {a.B, a.T, row}, x, cpu_backend(), *gpu);
          const RopeArgs c{.qkv = qkv.c, .positions = pos.c, .shape = shape, .inv_freq = f1.c};
          RopeArgs g = c;
          g.qkv = qkv.g, g.positions = pos.g, g.inv_freq = f1.g, g.max_positions = max_positions;
          cpu_backend().rope_fwd(c);
          gpu->rope_fwd(g);
          CHECK_CLOSE(qkv, kBf16Tol);
          RopeArgs cb = c, gb = g;
          cb.inv_freq = f2.c, gb.inv_freq = f2.g;
          cpu_backend().rope_bwd(cb);
          gpu->rope_bwd(gb);
          CHECK_CLOSE(qkv, 2 * kBf16Tol);
          const std::vector<uint8_t> bytes = read_bytes(*gpu, qkv.g);
          if (first.empty())
            first = bytes;
          else
            CHECK(bytes == first);  // the short table (angles computed past it) and the full one agree bitwise
        }
      }
}

TEST_CASE("cuda learned position embedding at context parallelism's positions vs CPU, into a fresh gradient" *
          doctest::skip(!has_gpu())) {
  const int B = 2, T = 16, C = 64, V = 40, cp = 2;
  const int S = cp * T;  // the position table's rows: the whole sample
  const int64_t N = int64_t(B) * T;
  for (int rank = 0; rank < cp; ++rank) {
    CAPTURE(rank);
    Rng r(uint32_t(31 + rank));
    const std::vector<float> rows = cp_positions(cp, rank, 1, T);
    auto positions = make_dual(Kind::i32, {T}, rows);
    auto tokens = make_dual(Kind::i32, {N}, r.uniform_int(N, 0, V - 1));
    auto wte = make_dual(Kind::act, {V, C}, r.normal(size_t(V) * C));
    auto wpe = make_dual(Kind::act, {S, C}, r.normal(size_t(S) * C));
    auto out = make_dual(Kind::act, {N, C}, std::vector<float>(size_t(N * C), 4.f));
    cpu_backend().embedding_fwd(
        {.out = out.c, .tokens = tokens.c, .wte = wte.c, .wpe = wpe.c, .positions = positions.c, .T = T});
    gpu_backend().embedding_fwd(
        {.out = out.g, .tokens = tokens.g, .wte = wte.g, .wpe = wpe.g, .positions = positions.g, .T = T});
    CHECK_CLOSE(out, kBf16Tol);

    // The backward into parameter gradients opened for a step: stale contents read as zero.
    auto dout = make_dual(Kind::act, {N, C}, r.normal(size_t(N * C)));
    auto dwte = make_dual(Kind::f32, {V, C}, r.normal(size_t(V) * C, 5.f));
    auto dwpe = make_dual(Kind::f32, {S, C}, r.normal(size_t(S) * C, 5.f));
    for (Backend* be : {&cpu_backend(), &gpu_backend()}) {
      const bool g = be == &gpu_backend();
      be->begin_grad_writes({g ? dwte.g : dwte.c, g ? dwpe.g : dwpe.c});
      be->embedding_bwd({.dwte = g ? dwte.g : dwte.c,
                         .dwpe = g ? dwpe.g : dwpe.c,
                         .dout = g ? dout.g : dout.c,
                         .tokens = g ? tokens.g : tokens.c,
                         .positions = g ? positions.g : positions.c,
                         .T = T});
      be->end_grad_writes();
    }
    CHECK_CLOSE(dwte, 1e-5);
    CHECK_CLOSE(dwpe, 1e-5);
    // Rows no position names hold zero; the named ones the batch's sum (nonzero).
    const std::vector<float> d = read(gpu_backend(), dwpe.g);
    std::vector<char> named(size_t(S), 0);
    for (const float p : rows) named[size_t(p)] = 1;
    for (int p = 0; p < S; ++p) {
      CAPTURE(p);
      double sq = 0;
      for (int c = 0; c < C; ++c) sq += double(d[size_t(p) * C + size_t(c)]) * d[size_t(p) * C + size_t(c)];
      CHECK((sq > 0) == bool(named[size_t(p)]));
    }
  }
}
