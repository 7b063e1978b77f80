// Counter-based random numbers for parameter init: every value is a pure function of
// (seed, parameter name, global element index). No state is carried from one parameter to the next,
// so adding a parameter, changing the order of the flat buffer or holding only a TP shard of a
// tensor never changes the values of any other element: a shard initializes exactly like the
// serial model.
//
// Mixing: SplitMix64 (Steele, Lea, Flood 2014) finalizer applied twice to
// (stream key XOR index·golden ratio), where the stream key mixes the seed with the FNV-1a hash of
// the name. One 64-bit draw gives two 32-bit uniforms → one Box-Muller normal (cosine branch).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "kernels/dropout_mask.hpp"

namespace recipe::core::rng {

// The SplitMix64 finalizer and the counter draw live with the kernels, whose dropout mask
// (kernels/dropout_mask.hpp) hashes the same way on host and device.
using kernels::splitmix64;

inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Identifies the random stream of one named tensor under one seed.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  return splitmix64(splitmix64(seed) ^ fnv1a64(name));
}

// 64 random bits for element `index` of a stream.
inline uint64_t bits(uint64_t key, uint64_t index) { return kernels::counter_bits(key, index); }

// Uniform in (0, 1]: never 0, so log() in Box-Muller is finite.
inline double uniform_open0(uint32_t u) { return (double(u) + 1.0) * (1.0 / 4294967296.0); }

// Standard normal for element `index` of a stream.
inline double normal(uint64_t key, uint64_t index) {
  uint64_t b = bits(key, index);
  double u1 = uniform_open0(uint32_t(b >> 32));
  double u2 = uniform_open0(uint32_t(b));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

}  // namespace recipe::core::rng
