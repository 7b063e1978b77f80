// family/rope.hpp: the one host function that makes a run's RoPE inverse-frequency table. Without
// scaling every entry is bitwise the expression the CPU kernels computed before the table existed,
// std::pow(double(θ), −2i/D), so CPU runs stay bitwise the same; bad inputs are refused with the key.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "family/rope.hpp"

TEST_SUITE_BEGIN("family");

using namespace recipe::core;

TEST_CASE("rope_inv_freq without scaling is theta^(-2i/D), bitwise the CPU kernels' former formula") {
  for (const float theta : {10000.f, 500000.f, 1000000.f, 12345.678f})
    for (const int D : {2, 8, 12, 64, 128, 256}) {
      CAPTURE(theta);
      CAPTURE(D);
      const std::vector<double> f = rope_inv_freq({.theta = theta, .scaling = RopeScaling::none}, D);
      REQUIRE(f.size() == size_t(D / 2));
      for (int i = 0; i < D / 2; ++i) {
        CHECK(f[size_t(i)] == std::pow(double(theta), -2.0 * i / D));  // exact: the same expression
        if (i > 0) CHECK(f[size_t(i)] < f[size_t(i) - 1]);             // lower frequency per pair
      }
      CHECK(f[0] == 1.0);  // pair 0 turns by its position in radians
    }
}

TEST_CASE("rope_spec reads the architecture's theta, with no scaling") {
  ArchShape s;
  s.rope_theta = 500000.f;
  const RopeSpec r = rope_spec(s);
  CHECK(r.theta == 500000.f);
  CHECK(r.scaling == RopeScaling::none);
  CHECK(rope_inv_freq(r, 64) == rope_inv_freq({.theta = 500000.f}, 64));
}

TEST_CASE("rope_inv_freq refuses an odd or empty head dim and a theta that is not positive and finite") {
  CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = 10000.f}, 7), doctest::Contains("even head dim"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = 10000.f}, 0), doctest::Contains("even head dim"), std::invalid_argument);
  for (const float bad : {0.f, -1.f, std::numeric_limits<float>::infinity(), std::nanf("")})
    CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = bad}, 8), doctest::Contains("model.rope_theta"),
                         std::invalid_argument);
}

TEST_SUITE_END();
