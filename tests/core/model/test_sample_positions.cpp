// check_sample_positions (core/model/token_rows.hpp): what a packed row's positions may hold before
// they reach the attention kernels, including the bound on samples per row that cuDNN's ragged
// attention is sized by (ModelShape::max_samples = data.max_samples_per_pack + 1).
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "core/model/token_rows.hpp"

TEST_SUITE_BEGIN("core/model");

using recipe::core::check_sample_positions;

TEST_CASE("sample positions: restarts and continuations only, at most max_samples per row") {
  // Two rows of 8: three samples and a padding run; two samples.
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 0, 0, 1, /**/ 0, 1, 2, 3, 0, 1, 2, 3};
  CHECK_NOTHROW(check_sample_positions(pos.data(), 2, 8));
  CHECK_NOTHROW(check_sample_positions(pos.data(), 2, 8, 4));
  CHECK_THROWS_WITH_AS(check_sample_positions(pos.data(), 2, 8, 3), doctest::Contains("sample row 0 holds 4 samples"),
                       std::runtime_error);
  const std::vector<int32_t> skip = {0, 1, 3, 0};
  CHECK_THROWS_WITH_AS(check_sample_positions(skip.data(), 1, 4), doctest::Contains("neither starts a sample"),
                       std::runtime_error);
  const std::vector<int32_t> late_start = {1, 2, 3, 4};
  CHECK_THROWS_AS(check_sample_positions(late_start.data(), 1, 4), std::runtime_error);
}

TEST_SUITE_END();
