// The FP8 linear seam (core/model/linear_fp8.cpp) on the CPU backend: delayed scaling's fused cast
// of fc1's output gradient out of the SwiGLU backward (LinearBwd::swiglu_pre) gives the input and
// weight gradients and the recorded amax of the unfused path bit for bit, without writing dout;
// where the fusion does not apply (no history yet, a bias gradient to sum, the switch off) the
// linear materialises dout = swiglu_bwd(dact, gate_up) first, as the block did before. Likewise
// fc2's forward on x = swiglu(gate_up): x written and cast in one op, the same output and record.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/model/linear.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using core::ColumnParallelLinear;
using core::LinearTensors;
using core::RowParallelLinear;
using core::TpGroup;
using kernels::DType;
using kernels::Tensor;
using kernels::test::randn;
using kernels::test::view;

namespace {

constexpr int64_t N = 5, C = 8, F = 6;  // fc1: [2F, C] into gate_up [N, 2F]

Tensor bytes(std::vector<uint8_t>& v, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), t, kernels::Device::cpu, shape);
}

// An FP8 delayed-scaling setup as Model::alloc_fp8_scratch lays it out: the shared scratch, one
// weight cache and one linear's history cells (scale sources by role x, W, dy; the step's amax).
struct Fp8Delayed {
  std::vector<uint8_t> xb = std::vector<uint8_t>(N * 2 * F * 2), gb = std::vector<uint8_t>(N * 2 * F * 2),
                       gtb = std::vector<uint8_t>(N * 2 * F * 2), wq = std::vector<uint8_t>(2 * F * C),
                       wtq = std::vector<uint8_t>(2 * F * C);
  std::vector<float> stats = std::vector<float>(64, 0.f), wstats = std::vector<float>(8, 0.f);
  std::vector<float> scale_amax = {2.5f, 1.5f, 0.05f}, amax = {0.f, 0.f, 0.f};
  core::Fp8Scratch s;
  core::Fp8WeightCache cache;
  core::Fp8DelayedCells cells;

  Fp8Delayed(bool fuse, bool history_ready, int64_t out, int64_t in) {
    s = core::Fp8Scratch{.x = bytes(xb, DType::e4m3, {int64_t(xb.size())}),
                         .g = bytes(gb, DType::e4m3, {int64_t(gb.size())}),
                         .g_t = bytes(gtb, DType::e4m3, {int64_t(gtb.size())}),
                         .stats = view(stats, {64}),
                         .fwd = DType::e4m3,
                         .bwd = DType::e5m2};
    s.delayed = true;
    s.record_amax = true;
    s.history_ready = history_ready;
    s.fuse_producers = fuse;
    cache = core::Fp8WeightCache{
        .wq = bytes(wq, DType::e4m3, {out, in}), .wtq = bytes(wtq, DType::e4m3, {in, out}), .stats = view(wstats, {8})};
    for (int role = 0; role < 3; ++role) {
      cells.scale_amax[role] = Tensor(&scale_amax[size_t(role)], DType::f32, kernels::Device::cpu, {1});
      cells.amax[role] = Tensor(&amax[size_t(role)], DType::f32, kernels::Device::cpu, {1});
    }
  }
  Fp8Delayed(const Fp8Delayed&) = delete;
  Fp8Delayed& operator=(const Fp8Delayed&) = delete;
};

// One fc1 backward through an FP8 delayed-scaling linear, with dout prefilled by `fill`: what it
// wrote into dinp, dweight, dbias, dout and the dy amax record.
struct Fc1Result {
  std::vector<float> dinp, dw, db, dout, amax_dy;
};

Fc1Result fc1_backward(bool fuse, bool history_ready, bool bias, float fill) {
  auto be = kernels::make_cpu_backend();
  auto x = randn(N * C, 1), w = randn(2 * F * C, 2, 0.3f), b = randn(2 * F, 3);
  auto gate_up = randn(N * 2 * F, 4, 2.f), dact = randn(N * F, 5, 1e-2f);
  Fc1Result r{.dinp = std::vector<float>(N * C),
              .dw = std::vector<float>(2 * F * C, 0.f),
              .db = std::vector<float>(2 * F, 0.f),
              .dout = std::vector<float>(N * 2 * F, fill),
              .amax_dy = {0.f}};
  const LinearTensors weights{.w = view(w, {2 * F, C}), .b = bias ? view(b, {2 * F}) : Tensor()};
  const LinearTensors grads{.w = view(r.dw, {2 * F, C}), .b = bias ? view(r.db, {2 * F}) : Tensor()};
  ColumnParallelLinear fc1(weights, grads, *be, TpGroup{});
  Fp8Delayed f(fuse, history_ready, 2 * F, C);
  fc1.use_fp8(&f.s, &f.cache, &f.cells);
  fc1.bwd({.dinp = view(r.dinp, {N, C}),
           .dout = view(r.dout, {N, 2 * F}),
           .inp = view(x, {N, C}),
           .swiglu_pre = view(gate_up, {N, 2 * F}),
           .swiglu_dact = view(dact, {N, F})});
  r.amax_dy = {f.amax[2]};
  return r;
}

// One fc2 forward [C, F] on x = swiglu(gate_up), x prefilled by `fill`: the output, x as written,
// and the x amax record.
struct Fc2Result {
  std::vector<float> y, x, amax_x;
};

Fc2Result fc2_forward(bool fuse, bool history_ready, float fill) {
  auto be = kernels::make_cpu_backend();
  auto w = randn(C * F, 6, 0.3f), gate_up = randn(N * 2 * F, 7, 2.f);
  std::vector<float> dw(C * F, 0.f);
  Fc2Result r{.y = std::vector<float>(N * C), .x = std::vector<float>(N * F, fill), .amax_x = {0.f}};
  RowParallelLinear fc2({.w = view(w, {C, F})}, {.w = view(dw, {C, F})}, *be, TpGroup{});
  Fp8Delayed f(fuse, history_ready, C, F);
  fc2.use_fp8(&f.s, &f.cache, &f.cells);
  fc2.fwd({.out = view(r.y, {N, C}), .inp = view(r.x, {N, F}), .swiglu_pre = view(gate_up, {N, 2 * F})});
  r.amax_x = {f.amax[0]};
  return r;
}

bool all_nan(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isnan(x)) return false;
  return true;
}

}  // namespace

TEST_CASE("fp8 delayed linear: the SwiGLU-fused output-gradient cast equals the unfused path, dout never written") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Fc1Result unfused = fc1_backward(false, true, false, 0.f);
  const Fc1Result fused = fc1_backward(true, true, false, nan);
  CHECK(all_nan(fused.dout));  // fused: no act-dtype dy was written
  CHECK(fused.dinp == unfused.dinp);
  CHECK(fused.dw == unfused.dw);
  CHECK(fused.amax_dy == unfused.amax_dy);
  CHECK(unfused.amax_dy[0] > 0.f);  // the record saw the gradient

  // The unfused path wrote dout = swiglu_bwd(dact, gate_up), and it is what the fused cast read.
  auto be = kernels::make_cpu_backend();
  auto gate_up = randn(N * 2 * F, 4, 2.f), dact = randn(N * F, 5, 1e-2f);
  std::vector<float> dgu(N * 2 * F);
  be->swiglu_bwd(view(dgu, {N, 2 * F}), view(dact, {N, F}), view(gate_up, {N, 2 * F}));
  CHECK(unfused.dout == dgu);
  float m = 0.f;
  for (float v : dgu) m = std::fmax(m, std::fabs(v));
  CHECK(unfused.amax_dy[0] == m);
}

TEST_CASE("fp8 delayed linear: without a ready history, or with a bias gradient, dout is materialised first") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The first step (current scaling needs amax(dy) before the cast): the same as the switch off.
  const Fc1Result first = fc1_backward(true, false, false, nan);
  const Fc1Result first_off = fc1_backward(false, false, false, 0.f);
  CHECK_FALSE(all_nan(first.dout));
  CHECK(first.dout == first_off.dout);
  CHECK(first.dinp == first_off.dinp);
  CHECK(first.dw == first_off.dw);
  // A bias: its gradient is summed from the act-dtype dy.
  const Fc1Result biased = fc1_backward(true, true, true, nan);
  const Fc1Result biased_off = fc1_backward(false, true, true, 0.f);
  CHECK_FALSE(all_nan(biased.dout));
  CHECK(biased.dout == biased_off.dout);
  CHECK(biased.db == biased_off.db);
  CHECK(biased.dw == biased_off.dw);
  float any = 0.f;
  for (float v : biased.db) any = std::fmax(any, std::fabs(v));
  CHECK(any > 0.f);
}

TEST_CASE("fp8 delayed linear: fc2's input written by the SwiGLU forward with its cast equals the unfused path") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto be = kernels::make_cpu_backend();
  auto gate_up = randn(N * 2 * F, 7, 2.f);
  std::vector<float> act(N * F);
  be->swiglu_fwd(view(act, {N, F}), view(gate_up, {N, 2 * F}));
  for (bool history_ready : {true, false}) {  // fused; the first step (materialised, current scaling)
    CAPTURE(history_ready);
    const Fc2Result unfused = fc2_forward(false, history_ready, 0.f);
    const Fc2Result fused = fc2_forward(true, history_ready, nan);
    CHECK(unfused.x == act);
    CHECK(fused.x == act);  // the block keeps x: it is written either way
    CHECK(fused.y == unfused.y);
    CHECK(fused.amax_x == unfused.amax_x);
    float m = 0.f;
    for (float v : act) m = std::fmax(m, std::fabs(v));
    CHECK(fused.amax_x[0] == m);
  }
}
