// The sampler: greedy is the argmax (first of ties); a seed reproduces a sampled sequence and
// another seed gives another; top_k = 1 and a tiny top_p are greedy; top_k / top_p never pick
// outside their sets; temperature sampling follows softmax(logits / temperature) (frequencies over
// many draws); bad options are refused naming the flag.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/generate/sampler.hpp"

TEST_SUITE_BEGIN("core/generate");

using recipe::core::Sampler;
using recipe::core::SamplingOptions;

namespace {

std::vector<std::vector<float>> random_rows(int rows, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<std::vector<float>> out(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(vocab)));
  for (auto& r : out)
    for (auto& x : r) x = d(g);
  return out;
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

TEST_CASE("greedy sampling is the argmax, first of equal maxima") {
  Sampler s({});
  CHECK(s.next(std::vector<float>{0.f, 3.f, -1.f, 3.f}) == 1);
  for (const auto& row : random_rows(20, 50, 1)) CHECK(s.next(row) == argmax(row));
}

TEST_CASE("a seed reproduces a sampled sequence; another seed gives another") {
  const auto rows = random_rows(200, 50, 2);
  auto draw = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0, .top_k = 20, .top_p = 0.9, .seed = seed});
    std::vector<int> ids;
    for (const auto& r : rows) ids.push_back(s.next(r));
    return ids;
  };
  CHECK(draw(5) == draw(5));
  CHECK(draw(5) != draw(6));
}

TEST_CASE("top_k = 1 and a tiny top_p are greedy; top_k and top_p stay inside their sets") {
  const auto rows = random_rows(100, 40, 3);
  Sampler k1({.temperature = 1.5, .top_k = 1, .seed = 1}), p0({.temperature = 1.5, .top_p = 1e-9, .seed = 1});
  Sampler k3({.temperature = 5.0, .top_k = 3, .seed = 2});
  for (const auto& r : rows) {
    CHECK(k1.next(r) == argmax(r));
    CHECK(p0.next(r) == argmax(r));
    std::vector<float> sorted = r;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    CHECK(r[size_t(k3.next(r))] >= sorted[2]);
  }
  // probabilities 0.5, 0.3, 0.2: top_p = 0.6 keeps the first two only.
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler p6({.temperature = 1.0, .top_p = 0.6, .seed = 3});
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < 2000; ++i) ++seen[p6.next(logits)];
  CHECK(seen[2] == 0);
  CHECK(seen[0] > seen[1]);
  CHECK(seen[1] > 0);
}

TEST_CASE("temperature sampling follows softmax(logits / temperature)") {
  const std::vector<float> logits{0.f, 1.f, 2.f, -1.f};
  for (double temperature : {1.0, 0.5, 2.0}) {
    Sampler s({.temperature = temperature, .seed = 11});
    constexpr int kDraws = 40000;
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++count[size_t(s.next(logits))];
    double z = 0;
    for (float x : logits) z += std::exp(x / temperature);
    for (size_t i = 0; i < logits.size(); ++i) {
      const double want = std::exp(logits[i] / temperature) / z, got = double(count[i]) / kDraws;
      INFO("temperature " << temperature << ", id " << i << ": " << got << " vs " << want);
      CHECK(std::fabs(got - want) < 0.01);  // ~4 standard errors at 40000 draws
    }
  }
}

TEST_CASE("sampling options out of range are refused, naming the flag") {
  CHECK_THROWS_WITH_AS(Sampler({.temperature = -1.0}), doctest::Contains("--temperature"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Sampler({.top_k = -2}), doctest::Contains("--top-k"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Sampler({.top_p = 0.0}), doctest::Contains("--top-p"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Sampler({.top_p = 1.5}), doctest::Contains("--top-p"), std::invalid_argument);
}

TEST_SUITE_END();
