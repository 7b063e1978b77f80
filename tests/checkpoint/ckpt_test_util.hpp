// Helpers of the checkpoint tests: global reference tensors, the slices a simulated rank holds,
// and a "world" of ranks saving through write_shard + commit.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt::testing {

// A global tensor as raw bytes (row-major), with distinct bit patterns per element.
struct RefTensor {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  std::vector<char> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

inline RefTensor make_ref(std::vector<int64_t> shape, DType dtype, uint32_t seed) {
  RefTensor t{std::move(shape), dtype, {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  const int64_t n = t.numel();
  t.bytes.resize(static_cast<size_t>(n) * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    float f = dist(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (dtype == DType::f32) {
      std::memcpy(t.bytes.data() + 4 * i, &u, 4);
    } else {
      uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

// The elements of `box` (global coordinates) in row-major order of the box, as raw bytes.
inline std::vector<char> slice(const RefTensor& t, const Box& box) {
  const size_t elem = dtype_size(t.dtype);
  const size_t ndim = t.shape.size();
  std::vector<char> out;
  const int64_t n = box.numel();
  out.reserve(static_cast<size_t>(n) * elem);
  std::vector<int64_t> idx(ndim, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (size_t d = 0; d < ndim; ++d) flat = flat * t.shape[d] + box.offsets[d] + idx[d];
    out.insert(out.end(), t.bytes.begin() + flat * elem, t.bytes.begin() + (flat + 1) * elem);
    for (size_t d = ndim; d-- > 0;) {
      if (++idx[d] < box.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline Box whole(const std::vector<int64_t>& shape) { return Box{std::vector<int64_t>(shape.size(), 0), shape}; }

// One rank's contribution: the rank holds `held` of the tensor and saves its run [begin, end).
// The piece's data points into `storage`, which must outlive the write.
struct RankPieces {
  std::vector<SavePiece> pieces;
  std::vector<std::vector<char>> storage;

  void add(const std::string& name, const RefTensor& t, const Box& held, int64_t begin, int64_t end) {
    std::vector<char> held_bytes = slice(t, held);
    const size_t elem = dtype_size(t.dtype);
    storage.emplace_back(held_bytes.begin() + begin * elem, held_bytes.begin() + end * elem);
    SavePiece p;
    p.name = name;
    p.global_shape = t.shape;
    p.held = held;
    p.flat_begin = begin;
    p.flat_end = end;
    p.dtype = t.dtype;
    p.data = storage.back().data();
    pieces.push_back(std::move(p));
  }
  void add_all(const std::string& name, const RefTensor& t, const Box& held) { add(name, t, held, 0, held.numel()); }
};

// Every rank writes its shard into the staging dir of final_dir, then one commit.
inline void save_world(const std::string& final_dir, std::vector<RankPieces>& ranks, CommitOptions options = {}) {
  const std::string staging = staging_dir_of(final_dir);
  for (size_t r = 0; r < ranks.size(); ++r) write_shard(staging, static_cast<int>(r), ranks[r].pieces);
  options.world_size = static_cast<int>(ranks.size());
  commit(staging, final_dir, options);
}

// doctest::Contains takes a C string; it copies it, so a temporary std::string is fine.
inline doctest::Contains contains(const std::string& s) { return doctest::Contains(s.c_str()); }

}  // namespace recipe::ckpt::testing
