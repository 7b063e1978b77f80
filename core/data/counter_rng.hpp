// Counter-based randomness for the data pipeline.
//
// Every random choice the loader makes (mock tokens, document and sample shuffles) is a pure
// function of a key built from (seed, stream, epoch, index): there is no sequential generator state
// that a resumed or resharded run would have to replay. The mixing function is SplitMix64's
// finalizer, which is a bijection on 64-bit words with good avalanche; it is spelled out here so the
// streams are identical on every platform and standard library (std::*_distribution are not).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace recipe::data {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Order-sensitive combination of two words into a new key.
inline uint64_t hash_combine(uint64_t key, uint64_t value) {
  return mix64(key ^ (mix64(value) + 0x632be59bd9b4e019ULL + (key << 6) + (key >> 2)));
}

// Word `counter` of the stream named by `key`.
inline uint64_t stream_word(uint64_t key, uint64_t counter) { return mix64(key + counter * 0xd1b54a32d192ed03ULL); }

// A stream of words for one shuffle; a plain counter over stream_word, so it is reproducible from key.
class CounterStream {
 public:
  explicit CounterStream(uint64_t key) : key_(key) {}
  uint64_t next() { return stream_word(key_, counter_++); }
  // Uniform in [0, n), n > 0: rejection of the biased tail keeps it exact.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

// Fisher-Yates shuffle driven by the stream named by `key`.
template <class T>
void shuffle_with_key(std::vector<T>& v, uint64_t key) {
  CounterStream rng(key);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace recipe::data
