// CUDA swiglu_bwd_rebuild (SwiGLU backward + the forward's rebuild in one pass over gate_up):
// bitwise the separate CUDA swiglu_bwd and swiglu_fwd, bitwise between the 16-byte vector kernel
// and the one-element kernel (the same inputs at a misaligned address), and the CPU reference
// within bf16 rounding. Sizes cover the vector kernel with a partial last block, and F % 8 != 0
// with odd rows (the element kernel).
#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

namespace {

// A bf16 [rows, cols] view starting one element past a fresh allocation: never 16-byte aligned,
// so the op takes its one-element kernel. Freed with the scope.
struct Misaligned {
  Tensor t;
  void* base = nullptr;
  Misaligned(int64_t rows, int64_t cols) {
    base = gpu_backend().alloc(size_t(rows * cols + 1) * 2);
    t = Tensor(static_cast<char*>(base) + 2, DType::bf16, gpu_backend().device(), {rows, cols});
  }
  Misaligned(const Misaligned&) = delete;
  Misaligned& operator=(const Misaligned&) = delete;
  ~Misaligned() { gpu_backend().free(base); }
};

void check_rebuild(int64_t rows, int64_t F, uint32_t seed) {
  CAPTURE(rows);
  CAPTURE(F);
  Rng r(seed);
  auto gu = make_dual(Kind::act, {rows, 2 * F}, r.normal(size_t(rows * 2 * F), 2.f));
  auto dact = make_dual(Kind::act, {rows, F}, r.normal(size_t(rows * F)));
  // Poisoned outputs: every element must be written.
  auto dgu = make_dual(Kind::act, {rows, 2 * F}, std::vector<float>(size_t(rows * 2 * F), 7.f));
  auto act = make_dual(Kind::act, {rows, F}, std::vector<float>(size_t(rows * F), 7.f));
  cpu_backend().swiglu_bwd_rebuild({.dgate_up = dgu.c, .act = act.c, .dout = dact.c, .gate_up = gu.c});
  gpu_backend().swiglu_bwd_rebuild({.dgate_up = dgu.g, .act = act.g, .dout = dact.g, .gate_up = gu.g});
  CHECK_CLOSE(dgu, kBf16Tol);
  CHECK_CLOSE(act, kBf16Tol);

  // The separate ops, on the GPU: bitwise.
  auto dgu_sep = make_dual(Kind::act, {rows, 2 * F}, std::vector<float>(size_t(rows * 2 * F), 5.f));
  auto act_sep = make_dual(Kind::act, {rows, F}, std::vector<float>(size_t(rows * F), 5.f));
  gpu_backend().swiglu_bwd(dgu_sep.g, dact.g, gu.g);
  gpu_backend().swiglu_fwd(act_sep.g, gu.g);
  const std::vector<uint8_t> dgu_bytes = read_bytes(gpu_backend(), dgu.g), act_bytes = read_bytes(gpu_backend(), act.g);
  CHECK(dgu_bytes == read_bytes(gpu_backend(), dgu_sep.g));
  CHECK(act_bytes == read_bytes(gpu_backend(), act_sep.g));

  // Without act: dgate_up alone, bitwise the same.
  auto dgu_only = make_dual(Kind::act, {rows, 2 * F}, std::vector<float>(size_t(rows * 2 * F), 3.f));
  gpu_backend().swiglu_bwd_rebuild({.dgate_up = dgu_only.g, .dout = dact.g, .gate_up = gu.g});
  CHECK(read_bytes(gpu_backend(), dgu_only.g) == dgu_bytes);

  // The one-element kernel on the same values at misaligned addresses: bitwise the same.
  Misaligned gu_m(rows, 2 * F), dact_m(rows, F), dgu_m(rows, 2 * F), act_m(rows, F);
  gpu_backend().copy(gu_m.t, gu.g);
  gpu_backend().copy(dact_m.t, dact.g);
  gpu_backend().swiglu_bwd_rebuild({.dgate_up = dgu_m.t, .act = act_m.t, .dout = dact_m.t, .gate_up = gu_m.t});
  CHECK(read_bytes(gpu_backend(), dgu_m.t) == dgu_bytes);
  CHECK(read_bytes(gpu_backend(), act_m.t) == act_bytes);
}

}  // namespace

TEST_CASE("cuda swiglu_bwd_rebuild: bitwise swiglu_bwd + swiglu_fwd, and the CPU within bf16" *
          doctest::skip(!has_gpu())) {
  check_rebuild(64, 1024, 31);  // the vector kernel, whole blocks
  check_rebuild(33, 200, 32);   // the vector kernel, a partial last block
  check_rebuild(17, 203, 33);   // F % 8 != 0, odd rows: the one-element kernel
}

TEST_CASE("cuda swiglu_bwd_rebuild: the shape checks name the op and the tensor" * doctest::skip(!has_gpu())) {
  Rng r(34);
  auto gu = make_dual(Kind::act, {4, 16}, r.normal(64));
  auto dact = make_dual(Kind::act, {4, 8}, r.normal(32));
  auto dgu = make_dual(Kind::act, {4, 16}, r.normal(64));
  auto short_act = make_dual(Kind::act, {4, 7}, r.normal(28));
  CHECK_THROWS_WITH_AS(
      gpu_backend().swiglu_bwd_rebuild({.dgate_up = dgu.g, .act = short_act.g, .dout = dact.g, .gate_up = gu.g}),
      doctest::Contains("swiglu_bwd_rebuild"), std::invalid_argument);
}

TEST_SUITE_END();
