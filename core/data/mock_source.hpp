// Mock data: uniformly random tokens that are a pure function of (seed, sample index, position).
#pragma once

#include <cstdint>

#include "core/data/sample_source.hpp"

namespace recipe::data {

class MockSource : public SampleSource {
 public:
  // repeat_every > 0: sample idx reads sample (idx mod repeat_every), so every global batch is the
  // same one (data.fixed_batch: the memorization benchmark). 0 = never repeat.
  MockSource(int seq_length, int vocab_size, uint64_t seed, int64_t repeat_every = 0);

  int seq_plus_one() const override { return seq_length_ + 1; }
  int64_t size() const override;
  void sample(int64_t idx, int32_t* out) const override;

 private:
  int seq_length_;
  int vocab_size_;
  uint64_t key_;
  int64_t repeat_every_;
};

}  // namespace recipe::data
