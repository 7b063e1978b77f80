// CUDA dropout against the CPU reference: the same key and positions drop the same elements and
// give the same values, bit for bit (f32; bf16 after the one rounding both make), for a block of a
// larger matrix (a TP shard's columns, a micro-batch's rows) and with accumulate. Skipped where no
// GPU is visible (CI).
#include <doctest/doctest.h>

#include <vector>

#include "tests/kernels/cuda/cuda_test_util.hpp"

TEST_SUITE_BEGIN("kernels/cuda");

using namespace recipe::kernels;
using namespace recipe::kernels::testing;

TEST_CASE("cuda dropout equals the CPU reference bit for bit (f32 and bf16, plain and accumulate)" *
          doctest::skip(!has_gpu())) {
  Backend &cpu = cpu_backend(), &gpu = gpu_backend();
  const int64_t R = 37, C = 200;
  Rng rng(11);
  for (Kind kind : {Kind::f32, Kind::act}) {
    for (bool accumulate : {false, true}) {
      CAPTURE(int(kind));
      CAPTURE(accumulate);
      Dual x = make_dual(kind, {R, C}, rng.normal(size_t(R * C)));
      Dual y = make_dual(kind, {R, C}, rng.normal(size_t(R * C)));
      DropoutArgs a{.p = 0.1f,
                    .key = 0x1234abcdull,
                    .first_row = 1000003,
                    .row_stride = 4 * C,
                    .first_col = 2 * C,
                    .accumulate = accumulate};
      a.out = y.c, a.inp = x.c;
      cpu.dropout(a);
      a.out = y.g, a.inp = x.g;
      gpu.dropout(a);
      const std::vector<float> want = read(cpu, y.c), got = read(gpu, y.g);
      REQUIRE(want.size() == got.size());
      int64_t differ = 0, zeros = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const float w = y.g.dtype == DType::bf16 ? round_bf16(want[i]) : want[i];
        differ += w != got[i];
        zeros += got[i] == 0.0f;
      }
      CHECK(differ == 0);
      if (!accumulate) CHECK(zeros > 0);
    }
  }
}

TEST_SUITE_END();
