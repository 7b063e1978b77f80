// The safetensors container (private to checkpoint/):
//   u64 little-endian N | N bytes of JSON header, space-padded to a multiple of 8 | byte buffer
// The header maps each tensor key to {"dtype", "shape", "data_offsets": [begin, end]}, offsets
// relative to the start of the byte buffer; "__metadata__" is a string → string map.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt::safetensors {

struct Entry {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the byte buffer
};

// The 8-byte length prefix plus the padded JSON; the byte buffer starts right after it.
std::string encode_header(const std::map<std::string, Entry>& entries,
                          const std::map<std::string, std::string>& metadata);

struct Header {
  uint64_t data_start = 0;  // absolute file offset of the byte buffer
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> metadata;
};

// Reads and validates the header of an open file of `file_size` bytes: the length prefix fits,
// the JSON parses, every entry has a known dtype, a shape whose byte size matches its
// data_offsets, and lies inside the file. Throws CheckpointError naming `path`.
Header read_header(int fd, const std::string& path, uint64_t file_size);

}  // namespace recipe::ckpt::safetensors
