// What the trainer reads: fixed-length token samples addressed by a global sample index.
//
// For micro-batch m of step s on DP rank r the trainer reads samples
//   first = s·global_batch + m·(micro_batch·dp) + r·micro_batch, ..., first + micro_batch - 1.
// Because sample(idx) is a pure function of (seed, idx), resuming at any step, or changing DP, reads
// exactly the samples an uninterrupted run would have read.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::data {

// One training sequence of T = seq_plus_one() - 1 positions as the model consumes it: the loss
// mask as targets of -1, and the samples packed in it (data.kind=sft). Sources without masks give
// one sample over the whole row: targets = the next token, positions 0..T-1, cu_seqlens {0, T}.
struct Sequence {
  std::vector<int32_t> inputs;     // [T] token ids
  std::vector<int32_t> targets;    // [T] the id to predict at t, or -1: no loss (untrained token, padding,
                                   // or the last position of a sample, which would predict the next sample)
  std::vector<int32_t> positions;  // [T] position of t inside its sample, restarting at 0; padding 0, 1, ...
  // cu_seqlens-style sample boundaries: {0, end of sample 0, end of sample 1, ..., used}; sample i is
  // [cu_seqlens[i], cu_seqlens[i+1]); positions [used, T) are padding (inputs = the pad id).
  std::vector<int32_t> cu_seqlens;
};

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

  // True when sequence() masks targets and packs samples (data.kind=sft): the trainer then reads
  // sequence() and normalizes the loss by trained_tokens() instead of all T positions.
  virtual bool loss_masked() const { return false; }
  // Sample idx as a Sequence (pure, thread-safe like sample()). Default: from sample().
  virtual void sequence(int64_t idx, Sequence& out) const;
  // Number of targets ≥ 0 in sequence(idx). Default: T.
  virtual int64_t trained_tokens(int64_t idx) const;
};

// The training stream described by plan.data (kind "mock" or "indexed"). Throws std::runtime_error
// with an actionable message (missing files and how to create them, token ids beyond the vocabulary).
std::unique_ptr<SampleSource> make_train_source(const plan::Plan& plan);
// The validation stream, or nullptr when there is none: mock data without evaluation
// (trainer.eval_interval = 0), or indexed data whose split gives validation nothing.
std::unique_ptr<SampleSource> make_valid_source(const plan::Plan& plan);

}  // namespace recipe::data
