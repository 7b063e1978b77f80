// Phase 1 of a save: one rank's shard file and its chunk index.
#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "checkpoint/box_math.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/chunk_record.hpp"
#include "checkpoint/file_io.hpp"
#include "checkpoint/safetensors.hpp"

namespace recipe::ckpt {

namespace {

namespace fs = std::filesystem;

// A chunk about to be written: where its bytes come from (the caller's buffer) and where they go.
struct PlannedChunk {
  const SavePiece* piece;
  Box box;
  std::string key;
  const char* src;
  uint64_t begin, end;  // relative to the safetensors byte buffer (end holds the size until laid out)
};

void check_piece(const SavePiece& p, int rank) {
  const std::string where = "write_shard (rank " + std::to_string(rank) + "), tensor \"" + p.name + "\"";
  if (p.name.empty())
    throw CheckpointError("write_shard (rank " + std::to_string(rank) + "): a piece has no tensor name");
  for (int64_t s : p.global_shape)
    if (s < 0) throw CheckpointError(where + ": negative size in global shape " + shape_to_string(p.global_shape));
  if (!box_within(p.held, p.global_shape))
    throw CheckpointError(where + ": held box " + box_to_string(p.held) + " is not inside the global shape " +
                          shape_to_string(p.global_shape));
  if (p.flat_begin < 0 || p.flat_end < p.flat_begin || p.flat_end > p.held.numel())
    throw CheckpointError(where + ": run [" + std::to_string(p.flat_begin) + ", " + std::to_string(p.flat_end) +
                          ") is not inside the " + std::to_string(p.held.numel()) + " elements of the held box " +
                          box_to_string(p.held));
  if (p.flat_end > p.flat_begin && p.data == nullptr) throw CheckpointError(where + ": data is null");
}

}  // namespace

void write_shard(const std::string& staging_dir, int rank, const std::vector<SavePiece>& pieces) {
  if (rank < 0) throw CheckpointError("write_shard: negative rank " + std::to_string(rank));
  std::error_code ec;
  fs::create_directories(staging_dir, ec);
  if (ec) throw CheckpointError(staging_dir + ": cannot create the staging directory: " + ec.message());

  // Lay the chunks out back to back in the byte buffer; keys are "<tensor>#<n>", n counting the
  // chunks of that tensor within this shard (unique: the text after the last '#' is n).
  std::vector<PlannedChunk> plan;
  std::map<std::string, int> chunks_of_tensor;
  nlohmann::json tensors = nlohmann::json::object();  // every tensor a piece names, empty runs too
  uint64_t data_end = 0;
  for (const SavePiece& piece : pieces) {
    check_piece(piece, rank);
    nlohmann::json decl = {{"global_shape", piece.global_shape}, {"dtype", dtype_name(piece.dtype)}};
    if (tensors.contains(piece.name) && tensors[piece.name] != decl)
      throw CheckpointError("write_shard (rank " + std::to_string(rank) + "): tensor \"" + piece.name +
                            "\" appears in two pieces as " + tensors[piece.name].dump() + " and " + decl.dump());
    tensors[piece.name] = std::move(decl);
    const size_t elem = dtype_size(piece.dtype);
    const char* src = static_cast<const char*>(piece.data);
    for (Box& box : flat_range_boxes(piece.held, piece.flat_begin, piece.flat_end)) {
      const uint64_t bytes = static_cast<uint64_t>(box.numel()) * elem;
      std::string key = piece.name + "#" + std::to_string(chunks_of_tensor[piece.name]++);
      plan.push_back({&piece, std::move(box), std::move(key), src, 0, bytes});
      src += bytes;
    }
  }
  // Wider dtypes first: the byte buffer starts 8-aligned, so every chunk is aligned to its element
  // size, which mmap-based readers of the safetensors file rely on.
  std::stable_sort(plan.begin(), plan.end(), [](const PlannedChunk& a, const PlannedChunk& b) {
    return dtype_size(a.piece->dtype) > dtype_size(b.piece->dtype);
  });
  for (PlannedChunk& c : plan) {
    const uint64_t bytes = c.end;
    c.begin = data_end;
    c.end = data_end + bytes;
    data_end = c.end;
  }

  std::map<std::string, safetensors::Entry> entries;
  for (const PlannedChunk& c : plan) entries[c.key] = {c.piece->dtype, c.box.sizes, c.begin, c.end};
  const std::string header =
      safetensors::encode_header(entries, {{"format", kShardFormat}, {"rank", std::to_string(rank)}});

  const std::string file = shard_file_name(rank);
  const std::string path = (fs::path(staging_dir) / file).string();
  nlohmann::json chunks = nlohmann::json::array();
  uint64_t file_size = 0;
  {
    // Chunk bytes go straight from the caller's buffers to the file: nothing is staged in memory.
    io::AtomicFile out(path);
    out.write(header.data(), header.size());
    for (const PlannedChunk& c : plan) {
      const size_t bytes = static_cast<size_t>(c.end - c.begin);
      ChunkRecord rec;
      rec.file = file;
      rec.key = c.key;
      rec.offset = header.size() + c.begin;
      rec.length = bytes;
      rec.box = c.box;
      rec.crc32 = crc32_of(c.src, bytes);
      out.write(c.src, bytes);
      nlohmann::json j = chunk_to_json(rec);
      j["tensor"] = c.piece->name;
      chunks.push_back(std::move(j));
    }
    file_size = out.bytes_written();
    out.commit();
  }

  // The index is written after the shard file is in place: an index always describes a complete shard.
  nlohmann::json index = {{"format", kShardFormat},
                          {"version", kVersion},
                          {"rank", rank},
                          {"file", file},
                          {"file_size", file_size},
                          {"tensors", std::move(tensors)},
                          {"chunks", std::move(chunks)}};
  io::write_file_atomic((fs::path(staging_dir) / shard_index_name(rank)).string(), index.dump(1) + "\n");
  io::fsync_dir(staging_dir);
}

}  // namespace recipe::ckpt
