// Greedy and temperature / top-k / top-p sampling (see sampler.hpp).
#include "core/generate/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace recipe::core {

Sampler::Sampler(const SamplingOptions& options) : o_(options), rng_(options.seed) {
  if (!(o_.temperature >= 0.0) || !std::isfinite(o_.temperature))
    throw std::invalid_argument("--temperature=" + std::to_string(o_.temperature) + ": must be 0 (greedy) or positive");
  if (o_.top_k < 0)
    throw std::invalid_argument("--top-k=" + std::to_string(o_.top_k) + ": must be 0 (all) or positive");
  if (!(o_.top_p > 0.0 && o_.top_p <= 1.0))
    throw std::invalid_argument("--top-p=" + std::to_string(o_.top_p) + ": must be in (0, 1]");
}

int32_t Sampler::next(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("Sampler: no logits");
  if (o_.temperature == 0.0)
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());  // first of equal maxima

  order_.resize(logits.size());
  std::iota(order_.begin(), order_.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  size_t keep = order_.size();
  if (o_.top_k > 0 && size_t(o_.top_k) < keep) {
    keep = size_t(o_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + ptrdiff_t(keep), order_.end(), before);
  } else {
    std::sort(order_.begin(), order_.end(), before);
  }
  // Softmax of logits / temperature over the kept tokens, in double, from the largest.
  probs_.resize(keep);
  const double top = double(logits[size_t(order_[0])]);
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((double(logits[size_t(order_[i])]) - top) / o_.temperature);
    sum += probs_[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  double mass = 0.0;
  size_t nucleus = 0;
  while (nucleus < keep) {
    mass += probs_[nucleus] / sum;
    ++nucleus;
    if (mass >= o_.top_p) break;
  }
  double kept = 0.0;
  for (size_t i = 0; i < nucleus; ++i) kept += probs_[i];
  // u ∈ [0, 1) from the top 53 bits: the same draw for a seed on every platform (unlike
  // std::uniform_real_distribution, whose algorithm the standard leaves open).
  const double u = double(rng_() >> 11) * 0x1.0p-53 * kept;
  double acc = 0.0;
  for (size_t i = 0; i < nucleus; ++i) {
    acc += probs_[i];
    if (u < acc) return order_[i];
  }
  return order_[nucleus - 1];
}

}  // namespace recipe::core
