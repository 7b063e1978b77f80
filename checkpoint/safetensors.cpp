// Encoding and validating safetensors headers.
#include "checkpoint/safetensors.hpp"

#include <limits>

#include <nlohmann/json.hpp>

#include "checkpoint/box_math.hpp"
#include "checkpoint/chunk_record.hpp"
#include "checkpoint/file_io.hpp"

namespace recipe::ckpt::safetensors {

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(1) << 30;  // a sanity bound against a garbage prefix

void put_u64_le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string encode_header(const std::map<std::string, Entry>& entries,
                          const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  for (const auto& [key, e] : entries) {
    header[key] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size());
  put_u64_le(out, text.size());
  out += text;
  return out;
}

Header read_header(int fd, const std::string& path, uint64_t file_size) {
  auto corrupt = [&](const std::string& what) {
    return CheckpointError(path + ": corrupt safetensors header: " + what);
  };
  if (file_size < 8)
    throw CheckpointError(path + ": truncated: " + std::to_string(file_size) +
                          " bytes, too short for a safetensors header (the checkpoint is partial or corrupt)");
  unsigned char prefix[8];
  io::read_exact(fd, path, 0, prefix, 8);
  const uint64_t header_len = get_u64_le(prefix);
  if (header_len > file_size - 8 || header_len > kMaxHeaderBytes)
    throw corrupt("header length " + std::to_string(header_len) + " does not fit in the " + std::to_string(file_size) +
                  "-byte file");
  std::string text(static_cast<size_t>(header_len), '\0');
  io::read_exact(fd, path, 8, text.data(), text.size());

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("JSON does not parse: ") + e.what());
  }
  if (!j.is_object()) throw corrupt("not a JSON object");

  Header h;
  h.data_start = 8 + header_len;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw corrupt("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) throw corrupt("__metadata__ value of \"" + mk + "\" is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor \"" + key + "\"";
    Entry e;
    e.dtype = parse_dtype(json_field<std::string>(value, "dtype", where), where);
    e.shape = json_field<std::vector<int64_t>>(value, "shape", where);
    auto offsets = json_field<std::vector<uint64_t>>(value, "data_offsets", where);
    if (offsets.size() != 2) throw corrupt("tensor \"" + key + "\": data_offsets must be [begin, end]");
    e.begin = offsets[0];
    e.end = offsets[1];
    for (int64_t s : e.shape)
      if (s < 0) throw corrupt("tensor \"" + key + "\": negative size in shape " + shape_to_string(e.shape));
    if (e.begin > e.end || e.end > data_size)
      throw corrupt("tensor \"" + key + "\": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] outside the " + std::to_string(data_size) + "-byte data buffer");
    const uint64_t expected = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    if (e.end - e.begin != expected)
      throw corrupt("tensor \"" + key + "\": shape " + shape_to_string(e.shape) + " of " + dtype_name(e.dtype) +
                    " needs " + std::to_string(expected) + " bytes but data_offsets span " +
                    std::to_string(e.end - e.begin));
    h.entries.emplace(key, std::move(e));
  }
  return h;
}

}  // namespace recipe::ckpt::safetensors
