#include "core/data/mock_source.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "core/data/counter_rng.hpp"

namespace recipe::data {

namespace {
constexpr uint64_t kMockStream = 0x6d6f636b;  // "mock": keeps mock keys apart from shuffle keys
}

MockSource::MockSource(int seq_length, int vocab_size, uint64_t seed, int64_t repeat_every)
    : seq_length_(seq_length),
      vocab_size_(vocab_size),
      key_(hash_combine(kMockStream, seed)),
      repeat_every_(repeat_every) {
  if (seq_length < 1)
    throw std::runtime_error("mock data: model.seq_length must be ≥ 1, got " + std::to_string(seq_length));
  if (vocab_size < 1)
    throw std::runtime_error("mock data: model.vocab_size must be ≥ 1, got " + std::to_string(vocab_size));
  if (repeat_every < 0) throw std::runtime_error("mock data: repeat period must be ≥ 0");
}

// Mock data never runs out, fixed batch or not: the trainer may read any index.
int64_t MockSource::size() const { return std::numeric_limits<int64_t>::max(); }

void MockSource::sample(int64_t idx, int32_t* out) const {
  if (idx < 0) throw std::out_of_range("mock data: negative sample index " + std::to_string(idx));
  const int64_t effective = repeat_every_ > 0 ? idx % repeat_every_ : idx;
  const uint64_t sample_key = hash_combine(key_, static_cast<uint64_t>(effective));
  const uint64_t vocab = static_cast<uint64_t>(vocab_size_);
  for (int t = 0; t <= seq_length_; ++t) {
    // 64-bit words modulo a vocabulary < 2^31: the bias is below 2^-32, far under sampling noise.
    out[t] = static_cast<int32_t>(stream_word(sample_key, static_cast<uint64_t>(t)) % vocab);
  }
}

}  // namespace recipe::data
