// What the trainer reads: fixed-length token samples addressed by a global sample index.
//
// For micro-batch m of step s on DP rank r the trainer reads samples
//   first = s·global_batch + m·(micro_batch·dp) + r·micro_batch, ..., first + micro_batch - 1.
// Because sample(idx) is a pure function of (seed, idx), resuming at any step, or changing DP, reads
// exactly the samples an uninterrupted run would have read.
#pragma once

#include <cstdint>
#include <memory>

#include "plan/plan.hpp"

namespace recipe::data {

class SampleSource {
 public:
  virtual ~SampleSource();
  // Tokens per sample: plan.model.seq_length + 1 (inputs are [0, seq), labels are [1, seq+1)).
  virtual int seq_plus_one() const = 0;
  // Samples in one epoch (indexed data) or effectively unbounded (mock: INT64_MAX).
  virtual int64_t size() const = 0;
  // Writes seq_plus_one() int32 tokens of sample idx (idx ≥ 0) to out. Pure: no hidden state;
  // idx ≥ size() continues into further epochs, each with its own shuffle. Thread-safe.
  virtual void sample(int64_t idx, int32_t* out) const = 0;
};

// The training stream described by plan.data (kind "mock" or "indexed"). Throws std::runtime_error
// with an actionable message (missing files and how to create them, token ids beyond the vocabulary).
std::unique_ptr<SampleSource> make_train_source(const plan::Plan& plan);
// The validation stream, or nullptr when there is none: mock data without evaluation
// (trainer.eval_interval = 0), or indexed data whose split gives validation nothing.
std::unique_ptr<SampleSource> make_valid_source(const plan::Plan& plan);

}  // namespace recipe::data
