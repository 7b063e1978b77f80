// One saved chunk as the shard index (shard-<rank>.json) and metadata.json describe it, plus the
// dtype-name and CRC helpers both sides share (private to checkpoint/).
//
// shard-<rank>.json:
//   {"format": "recipe-checkpoint-shard", "version": 1, "rank": r, "file": "shard-r.safetensors",
//    "file_size": bytes, "tensors": {name: {"global_shape", "dtype"}, ...} (every tensor the rank
//    has a piece of, even an empty one), "chunks": [{"tensor": name, <chunk fields>}, ...]}
// metadata.json:
//   {"format": "recipe-checkpoint", "version": 1, "world_size": W,
//    "files": {"shard-r.safetensors": {"size": bytes}, ...},
//    "tensors": {name: {"global_shape": [...], "dtype": "F32", "chunks": [<chunk fields>, ...]}}}
// chunk fields: "file", "key" (safetensors key), "offset" (absolute byte offset in the file),
//   "length" (bytes), "offsets" / "sizes" (the box in global coordinates), "crc32" (zlib).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt {

inline constexpr const char* kFormat = "recipe-checkpoint";
inline constexpr const char* kShardFormat = "recipe-checkpoint-shard";
inline constexpr int kVersion = 1;

struct ChunkRecord {
  std::string file;
  std::string key;
  uint64_t offset = 0;
  uint64_t length = 0;
  Box box;
  uint32_t crc32 = 0;
};

nlohmann::json chunk_to_json(const ChunkRecord& chunk);
// Throws CheckpointError "<where>: ..." when a field is missing or has the wrong type.
ChunkRecord chunk_from_json(const nlohmann::json& j, const std::string& where);

// Inverse of dtype_name; throws CheckpointError "<where>: unsupported dtype ...".
DType parse_dtype(const std::string& name, const std::string& where);

// Reads j[key] as T; throws CheckpointError "<where>: ..." naming the key when absent or mistyped.
template <typename T>
T json_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw CheckpointError(where + ": missing field \"" + key + "\"");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw CheckpointError(where + ": field \"" + key + "\" has the wrong type (" + j.at(key).dump() + ")");
  }
}

// zlib CRC32 of a buffer of any size (zlib's length argument is 32-bit).
uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc = 0);

std::string shard_file_name(int rank);   // "shard-<rank>.safetensors"
std::string shard_index_name(int rank);  // "shard-<rank>.json"

}  // namespace recipe::ckpt
