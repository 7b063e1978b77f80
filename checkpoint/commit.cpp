// Phase 2 of a save: merge the shard indexes, check the cover, publish atomically, prune.
#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <system_error>

#include "checkpoint/box_math.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/chunk_record.hpp"
#include "checkpoint/file_io.hpp"
#include "checkpoint/prune.hpp"

namespace recipe::ckpt {

namespace {

namespace fs = std::filesystem;

struct MergedTensor {
  std::vector<int64_t> global_shape;
  DType dtype = DType::f32;
  std::string first_file;  // the shard that first described the tensor, for disagreement messages
  std::vector<ChunkRecord> chunks;
};

struct ShardIndex {
  std::string file;
  uint64_t file_size = 0;
};

// Reads shard-<rank>.json and adds its chunks to `tensors`.
ShardIndex merge_shard_index(const fs::path& staging, int rank, std::map<std::string, MergedTensor>& tensors) {
  const std::string index_path = (staging / shard_index_name(rank)).string();
  const std::string file = shard_file_name(rank);
  const std::string file_path = (staging / file).string();
  std::error_code ec;
  if (!fs::exists(index_path, ec) || !fs::exists(file_path, ec))
    throw CheckpointError((fs::exists(index_path, ec) ? file_path : index_path) + ": missing shard of rank " +
                          std::to_string(rank) + " (did every rank finish write_shard before the commit?)");
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(io::read_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(index_path + ": shard index does not parse: " + e.what());
  }
  if (!index.is_object() || index.value("format", "") != std::string(kShardFormat))
    throw CheckpointError(index_path + ": not a shard index (format is not \"" + kShardFormat + "\")");
  if (json_field<int>(index, "version", index_path) != kVersion)
    throw CheckpointError(index_path + ": shard index version " + index.at("version").dump() + ", expected " +
                          std::to_string(kVersion));
  if (json_field<int>(index, "rank", index_path) != rank || json_field<std::string>(index, "file", index_path) != file)
    throw CheckpointError(index_path + ": describes rank " + index.at("rank").dump() + " / " + index.at("file").dump() +
                          ", expected rank " + std::to_string(rank));
  ShardIndex out{file, json_field<uint64_t>(index, "file_size", index_path)};
  const uint64_t actual = fs::file_size(file_path, ec);
  if (ec) throw CheckpointError(file_path + ": cannot stat: " + ec.message());
  if (actual != out.file_size)
    throw CheckpointError(file_path + ": " + std::to_string(actual) + " bytes, its index " + index_path + " expects " +
                          std::to_string(out.file_size));

  const auto& decls = index.contains("tensors") ? index.at("tensors") : nlohmann::json();
  if (!decls.is_object()) throw CheckpointError(index_path + ": \"tensors\" is not an object");
  for (const auto& [name, d] : decls.items()) {
    const std::string where = index_path + ": tensor \"" + name + "\"";
    auto shape = json_field<std::vector<int64_t>>(d, "global_shape", where);
    DType dtype = parse_dtype(json_field<std::string>(d, "dtype", where), where);
    auto [it, inserted] = tensors.try_emplace(name);
    MergedTensor& t = it->second;
    if (inserted) {
      t.global_shape = shape;
      t.dtype = dtype;
      t.first_file = file;
    } else if (t.global_shape != shape || t.dtype != dtype) {
      throw CheckpointError("tensor \"" + name + "\": " + t.first_file + " saves it as " +
                            shape_to_string(t.global_shape) + " " + dtype_name(t.dtype) + " but " + file + " as " +
                            shape_to_string(shape) + " " + dtype_name(dtype) + " (the ranks disagree on the model)");
    }
  }
  const auto& chunks = index.contains("chunks") ? index.at("chunks") : nlohmann::json();
  if (!chunks.is_array()) throw CheckpointError(index_path + ": \"chunks\" is not an array");
  for (const auto& j : chunks) {
    const std::string name = json_field<std::string>(j, "tensor", index_path);
    const std::string where = index_path + ": tensor \"" + name + "\"";
    ChunkRecord chunk = chunk_from_json(j, where);
    if (chunk.file != file)
      throw CheckpointError(where + ": chunk \"" + chunk.key + "\" names file " + chunk.file + ", expected " + file);
    auto it = tensors.find(name);
    if (it == tensors.end() || !decls.contains(name))
      throw CheckpointError(where + ": chunk \"" + chunk.key + "\" of a tensor the index does not declare");
    it->second.chunks.push_back(std::move(chunk));
  }
  return out;
}

std::string describe(const ChunkRecord& c) { return c.file + " \"" + c.key + "\" " + box_to_string(c.box); }

// Every chunk inside the tensor, no two overlapping, and together as many elements as the tensor:
// then they cover it exactly once. Overlaps are found by a sweep along dim 0 over chunks sorted by
// their offsets, so only chunks sharing rows are compared.
void check_cover(const std::string& name, const MergedTensor& t) {
  const std::string what = "tensor \"" + name + "\" " + shape_to_string(t.global_shape);
  int64_t total = 0;
  for (const ChunkRecord& c : t.chunks) {
    if (!box_within(c.box, t.global_shape))
      throw CheckpointError(what + ": chunk " + describe(c) + " lies outside the tensor");
    if (c.length != static_cast<uint64_t>(c.box.numel()) * dtype_size(t.dtype))
      throw CheckpointError(what + ": chunk " + describe(c) + " holds " + std::to_string(c.length) +
                            " bytes, not its box's size");
    total += c.box.numel();
  }
  std::vector<size_t> order(t.chunks.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return t.chunks[a].box.offsets < t.chunks[b].box.offsets; });
  const bool scalar = t.global_shape.empty();
  for (size_t i = 0; i < order.size(); ++i) {
    const Box& a = t.chunks[order[i]].box;
    for (size_t k = i + 1; k < order.size(); ++k) {
      const Box& b = t.chunks[order[k]].box;
      if (!scalar && b.offsets[0] >= a.offsets[0] + a.sizes[0]) break;
      if (scalar || intersect(a, b))
        throw CheckpointError(what + ": chunks overlap: " + describe(t.chunks[order[i]]) + " and " +
                              describe(t.chunks[order[k]]) + " (two ranks saved the same elements)");
    }
  }
  const int64_t expected = shape_numel(t.global_shape);
  if (total != expected)
    throw CheckpointError(what + ": the saved chunks hold " + std::to_string(total) + " of its " +
                          std::to_string(expected) + " elements (not fully covered: a part no rank saved)");
}

// Shard files of ranks outside this world, or temporaries, left by an earlier failed attempt.
void remove_strays(const fs::path& staging, int world_size) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(staging, ec)) {
    const std::string n = entry.path().filename().string();
    bool stray = n.size() > 4 && n.ends_with(".tmp");
    if (n.starts_with("shard-")) {
      int r = -1;
      auto [p, err] = std::from_chars(n.data() + 6, n.data() + n.size(), r);
      stray = stray || err != std::errc() || r >= world_size ||
              (std::string(p) != ".json" && std::string(p) != ".safetensors");
    }
    if (stray) fs::remove_all(entry.path(), ec);
  }
}

// Moves `staging` to `final_dir`, replacing an existing checkpoint. Where the filesystem supports it the
// two are swapped atomically (RENAME_EXCHANGE), so `final_dir` never disappears; else the old one
// is renamed aside first.
void publish(const std::string& staging, const std::string& final_dir) {
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    if (::rename(staging.c_str(), final_dir.c_str()) != 0) io::throw_errno(final_dir, "rename from " + staging);
    return;
  }
  // Replacing is for the same step saved again; a user's folder of that name is not ours to delete.
  if (!is_committed_checkpoint(final_dir))
    throw CheckpointError(final_dir +
                          " exists and is not a checkpoint this engine committed (no common.json and "
                          "recipe-checkpoint metadata.json), so it is not replaced; move it out of the way, or set "
                          "checkpoint.dir to another folder");
  std::string old;
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    old = staging;  // now holds the replaced checkpoint
  } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    io::throw_errno(final_dir, "exchange with " + staging);
  }
#endif
  if (old.empty()) {
    old = final_dir + ".replaced";
    fs::remove_all(old, ec);
    if (::rename(final_dir.c_str(), old.c_str()) != 0) io::throw_errno(final_dir, "rename aside to " + old);
    if (::rename(staging.c_str(), final_dir.c_str()) != 0) io::throw_errno(final_dir, "rename from " + staging);
  }
  fs::remove_all(old, ec);
  if (ec)
    throw CheckpointError(final_dir + " committed, but removing the checkpoint it replaced (" + old +
                          ") failed: " + ec.message());
}

}  // namespace

void commit(const std::string& staging_dir, const std::string& final_dir, const CommitOptions& options) {
  if (options.world_size < 1)
    throw CheckpointError("commit: world_size must be at least 1, got " + std::to_string(options.world_size));
  if (options.keep_last < 0)
    throw CheckpointError("commit: keep_last must be >= 0 (0 keeps all), got " + std::to_string(options.keep_last));
  const fs::path staging(staging_dir);
  std::error_code ec;
  if (!fs::is_directory(staging, ec))
    throw CheckpointError(staging_dir + ": no staging directory (did the ranks run write_shard?)");
  fs::path final_path = fs::path(final_dir).lexically_normal();
  if (final_path.filename().empty()) final_path = final_path.parent_path();
  const std::string final_name = final_path.filename().string();
  const fs::path parent = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");

  std::map<std::string, MergedTensor> tensors;
  nlohmann::json files = nlohmann::json::object();
  for (int r = 0; r < options.world_size; ++r) {
    ShardIndex s = merge_shard_index(staging, r, tensors);
    files[s.file] = {{"size", s.file_size}};
  }
  nlohmann::json tensors_json = nlohmann::json::object();
  for (const auto& [name, t] : tensors) {
    check_cover(name, t);
    nlohmann::json chunks = nlohmann::json::array();
    for (const ChunkRecord& c : t.chunks) chunks.push_back(chunk_to_json(c));
    tensors_json[name] = {
        {"global_shape", t.global_shape}, {"dtype", dtype_name(t.dtype)}, {"chunks", std::move(chunks)}};
  }
  nlohmann::json metadata = {{"format", kFormat},
                             {"version", kVersion},
                             {"world_size", options.world_size},
                             {"files", std::move(files)},
                             {"tensors", std::move(tensors_json)}};
  if (!options.base.path.empty()) metadata["base"] = {{"path", options.base.path}, {"hash", options.base.hash}};

  remove_strays(staging, options.world_size);
  io::write_file_atomic((staging / "common.json").string(),
                        (options.common.is_null() ? nlohmann::json::object() : options.common).dump(1) + "\n");
  io::write_file_atomic((staging / "plan.toml").string(), options.plan_toml);
  io::write_file_atomic((staging / "metadata.json").string(), metadata.dump(1) + "\n");  // last: marks it complete
  // metadata.json now holds everything the shard indexes said; a checkpoint is only the files above.
  for (int r = 0; r < options.world_size; ++r) fs::remove(staging / shard_index_name(r), ec);
  io::fsync_dir(staging_dir);

  fs::create_directories(parent, ec);
  if (ec) throw CheckpointError(parent.string() + ": cannot create the checkpoints directory: " + ec.message());
  publish(staging.string(), final_path.string());
  io::fsync_dir(parent.string());
  io::write_file_atomic((parent / "latest").string(), final_name + "\n");
  io::fsync_dir(parent.string());
  if (options.keep_last > 0) prune(parent, final_name, options.keep_last);
}

}  // namespace recipe::ckpt
