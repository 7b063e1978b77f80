// The linear seam (core/model/linear.hpp) on the CPU backend: column- and row-parallel fwd/bwd
// against a direct computation and finite differences, the fused bias-gradient, GELU and SwiGLU
// backward paths, and
// the tensor-parallel rules (row-parallel: partial outputs summed, bias added by TP rank 0 only;
// column-parallel: dinp summed right after its GEMM, while the weight gradient's runs; under
// sequence parallelism the input gathered while dinp's GEMM runs, dinp reduce-scattered while the
// weight gradient's runs; with tp_comm_overlap and no sequence parallelism, the row-parallel
// forward in row chunks, each chunk's sum started before the next chunk's GEMM, bitwise the
// unchunked rows) with each simulated rank's communication recorded.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>
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
// exactly when and on what each reduction ran. The started forms record the same and their call;
// all_gather_start writes `gathered` (what the group's shards would give) into its output, and
// reduce_scatter_sum_start records its input like a sum. Every communication call also records a
// copy of `watch` at that moment (a weight gradient: whether its GEMM ran before or after). Nothing
// else may be called.
class RecordingComm final : public core::Comm {
 public:
  RecordingComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "recording"; }
  void all_reduce_sum(Tensor t) override {
    const float* p = t.as<float>();
    sums.emplace_back(p, p + t.numel());
    log("all_reduce_sum");
  }
  double all_reduce_sum(double) override { throw std::logic_error("unexpected"); }
  double all_reduce_max(double) override { throw std::logic_error("unexpected"); }
  void broadcast(Tensor, int) override { throw std::logic_error("unexpected"); }
  void barrier() override { throw std::logic_error("unexpected"); }
  void all_reduce_max(Tensor) override { throw std::logic_error("unexpected"); }
  void reduce_scatter_sum(Tensor, Tensor) override { throw std::logic_error("unexpected"); }
  void all_gather(Tensor, Tensor) override { throw std::logic_error("unexpected"); }
  void send_recv(Tensor, int, Tensor, int) override { throw std::logic_error("unexpected"); }
  Op all_reduce_sum_start(Tensor t) override {
    const float* p = t.as<float>();
    sums.emplace_back(p, p + t.numel());
    return started("all_reduce_sum_start");
  }
  Op reduce_scatter_sum_start(Tensor, Tensor in) override {
    const float* p = in.as<float>();
    sums.emplace_back(p, p + in.numel());
    return started("reduce_scatter_sum_start");
  }
  Op all_gather_start(Tensor out, Tensor) override {
    REQUIRE(size_t(out.numel()) == gathered.size());
    std::copy(gathered.begin(), gathered.end(), out.as<float>());
    return started("all_gather_start");
  }
  void wait(Op op) override { log("wait " + std::to_string(op.seq)); }
  void wait_all() override { log("wait_all"); }

  std::vector<std::vector<float>> sums;  // one entry per sum (or reduce-scatter input), in call order
  std::vector<std::string> calls;        // every communication call, in order
  std::vector<std::vector<float>> watched;
  const std::vector<float>* watch = nullptr;
  std::vector<float> gathered;

 private:
  Op started(const std::string& what) {
    log(what + " " + std::to_string(next_));
    return {next_++};
  }
  void log(const std::string& what) {
    calls.push_back(what);
    if (watch) watched.push_back(*watch);
  }
  int rank_, size_;
  int64_t next_ = 0;
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

// A parameter (or input), perturbed by the finite differences, and its analytic gradient.
struct Checked {
  const char* name;
  std::vector<float>& param;
  const std::vector<float>& grad;
};

// The MLP tests' finite-difference check: Σ r ⊙ y with y from `forward` (fc1 → activation → fc2),
// at the step and tolerance that suit two f32 linears around a nonlinearity.
template <class Forward>
void check_mlp_gradients(Forward& forward, const std::vector<float>& y, const std::vector<float>& r,
                         std::initializer_list<Checked> checked) {
  auto objective = [&] {
    forward();
    return weighted_sum(y, r);
  };
  const kernels::test::GradCheck gc{.step = 1e-2f, .rtol = 2e-2, .atol = 2e-3};
  for (const Checked& c : checked) check_gradient(c.name, c.param, c.grad, objective, gc);
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
    check_mlp_gradients(forward, y, r,
                        {{"dx", x, dx}, {"dw1", w1, dw1}, {"db1", b1, db1}, {"dw2", w2, dw2}, {"db2", b2, db2}});
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
    check_mlp_gradients(forward, y, r,
                        {{"dx", x, dx}, {"dw1", w1, dw1}, {"db1", b1, db1}, {"dw2", w2, dw2}, {"db2", b2, db2}});
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

TEST_CASE(
    "row-parallel forward with TP comm overlap (no SP): row chunks pipelined with their all-reduces, bitwise the "
    "unchunked output") {
  auto be = kernels::make_cpu_backend();
  constexpr int64_t half = IC / 2;
  constexpr float kUnwritten = 12345.0f;
  auto x = randn(N * IC, 51), w = randn(OC * IC, 52), b = randn(OC, 53);
  // fc2's SwiGLU input: gate_up [N, 2·half] of this rank's FFN columns.
  auto gate_up = randn(N * 2 * half, 54);
  for (int rank = 0; rank < 2; ++rank) {
    auto w_r = columns(w, OC, IC, rank * half, half), x_r = columns(x, N, IC, rank * half, half);
    std::vector<float> dw(OC * half), db(OC);
    const LinearTensors weights{.w = view(w_r, {OC, half}), .b = view(b, {OC})},
        grads{.w = view(dw, {OC, half}), .b = view(db, {OC})};
    // The blocking forward: one GEMM, one all-reduce (recorded, not summed: the partials).
    RecordingComm plain_comm(rank, 2);
    std::vector<float> y_plain(N * OC), act_plain(N * half);
    const RowParallelLinear plain(weights, grads, *be, TpGroup{.comm = &plain_comm, .rank = rank, .size = 2});
    plain.fwd({.out = view(y_plain, {N, OC}), .inp = view(x_r, {N, half})});
    REQUIRE(plain_comm.calls == std::vector<std::string>{"all_reduce_sum"});
    // 7 chunks of 5 rows: one row each. 3 chunks: rows 0..0, 1..2, 3..4 (i·N/k).
    for (int chunks : {1, 2, 3, 5, 7}) {
      CAPTURE(rank);
      CAPTURE(chunks);
      RecordingComm comm(rank, 2);
      std::vector<float> y(N * OC, kUnwritten);
      comm.watch = &y;
      const RowParallelLinear lin(
          weights, grads, *be,
          TpGroup{.comm = &comm, .rank = rank, .size = 2, .overlap = true, .overlap_chunks = chunks});
      lin.fwd({.out = view(y, {N, OC}), .inp = view(x_r, {N, half})});
      CHECK(y == y_plain);  // every row is the unchunked GEMM's row, bias on rank 0 only
      const int k = std::min<int>(chunks, int(N));
      std::vector<std::string> want;
      want.reserve(2 * size_t(k) + 1);
      for (int i = 0; i < k; ++i) want.push_back("all_reduce_sum_start " + std::to_string(i));
      for (int i = 0; i < k; ++i) want.push_back("wait " + std::to_string(i));
      want.emplace_back("wait_all");
      CHECK(comm.calls == want);
      REQUIRE(comm.sums.size() == size_t(k));
      REQUIRE(comm.watched.size() == want.size());
      int64_t first = 0;
      for (int i = 0; i < k; ++i) {
        const int64_t end = (i + 1) * N / k;
        CHECK(end > first);  // no empty chunk
        // Chunk i's sum starts on exactly its rows, once they are written and before the next
        // chunk's GEMM has run (its rows still unwritten).
        CHECK(comm.sums[size_t(i)] == std::vector<float>(y_plain.begin() + first * OC, y_plain.begin() + end * OC));
        const std::vector<float>& seen = comm.watched[size_t(i)];
        CHECK(std::equal(seen.begin(), seen.begin() + end * OC, y_plain.begin()));
        CHECK(std::all_of(seen.begin() + end * OC, seen.end(), [](float v) { return v == kUnwritten; }));
        first = end;
      }
      CHECK(first == N);
      // fc2 after the SwiGLU (swiglu_pre): the input is materialised over all rows, then chunked.
      RecordingComm swiglu_comm(rank, 2);
      std::vector<float> act(N * half, kUnwritten), y_swiglu(N * OC);
      const RowParallelLinear fc2(
          weights, grads, *be,
          TpGroup{.comm = &swiglu_comm, .rank = rank, .size = 2, .overlap = true, .overlap_chunks = chunks});
      fc2.fwd(
          {.out = view(y_swiglu, {N, OC}), .inp = view(act, {N, half}), .swiglu_pre = view(gate_up, {N, 2 * half})});
      plain.fwd({.out = view(y_plain, {N, OC}),
                 .inp = view(act_plain, {N, half}),
                 .swiglu_pre = view(gate_up, {N, 2 * half})});
      CHECK(act == act_plain);
      CHECK(y_swiglu == y_plain);
      CHECK(swiglu_comm.sums.size() == size_t(k));
      plain.fwd({.out = view(y_plain, {N, OC}), .inp = view(x_r, {N, half})});  // back to the x output
    }
  }
}

TEST_CASE(
    "column-parallel over two TP ranks: the input gradient is summed right after its GEMM, under the weight "
    "gradient's") {
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
    comm.watch = &dw;
    const ColumnParallelLinear lin({view(w_r, {half, IC}), view(b_r, {half})}, {view(dw, {half, IC}), view(db, {half})},
                                   *be, TpGroup{.comm = &comm, .rank = rank, .size = 2});
    lin.fwd({.out = view(y, {N, half}), .inp = view(x, {N, IC})});
    CHECK(comm.sums.empty());  // forward: no communication, every rank adds its own bias slice
    CHECK(max_abs_diff(y, affine(x, w_r, &b_r, N, IC, half)) < 1e-5);
    lin.bwd({.dinp = view(dx, {N, IC}), .dout = view(r_r, {N, half}), .inp = view(x, {N, IC})});
    REQUIRE(comm.sums.size() == 1);  // one reduction, of dinp, after the GEMM wrote it
    CHECK(comm.sums[0] == dx);
    // Started, then the weight-gradient GEMM ran (dW was still zero at the start, complete at the
    // wait): the reduction overlaps it.
    CHECK(comm.calls == std::vector<std::string>{"all_reduce_sum_start 0", "wait 0", "wait_all"});
    REQUIRE(comm.watched.size() == 3);
    CHECK(comm.watched[0] == std::vector<float>(dw.size(), 0.0f));
    CHECK(comm.watched[1] == dw);
    // dW += doutᵀ·x for this rank's rows of W.
    std::vector<float> dw_want(size_t(half) * IC);
    for (int o = 0; o < half; ++o)
      for (int i = 0; i < IC; ++i) {
        double s = 0;
        for (int n = 0; n < N; ++n) s += double(r_r[n * half + o]) * x[n * IC + i];
        dw_want[o * IC + i] = float(s);
      }
    CHECK(max_abs_diff(dw, dw_want) < 1e-5);
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

TEST_CASE(
    "column-parallel under sequence parallelism: the input's gather runs under the dinp GEMM, dinp's "
    "reduce-scatter under the weight gradient's") {
  auto be = kernels::make_cpu_backend();
  constexpr int64_t half = OC / 2, rows = 2 * N;  // two TP ranks: N rows each, 2N whole rows
  auto x_full = randn(rows * IC, 41), w = randn(OC * IC, 42), b = randn(half, 43), r = randn(rows * OC, 44);
  constexpr int64_t rank = 1;
  std::vector<float> w_r(w.begin() + rank * half * IC, w.begin() + (rank + 1) * half * IC);
  auto r_r = columns(r, rows, OC, rank * half, half);  // dout: every row, this rank's output features
  std::vector<float> x_r(x_full.begin() + rank * N * IC, x_full.begin() + (rank + 1) * N * IC);
  std::vector<float> dw(half * IC, 0.0f), db(half, 0.0f), dx(int64_t(N) * IC, -1.0f);
  std::vector<float> full(rows * IC, 0.0f), full_grad(rows * IC, 0.0f);
  const core::SequenceParallelScratch sp{.full = view(full, {rows, IC}), .full_grad = view(full_grad, {rows, IC})};
  RecordingComm comm(rank, 2);
  comm.watch = &dw;
  comm.gathered = x_full;
  const ColumnParallelLinear lin({.w = view(w_r, {half, IC}), .b = view(b, {half})},
                                 {.w = view(dw, {half, IC}), .b = view(db, {half})}, *be,
                                 TpGroup{.comm = &comm, .rank = rank, .size = 2, .sp = &sp});
  lin.bwd({.dinp = view(dx, {N, IC}), .dout = view(r_r, {rows, half}), .inp = view(x_r, {N, IC})});
  // Gather started; dinp GEMM; reduce-scatter started; the weight GEMM only after the gather's wait
  // (dW still zero there) and before the reduce-scatter's (dW complete there).
  CHECK(comm.calls ==
        std::vector<std::string>{"all_gather_start 0", "reduce_scatter_sum_start 1", "wait 0", "wait 1", "wait_all"});
  REQUIRE(comm.watched.size() == 5);
  CHECK(comm.watched[2] == std::vector<float>(dw.size(), 0.0f));
  CHECK(comm.watched[3] == dw);
  // The reduce-scatter's input is this rank's partial dinp of every row, dout·W_r.
  REQUIRE(comm.sums.size() == 1);
  std::vector<float> dx_want(rows * IC);
  for (int n = 0; n < rows; ++n)
    for (int i = 0; i < IC; ++i) {
      double s = 0;
      for (int o = 0; o < half; ++o) s += double(r_r[n * half + o]) * w_r[o * IC + i];
      dx_want[n * IC + i] = float(s);
    }
  CHECK(max_abs_diff(comm.sums[0], dx_want) < 1e-5);
  // dW += doutᵀ·x over every (gathered) row; db += Σ_rows dout.
  std::vector<float> dw_want(half * IC), db_want(half);
  for (int o = 0; o < half; ++o) {
    double sb = 0;
    for (int n = 0; n < rows; ++n) sb += r_r[n * half + o];
    db_want[o] = float(sb);
    for (int i = 0; i < IC; ++i) {
      double s = 0;
      for (int n = 0; n < rows; ++n) s += double(r_r[n * half + o]) * x_full[n * IC + i];
      dw_want[o * IC + i] = float(s);
    }
  }
  CHECK(max_abs_diff(dw, dw_want) < 1e-5);
  CHECK(max_abs_diff(db, db_want) < 1e-5);
}

TEST_SUITE_END();
