// CUDA vs CPU: qk-norm (per-head RMSNorm of the q and k heads of packed qkv rows), forward and
// backward, out of place and in place (the model runs the backward in place on dqkv, generation
// the forward in place on qkv), weight gradients written on top of non-zero values (accumulate),
// with Qwen3's head_dim 128 and odd sizes (D = 40: lanes with one or two columns; D = 256: the
// widest the kernels take), and a refusal past it.
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

TEST_CASE("cuda qk_norm forward and backward match the CPU, in place too" * doctest::skip(!has_gpu())) {
  struct Case {
    int64_t rows;
    int Hq, Hkv, D;
  };
  for (const Case k : {Case{70, 4, 2, 128}, Case{512, 16, 8, 128}, Case{33, 6, 3, 40}, Case{64, 2, 1, 256}}) {
    CAPTURE(k.rows);
    CAPTURE(k.Hq);
    CAPTURE(k.Hkv);
    CAPTURE(k.D);
    const int64_t W = int64_t(k.Hq + 2 * k.Hkv) * k.D, n = k.rows * W;
    Rng r{uint32_t(k.D + k.Hq)};
    auto inp = make_dual(Kind::act, {k.rows, W}, r.normal(size_t(n), 3.f, 0.2f));
    auto wq = make_dual(Kind::act, {k.D}, r.normal(size_t(k.D), 0.3f, 1.f));
    auto wk = make_dual(Kind::act, {k.D}, r.normal(size_t(k.D), 0.3f, 1.f));
    auto out = make_dual(Kind::act, {k.rows, W}, std::vector<float>(size_t(n), 5.f));
    const float eps = 1e-6f;
    auto fwd = [&](Backend& b, const Tensor& o, const Tensor& x, const Tensor& q, const Tensor& kk) {
      b.qk_norm_fwd(
          {.out = o, .inp = x, .q_weight = q, .k_weight = kk, .Hq = k.Hq, .Hkv = k.Hkv, .D = k.D, .eps = eps});
    };
    fwd(cpu_backend(), out.c, inp.c, wq.c, wk.c);
    fwd(gpu_backend(), out.g, inp.g, wq.g, wk.g);
    CHECK_CLOSE(out, kBf16Tol);

    auto dout = make_dual(Kind::act, {k.rows, W}, r.normal(size_t(n)));
    auto dinp = make_dual(Kind::act, {k.rows, W}, std::vector<float>(size_t(n), 9.f));  // overwritten
    auto dwq = make_dual(Kind::f32, {k.D}, r.normal(size_t(k.D)));                      // accumulate
    auto dwk = make_dual(Kind::f32, {k.D}, r.normal(size_t(k.D)));
    auto bwd = [&](Backend& b, const Tensor& di, const Tensor& dq, const Tensor& dk, const Tensor& d, const Tensor& x,
                   const Tensor& q, const Tensor& kk) {
      b.qk_norm_bwd({.dinp = di,
                     .dq_weight = dq,
                     .dk_weight = dk,
                     .dout = d,
                     .inp = x,
                     .q_weight = q,
                     .k_weight = kk,
                     .Hq = k.Hq,
                     .Hkv = k.Hkv,
                     .D = k.D,
                     .eps = eps});
    };
    bwd(cpu_backend(), dinp.c, dwq.c, dwk.c, dout.c, inp.c, wq.c, wk.c);
    bwd(gpu_backend(), dinp.g, dwq.g, dwk.g, dout.g, inp.g, wq.g, wk.g);
    CHECK_CLOSE(dinp, kBf16Tol);
    CHECK_CLOSE(dwq, 1e-3);
    CHECK_CLOSE(dwk, 1e-3);

    // In place: dout receives dinp (the weight gradients still read the dout they were given).
    bwd(cpu_backend(), dout.c, dwq.c, dwk.c, dout.c, inp.c, wq.c, wk.c);
    bwd(gpu_backend(), dout.g, dwq.g, dwk.g, dout.g, inp.g, wq.g, wk.g);
    CHECK_CLOSE(dout, kBf16Tol);
    CHECK_CLOSE(dwq, 1e-3);
    CHECK_CLOSE(dwk, 1e-3);
    fwd(cpu_backend(), inp.c, inp.c, wq.c, wk.c);
    fwd(gpu_backend(), inp.g, inp.g, wq.g, wk.g);
    CHECK_CLOSE(inp, kBf16Tol);
  }
}

TEST_CASE("cuda qk_norm refuses a head_dim past its kernels" * doctest::skip(!has_gpu())) {
  const int D = 264, Hq = 1, Hkv = 1;
  auto x = make_dual(Kind::act, {2, 3 * D}, std::vector<float>(size_t(6 * D), 1.f));
  auto w = make_dual(Kind::act, {D}, std::vector<float>(size_t(D), 1.f));
  CHECK_THROWS_AS(gpu_backend().qk_norm_fwd(
                      {.out = x.g, .inp = x.g, .q_weight = w.g, .k_weight = w.g, .Hq = Hq, .Hkv = Hkv, .D = D}),
                  std::invalid_argument);
}

TEST_SUITE_END();
