// family/rope.hpp: the one host function that makes a run's RoPE inverse-frequency table. Without
// scaling every entry is bitwise the expression the CPU kernels computed before the table existed,
// std::pow(double(θ), −2i/D), so CPU runs stay bitwise the same; with Llama 3.1's llama3 scaling it
// is transformers' table within float32 rounding; bad inputs are refused with the key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

TEST_CASE("rope_spec reads the architecture's theta and scaling") {
  ArchShape s;
  s.rope_theta = 500000.f;
  RopeSpec r = rope_spec(s);
  CHECK(r.theta == 500000.f);
  CHECK(r.scaling == RopeScaling::none);
  CHECK(rope_inv_freq(r, 64) == rope_inv_freq({.theta = 500000.f}, 64));
  s.rope_scaling = RopeScaling::llama3;
  s.rope_factor = 8;
  s.rope_low_freq_factor = 1;
  s.rope_high_freq_factor = 4;
  s.rope_original_max_positions = 8192;
  r = rope_spec(s);
  CHECK(r.scaling == RopeScaling::llama3);
  CHECK(r.factor == 8);
  CHECK(r.low_freq_factor == 1);
  CHECK(r.high_freq_factor == 4);
  CHECK(r.original_max_positions == 8192);
}

// tests/data/rope/llama3_inv_freq.json holds transformers' float32 tables
// (tests/reference/rope_llama3_ref.py: _compute_llama3_parameters) for the presets' and fixtures'
// shapes. Ours is float64 (family/rope.hpp says why): the two differ by float32's roundings of the
// power, the reciprocal and the blend, measured at most 4.1e-7 relative (3.4 float32 ulps) over these
// cases; the bound, 1e-6 (8.4 ulps), leaves room for another libm's pow and is 10^6 below what a
// missed branch does (a factor of up to 32, or the blend's weight).
TEST_CASE("rope_inv_freq with llama3 scaling equals transformers' table within float32 rounding") {
  std::ifstream in(std::string(RECIPE_SOURCE_DIR) + "/tests/data/rope/llama3_inv_freq.json");
  REQUIRE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  REQUIRE(ref["cases"].size() >= 5);
  int kept = 0, divided = 0, blended = 0;
  for (const auto& c : ref["cases"]) {
    CAPTURE(c["what"].get<std::string>());
    const RopeSpec spec{.theta = c["theta"].get<float>(),
                        .scaling = RopeScaling::llama3,
                        .factor = c["factor"].get<double>(),
                        .low_freq_factor = c["low_freq_factor"].get<double>(),
                        .high_freq_factor = c["high_freq_factor"].get<double>(),
                        .original_max_positions = c["original_max_positions"].get<int>()};
    const int D = c["head_dim"].get<int>();
    const std::vector<double> ours = rope_inv_freq(spec, D), base = rope_inv_freq({.theta = spec.theta}, D);
    const std::vector<double> theirs = c["inv_freq"].get<std::vector<double>>();
    REQUIRE(ours.size() == theirs.size());
    double worst = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      worst = std::max(worst, std::fabs(ours[i] - theirs[i]) / theirs[i]);
      // Which branch the entry took (the cases cover all three).
      if (ours[i] == base[i])
        ++kept;
      else if (ours[i] == base[i] / spec.factor)
        ++divided;
      else
        ++blended;
    }
    INFO("largest relative difference from transformers: " << worst);
    CHECK(worst < 1e-6);
  }
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(blended > 0);
}

TEST_CASE("rope_inv_freq's llama3 rule: pairs kept, divided and blended continuously between") {
  const RopeSpec r{.theta = 10000.f,
                   .scaling = RopeScaling::llama3,
                   .factor = 8,
                   .low_freq_factor = 1,
                   .high_freq_factor = 4,
                   .original_max_positions = 32};
  const std::vector<double> f = rope_inv_freq(r, 16), base = rope_inv_freq({.theta = 10000.f}, 16);
  CHECK(f[0] == base[0]);                                                  // wavelength 2π < 32/4: kept
  for (int i = 2; i < 8; ++i) CHECK(f[size_t(i)] == base[size_t(i)] / 8);  // wavelength > 32: divided
  CHECK(f[1] < base[1]);  // wavelength 19.9 in [8, 32]: between f/8 and f
  CHECK(f[1] > base[1] / 8);
  // The blend's weight s = (32/λ − 1)/3 for λ = 2π/f.
  const double s = (32 * base[1] / (2 * std::numbers::pi) - 1) / 3;
  CHECK(f[1] == doctest::Approx((1 - s) * base[1] / 8 + s * base[1]).epsilon(1e-15));
  // Still strictly decreasing: the scaling keeps the pairs' order.
  for (size_t i = 1; i < f.size(); ++i) CHECK(f[i] < f[i - 1]);
}

TEST_CASE("rope_inv_freq refuses llama3 parameters the resolver would, naming the key") {
  RopeSpec r{.theta = 500000.f,
             .scaling = RopeScaling::llama3,
             .factor = 8,
             .low_freq_factor = 1,
             .high_freq_factor = 4,
             .original_max_positions = 8192};
  CHECK_NOTHROW(rope_inv_freq(r, 128));
  RopeSpec bad = r;
  bad.factor = 0;
  CHECK_THROWS_WITH_AS(rope_inv_freq(bad, 128), doctest::Contains("model.rope_scaling_factor=0"),
                       std::invalid_argument);
  bad = r;
  bad.low_freq_factor = 4;
  bad.high_freq_factor = 1;
  CHECK_THROWS_WITH_AS(rope_inv_freq(bad, 128), doctest::Contains("0 < low < high"), std::invalid_argument);
  bad = r;
  bad.original_max_positions = 0;
  CHECK_THROWS_WITH_AS(rope_inv_freq(bad, 128), doctest::Contains("model.rope_scaling_original_max_positions=0"),
                       std::invalid_argument);
}

TEST_CASE("rope_inv_freq refuses an odd or empty head dim and a theta that is not positive and finite") {
  CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = 10000.f}, 7), doctest::Contains("even head dim"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = 10000.f}, 0), doctest::Contains("even head dim"), std::invalid_argument);
  for (const float bad : {0.f, -1.f, std::numeric_limits<float>::infinity(), std::nanf("")})
    CHECK_THROWS_WITH_AS(rope_inv_freq({.theta = bad}, 8), doctest::Contains("model.rope_theta"),
                         std::invalid_argument);
}

TEST_SUITE_END();
