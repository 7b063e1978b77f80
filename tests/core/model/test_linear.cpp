// The linear seam (core/model/linear.hpp) on the CPU backend: column- and row-parallel fwd/bwd
// against a direct computation and finite differences, the fused bias-gradient, GELU and SwiGLU
// backward paths, and
// the tensor-parallel rules (row-parallel: partial outputs summed, bias added by TP rank 0 only;
// column-parallel: dinp summed right after the GEMM) with each simulated rank's reduction recorded.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/model/linear.hpp"
#include "tests/kernels/cpu/cpu_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using core::ColumnParallelLinear;
using core::LinearTensors;
using core::RowParallelLinear;
using core::TpGroup;
using kernels::Tensor;
using kernels::test::check_gradient;
using kernels::test::max_abs_diff;
using kernels::test::randn;
using kernels::test::view;
using kernels::test::weighted_sum;

namespace {

constexpr int64_t N = 5, IC = 6, OC = 4;

// One member of a simulated TP group: all_reduce_sum records a copy of what this rank contributes
// (the partial tensor) and leaves it as is, so a test can sum the ranks' partials itself and see
// exactly when and on what each reduction ran. Nothing else may be called.
class RecordingComm final : public core::Comm {
 public:
  RecordingComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "recording"; }
  void all_reduce_sum(Tensor t) override {
    const float* p = t.as<float>();
    sums.emplace_back(p, p + t.numel());
  }
  double all_reduce_sum(double) override { throw std::logic_error("unexpected"); }
  double all_reduce_max(double) override { throw std::logic_error("unexpected"); }
  void broadcast(Tensor, int) override { throw std::logic_error("unexpected"); }
  void barrier() override { throw std::logic_error("unexpected"); }
  void all_reduce_max(Tensor) override { throw std::logic_error("unexpected"); }
  void reduce_scatter_sum(Tensor, Tensor) override { throw std::logic_error("unexpected"); }
  void all_gather(Tensor, Tensor) override { throw std::logic_error("unexpected"); }
  void send_recv(Tensor, int, Tensor, int) override { throw std::logic_error("unexpected"); }

  std::vector<std::vector<float>> sums;  // one entry per all_reduce_sum, in call order

 private:
  int rank_, size_;
};

// out[n, o] = Σ_i inp[n, i]·w[o, i] + b[o], in double.
std::vector<float> affine(const std::vector<float>& inp, const std::vector<float>& w, const std::vector<float>* b,
                          int rows, int in, int out) {
  std::vector<float> y(size_t(rows) * out);
  for (int n = 0; n < rows; ++n)
    for (int o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int i = 0; i < in; ++i) s += double(inp[n * in + i]) * w[o * in + i];
      y[n * out + o] = float(s);
    }
  return y;
}

// Columns [c0, c0 + cols) of a row-major [rows, ld] matrix.
std::vector<float> columns(const std::vector<float>& m, int rows, int ld, int c0, int cols) {
  std::vector<float> r;
  for (int n = 0; n < rows; ++n)
    for (int c = c0; c < c0 + cols; ++c) r.push_back(m[n * ld + c]);
  return r;
}

// The tanh approximation (the ops.hpp convention).
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

std::vector<float> sum(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

}  // namespace

TEST_CASE("column- and row-parallel linears on one rank: forward and gradients") {
  auto be = kernels::make_cpu_backend();
  auto x = randn(N * IC, 1), w = randn(OC * IC, 2), b = randn(OC, 3), r = randn(N * OC, 4);
  std::vector<float> y(N * OC), dx(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
  const LinearTensors weights{view(w, {OC, IC}), view(b, {OC})}, grads{view(dw, {OC, IC}), view(db, {OC})};
  const ColumnParallelLinear col(weights, grads, *be, TpGroup{});
  const RowParallelLinear row(weights, grads, *be, TpGroup{});
  for (bool column : {true, false}) {
    CAPTURE(column);
    auto fwd = [&] {
      if (column)
        col.fwd({.out = view(y, {N, OC}), .inp = view(x, {N, IC})});
      else
        row.fwd({.out = view(y, {N, OC}), .inp = view(x, {N, IC})});
    };
    fwd();
    CHECK(max_abs_diff(y, affine(x, w, &b, N, IC, OC)) < 1e-5);
    std::fill(dw.begin(), dw.end(), 0.0f);
    std::fill(db.begin(), db.end(), 0.0f);
    const kernels::test::GradCheck gc;
    if (column)
      col.bwd({.dinp = view(dx, {N, IC}), .dout = view(r, {N, OC}), .inp = view(x, {N, IC})});
    else
      row.bwd({.dinp = view(dx, {N, IC}), .dout = view(r, {N, OC}), .inp = view(x, {N, IC})});
    auto objective = [&] {
      fwd();
      return weighted_sum(y, r);
    };
    check_gradient("dinp", x, dx, objective, gc);
    check_gradient("dweight", w, dw, objective, gc);
    check_gradient("dbias", b, db, objective, gc);
  }
}

TEST_CASE("column-parallel GELU epilogue forward and the fused bias-gradient paths of the backward") {
  auto be = kernels::make_cpu_backend();
  // fc1 [F, C] (column-parallel, GELU epilogue) then fc2 [C, F] (row-parallel), as the GELU MLP.
  constexpr int64_t C = 4, F = 6;
  auto x = randn(N * C, 11), w1 = randn(F * C, 12), b1 = randn(F, 13), w2 = randn(C * F, 14), b2 = randn(C, 15);
  auto r = randn(N * C, 16);
  std::vector<float> dw1(F * C, 0.0f), db1(F, 0.0f), dw2(C * F, 0.0f), db2(C, 0.0f);
  const ColumnParallelLinear fc1({view(w1, {F, C}), view(b1, {F})}, {view(dw1, {F, C}), view(db1, {F})}, *be,
                                 TpGroup{});
  const RowParallelLinear fc2({view(w2, {C, F}), view(b2, {C})}, {view(dw2, {C, F}), view(db2, {C})}, *be, TpGroup{});
  std::vector<float> pre(N * F), act(N * F), y(N * C);
  auto forward = [&] {
    fc1.fwd({.out = view(act, {N, F}), .inp = view(x, {N, C}), .pre_gelu = view(pre, {N, F})});
    fc2.fwd({.out = view(y, {N, C}), .inp = view(act, {N, F})});
  };
  forward();
  const auto expect_pre = affine(x, w1, &b1, N, C, F);
  CHECK(max_abs_diff(pre, expect_pre) < 1e-5);
  for (size_t i = 0; i < act.size(); ++i) CHECK(act[i] == doctest::Approx(gelu(pre[i])));

  for (bool rebuild : {false, true}) {
    CAPTURE(rebuild);
    forward();
    for (auto* g : {&dw1, &db1, &dw2, &db2}) std::fill(g->begin(), g->end(), 0.0f);
    // With rebuild_input, fc2's input buffer starts as garbage and is rebuilt from pre.
    std::vector<float> act_buf = rebuild ? std::vector<float>(N * F, 123.0f) : act;
    std::vector<float> dpre(N * F), dx(N * C);
    fc2.bwd({.dinp = view(dpre, {N, F}),
             .dout = view(r, {N, C}),
             .inp = view(act_buf, {N, F}),
             .gelu_pre = view(pre, {N, F}),
             .rebuild_input = rebuild,
             .dinp_is_output_grad_of = &fc1});
    if (rebuild) CHECK(act_buf == act);
    // fc2 already summed dpre's rows into fc1's bias gradient: fc1 must not add them again.
    fc1.bwd({.dinp = view(dx, {N, C}), .dout = view(dpre, {N, F}), .inp = view(x, {N, C}), .bias_grad_done = true});
    auto objective = [&] {
      forward();
      return weighted_sum(y, r);
    };
    const kernels::test::GradCheck gc{.step = 1e-2f, .rtol = 2e-2, .atol = 2e-3};
    check_gradient("dx", x, dx, objective, gc);
    check_gradient("dw1", w1, dw1, objective, gc);
    check_gradient("db1", b1, db1, objective, gc);
    check_gradient("dw2", w2, dw2, objective, gc);
    check_gradient("db2", b2, db2, objective, gc);
  }

  // bias_grad_done on fc2: its bias gradient stays untouched (the norm backward owns that sum).
  std::fill(db2.begin(), db2.end(), 0.0f);
  std::vector<float> dpre(N * F);
  fc2.bwd({.dinp = view(dpre, {N, F}), .dout = view(r, {N, C}), .inp = view(act, {N, F}), .bias_grad_done = true});
  CHECK(db2 == std::vector<float>(C, 0.0f));
  CHECK(fc2.bias_grad().as<float>() == db2.data());
}

TEST_CASE("row-parallel backward through the SwiGLU (swiglu_pre): the separate ops bit for bit, and the gradients") {
  auto be = kernels::make_cpu_backend();
  // fc1 [2F, C] (column-parallel) → SwiGLU → fc2 [C, F] (row-parallel), as the Llama MLP.
  constexpr int64_t C = 4, F = 3;
  auto x = randn(N * C, 41), w1 = randn(2 * F * C, 42), b1 = randn(2 * F, 43), w2 = randn(C * F, 44), b2 = randn(C, 45);
  auto r = randn(N * C, 46);
  std::vector<float> dw1(2 * F * C), db1(2 * F), dw2(C * F), db2(C);
  const ColumnParallelLinear fc1({view(w1, {2 * F, C}), view(b1, {2 * F})}, {view(dw1, {2 * F, C}), view(db1, {2 * F})},
                                 *be, TpGroup{});
  const RowParallelLinear fc2({view(w2, {C, F}), view(b2, {C})}, {view(dw2, {C, F}), view(db2, {C})}, *be, TpGroup{});
  std::vector<float> gu(N * 2 * F), act(N * F), y(N * C);
  auto forward = [&] {
    fc1.fwd({.out = view(gu, {N, 2 * F}), .inp = view(x, {N, C})});
    be->swiglu_fwd(view(act, {N, F}), view(gu, {N, 2 * F}));
    fc2.fwd({.out = view(y, {N, C}), .inp = view(act, {N, F})});
  };
  for (bool rebuild : {false, true}) {
    CAPTURE(rebuild);
    forward();
    for (auto* g : {&dw1, &db1, &dw2, &db2}) std::fill(g->begin(), g->end(), 0.0f);
    // With rebuild_input, fc2's input buffer starts as garbage and is rebuilt from gate_up.
    std::vector<float> act_buf = rebuild ? std::vector<float>(N * F, 123.0f) : act;
    std::vector<float> dact(N * F, 55.0f), dgu(N * 2 * F, 66.0f), dx(N * C);
    fc2.bwd({.dinp = view(dgu, {N, 2 * F}),
             .dout = view(r, {N, C}),
             .inp = view(act_buf, {N, F}),
             .rebuild_input = rebuild,
             .swiglu_pre = view(gu, {N, 2 * F}),
             .swiglu_dact = view(dact, {N, F})});
    if (rebuild) CHECK(act_buf == act);
    // The ops the block ran before the fusion, on the kept input: the same bits.
    std::vector<float> dact_ref(N * F), dgu_ref(N * 2 * F), dw2_ref(C * F, 0.0f), db2_ref(C, 0.0f);
    be->linear_bwd({.dinp = view(dact_ref, {N, F}),
                    .dweight = view(dw2_ref, {C, F}),
                    .dbias = view(db2_ref, {C}),
                    .dout = view(r, {N, C}),
                    .inp = view(act, {N, F}),
                    .weight = view(w2, {C, F})});
    be->swiglu_bwd(view(dgu_ref, {N, 2 * F}), view(dact_ref, {N, F}), view(gu, {N, 2 * F}));
    CHECK(dact == dact_ref);
    CHECK(dgu == dgu_ref);
    CHECK(dw2 == dw2_ref);
    CHECK(db2 == db2_ref);
    fc1.bwd({.dinp = view(dx, {N, C}), .dout = view(dgu, {N, 2 * F}), .inp = view(x, {N, C})});
    auto objective = [&] {
      forward();
      return weighted_sum(y, r);
    };
    const kernels::test::GradCheck gc{.step = 1e-2f, .rtol = 2e-2, .atol = 2e-3};
    check_gradient("dx", x, dx, objective, gc);
    check_gradient("dw1", w1, dw1, objective, gc);
    check_gradient("db1", b1, db1, objective, gc);
    check_gradient("dw2", w2, dw2, objective, gc);
    check_gradient("db2", b2, db2, objective, gc);
  }
  // swiglu_pre needs the d(act) buffer and takes no other epilogue.
  std::vector<float> dact(N * F), dgu(N * 2 * F);
  CHECK_THROWS_AS(fc2.bwd({.dinp = view(dgu, {N, 2 * F}),
                           .dout = view(r, {N, C}),
                           .inp = view(act, {N, F}),
                           .swiglu_pre = view(gu, {N, 2 * F})}),
                  std::logic_error);
  CHECK_THROWS_AS(fc2.bwd({.dinp = view(dgu, {N, 2 * F}),
                           .dout = view(r, {N, C}),
                           .inp = view(act, {N, F}),
                           .gelu_pre = view(act, {N, F}),
                           .swiglu_pre = view(gu, {N, 2 * F}),
                           .swiglu_dact = view(dact, {N, F})}),
                  std::logic_error);
}

TEST_CASE("row-parallel over two TP ranks: partial outputs summed, bias added by rank 0 only") {
  auto be = kernels::make_cpu_backend();
  auto x = randn(N * IC, 21), w = randn(OC * IC, 22), b = randn(OC, 23);
  const auto full = affine(x, w, &b, N, IC, OC);
  constexpr int64_t half = IC / 2;
  std::vector<std::vector<float>> partials;
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    // This rank's input features: columns [rank·half, (rank+1)·half) of W and of the input.
    auto w_r = columns(w, OC, IC, rank * half, half), x_r = columns(x, N, IC, rank * half, half);
    std::vector<float> dw(OC * half), db(OC), y(N * OC, -1.0f);
    RecordingComm comm(rank, 2);
    const RowParallelLinear lin({view(w_r, {OC, half}), view(b, {OC})}, {view(dw, {OC, half}), view(db, {OC})}, *be,
                                TpGroup{.comm = &comm, .rank = rank, .size = 2});
    lin.fwd({.out = view(y, {N, OC}), .inp = view(x_r, {N, half})});
    REQUIRE(comm.sums.size() == 1);  // exactly one reduction, of the output
    CHECK(comm.sums[0] == y);
    CHECK(max_abs_diff(y, affine(x_r, w_r, rank == 0 ? &b : nullptr, N, half, OC)) < 1e-5);
    partials.push_back(y);
    // Backward: no communication; the bias gradient Σ_rows dout is the same on both ranks.
    auto r = randn(N * OC, 24);
    std::vector<float> dx(N * half);
    lin.bwd({.dinp = view(dx, {N, half}), .dout = view(r, {N, OC}), .inp = view(x_r, {N, half})});
    CHECK(comm.sums.size() == 1);
    for (int o = 0; o < OC; ++o) {
      double s = 0;
      for (int n = 0; n < N; ++n) s += r[n * OC + o];
      CHECK(db[o] == doctest::Approx(s));
    }
    CHECK_THROWS_AS(lin.fwd({.out = view(y, {N, OC}), .inp = view(x_r, {N, half}), .pre_gelu = view(y, {N, OC})}),
                    std::logic_error);
  }
  CHECK(max_abs_diff(sum(partials[0], partials[1]), full) < 1e-5);
}

TEST_CASE("column-parallel over two TP ranks: the input gradient is summed right after the GEMM") {
  auto be = kernels::make_cpu_backend();
  auto x = randn(N * IC, 31), w = randn(OC * IC, 32), b = randn(OC, 33), r = randn(N * OC, 34);
  constexpr int64_t half = OC / 2;
  // The full dinp = dout·W.
  std::vector<float> dx_full(N * IC, 0.0f);
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < IC; ++i) {
      double s = 0;
      for (int o = 0; o < OC; ++o) s += double(r[n * OC + o]) * w[o * IC + i];
      dx_full[n * IC + i] = float(s);
    }
  std::vector<std::vector<float>> partials;
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    // This rank's output features: rows [rank·half, (rank+1)·half) of W and b, columns of dout.
    std::vector<float> w_r(w.begin() + rank * half * IC, w.begin() + (rank + 1) * half * IC);
    std::vector<float> b_r(b.begin() + rank * half, b.begin() + (rank + 1) * half);
    auto r_r = columns(r, N, OC, rank * half, half);
    std::vector<float> dw(half * IC, 0.0f), db(half, 0.0f), y(N * half), dx(N * IC);
    RecordingComm comm(rank, 2);
    const ColumnParallelLinear lin({view(w_r, {half, IC}), view(b_r, {half})}, {view(dw, {half, IC}), view(db, {half})},
                                   *be, TpGroup{.comm = &comm, .rank = rank, .size = 2});
    lin.fwd({.out = view(y, {N, half}), .inp = view(x, {N, IC})});
    CHECK(comm.sums.empty());  // forward: no communication, every rank adds its own bias slice
    CHECK(max_abs_diff(y, affine(x, w_r, &b_r, N, IC, half)) < 1e-5);
    lin.bwd({.dinp = view(dx, {N, IC}), .dout = view(r_r, {N, half}), .inp = view(x, {N, IC})});
    REQUIRE(comm.sums.size() == 1);  // one reduction, of dinp, after the GEMM wrote it
    CHECK(comm.sums[0] == dx);
    partials.push_back(dx);
    // An element-wise epilogue on the partial dinp would be wrong: refused under TP.
    std::vector<float> pre(N * IC);
    CHECK_THROWS_AS(lin.bwd({.dinp = view(dx, {N, IC}),
                             .dout = view(r_r, {N, half}),
                             .inp = view(x, {N, IC}),
                             .gelu_pre = view(pre, {N, IC})}),
                    std::logic_error);
  }
  CHECK(max_abs_diff(sum(partials[0], partials[1]), dx_full) < 1e-4);
}

TEST_SUITE_END();
