// The dropout mask as a pure function of (stream key, element index), shared by the CPU reference
// and the CUDA kernel so that both drop exactly the same elements. Counter-based: no state is
// carried between elements, so any part of a matrix (a TP shard of its columns, a micro-batch of
// its rows, a backward pass that regenerates what the forward dropped) gets the mask the whole
// matrix would have had at those positions.
//
// Mixing: the SplitMix64 finalizer (Steele, Lea, Flood 2014), the same one core/model/rng.hpp
// uses for parameter init (it takes splitmix64 from here), applied twice to key XOR index·golden
// ratio. An element is kept when the top 24 bits of its draw are ≥ threshold = round(p·2^24): an
// integer comparison, identical on host and device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RECIPE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define RECIPE_HOST_DEVICE inline
#endif

namespace recipe::kernels {

RECIPE_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64 random bits for element `index` of the stream `key`.
RECIPE_HOST_DEVICE uint64_t counter_bits(uint64_t key, uint64_t index) {
  return splitmix64(splitmix64(key ^ (index * 0x9E3779B97F4A7C15ull)));
}

// The keep threshold of drop probability p in [0, 1): round(p·2^24).
inline uint32_t dropout_threshold(float p) { return uint32_t(std::lround(double(p) * 16777216.0)); }

RECIPE_HOST_DEVICE bool dropout_keep(uint64_t key, uint64_t index, uint32_t threshold) {
  return uint32_t(counter_bits(key, index) >> 40) >= threshold;
}

}  // namespace recipe::kernels
