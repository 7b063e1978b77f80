// Choosing the next token from a row of logits: greedy (temperature 0) or sampling with
// temperature, top-k and top-p (nucleus), from a seeded generator so that a seed reproduces a
// generation on any machine.
//
// Sampling: logits / temperature, sorted by descending value (ties: lower id first); the first
// top_k kept (0: all); softmax over them (double); the smallest prefix whose probability reaches
// top_p kept (at least one token); one draw u ∈ [0, 1) from the generator picks by cumulative
// probability. So top_p → 0 (or top_k = 1) is greedy.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace recipe::core {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy (argmax; ties: lower id)
  int top_k = 0;             // 0: no limit
  double top_p = 1.0;        // (0, 1]
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws std::invalid_argument naming the option (--temperature, --top-k, --top-p) for values
  // outside their ranges.
  explicit Sampler(const SamplingOptions& options);
  int32_t next(std::span<const float> logits);

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

}  // namespace recipe::core
