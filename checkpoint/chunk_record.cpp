// JSON form of a chunk record and the CRC helper.
#include "checkpoint/chunk_record.hpp"

#include <algorithm>
#include <limits>

#include <zlib.h>

namespace recipe::ckpt {

nlohmann::json chunk_to_json(const ChunkRecord& c) {
  return {{"file", c.file},           {"key", c.key},         {"offset", c.offset}, {"length", c.length},
          {"offsets", c.box.offsets}, {"sizes", c.box.sizes}, {"crc32", c.crc32}};
}

ChunkRecord chunk_from_json(const nlohmann::json& j, const std::string& where) {
  ChunkRecord c;
  c.file = json_field<std::string>(j, "file", where);
  c.key = json_field<std::string>(j, "key", where);
  c.offset = json_field<uint64_t>(j, "offset", where);
  c.length = json_field<uint64_t>(j, "length", where);
  c.box.offsets = json_field<std::vector<int64_t>>(j, "offsets", where);
  c.box.sizes = json_field<std::vector<int64_t>>(j, "sizes", where);
  c.crc32 = json_field<uint32_t>(j, "crc32", where);
  if (c.box.offsets.size() != c.box.sizes.size())
    throw CheckpointError(where + ": chunk \"" + c.key + "\" has " + std::to_string(c.box.offsets.size()) +
                          " offsets but " + std::to_string(c.box.sizes.size()) + " sizes");
  // A chunk file name is a plain name inside the checkpoint directory, never a path out of it.
  if (c.file.empty() || c.file.find('/') != std::string::npos || c.file == "." || c.file == "..")
    throw CheckpointError(where + ": chunk \"" + c.key + "\" names file \"" + c.file +
                          "\", which is not a file name inside the checkpoint directory");
  return c;
}

uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc) {
  auto p = static_cast<const Bytef*>(data);
  uLong acc = crc;
  constexpr size_t kStep = size_t(1) << 30;
  while (bytes > 0) {
    size_t n = std::min(bytes, kStep);
    acc = ::crc32(acc, p, static_cast<uInt>(n));
    p += n;
    bytes -= n;
  }
  return static_cast<uint32_t>(acc);
}

}  // namespace recipe::ckpt
