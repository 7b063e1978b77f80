// Sharded, parallelism-agnostic checkpoints.
//
// On disk, a checkpoint is a directory `<dir>/step-<N>/`:
//
//   shard-<rank>.safetensors   what rank <rank> owns, one safetensors tensor per chunk (below)
//   metadata.json              tensor name → global shape, dtype, chunks; written LAST
//   common.json                step, consumed samples, seed, ... (opaque JSON from the caller)
//   plan.toml                  the resolved plan of the run that saved it
//
// and `<dir>/latest` holds the name of the newest complete one ("step-<N>\n").
//
// A checkpoint may refer to a base checkpoint (metadata.json "base": {"path", "hash"}): a LoRA
// fine-tune saves only its adapters and their optimizer state, and its frozen base weights stay
// in the checkpoint they were loaded from. A reader opens the base too and serves every tensor the
// checkpoint itself does not hold from it (find, read), so whatever loads the one loads the other;
// a base that is missing or has changed since (its hash differs) is refused naming both paths.
//
// A chunk is a box of a global tensor (offsets + sizes per dim, row-major inside the box). Ranks
// describe what they own as SavePieces: a run [flat_begin, flat_end) of the row-major elements of
// the box their buffer holds (their TP shard, or the whole tensor). A run that does not cover whole
// rows is cut into boxes (flat_range_boxes), so a ZeRO-1 chunk of the flat optimizer buffer, which
// can start and end anywhere inside a tensor, is written as is: no gather before saving.
//
// Saving is a two-phase commit driven by the caller's barriers:
//   1. every rank: write_shard(staging, rank, pieces)  → shard-<rank>.safetensors + shard-<rank>.json
//   2. barrier, then one rank: commit(...) merges the shard indexes into metadata.json, checks that
//      every tensor is covered exactly once, fsyncs, renames staging → step-<N>, rewrites `latest`
//      atomically and prunes old checkpoints (keep_last).
// A crash at any point leaves either the previous checkpoint as `latest` or the new one complete;
// a staging directory (`step-<N>.partial`) is never read.
//
// Loading computes, for the box a rank needs, the overlap with every saved chunk and copies those
// parts, so the saving and loading layouts (TP, PP, DP, ZeRO-1) are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace recipe::ckpt {

// Thrown for anything wrong with a checkpoint on disk; what() names the file and the problem.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A box of a global tensor: offsets[d] .. offsets[d]+sizes[d] along each dim d.
struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t numel() const;
  bool operator==(const Box&) const = default;
};

// Element types a checkpoint stores (safetensors dtype strings "F32", "BF16").
enum class DType { f32, bf16 };
const char* dtype_name(DType d);  // "F32" / "BF16"
size_t dtype_size(DType d);

// One run of elements a rank contributes to the checkpoint.
struct SavePiece {
  std::string name;  // global tensor name, e.g. "layers.3.attention.q.weight"
  std::vector<int64_t> global_shape;
  Box held;                // the box of the global tensor the rank's buffer holds
  int64_t flat_begin = 0;  // [flat_begin, flat_end): row-major indices inside `held`
  int64_t flat_end = 0;
  DType dtype = DType::f32;
  const void* data = nullptr;  // (flat_end - flat_begin) elements of dtype, host memory
};

// The boxes (in global coordinates) that together hold exactly the elements [begin, end) of the
// row-major order of `held`, in order. At most 2·(ndim−1)+1 boxes.
std::vector<Box> flat_range_boxes(const Box& held, int64_t begin, int64_t end);

// Phase 1, on every rank (ranks that own nothing still call it: an empty shard). Creates
// `staging_dir` if needed. Throws CheckpointError on I/O failure (disk full, permissions).
void write_shard(const std::string& staging_dir, int rank, const std::vector<SavePiece>& pieces);

// Where a checkpoint's other tensors are: an absolute checkpoint directory and its content hash.
struct BaseRef {
  std::string path;
  std::string hash;  // checkpoint_hash(path) when the reference was made
  bool operator==(const BaseRef&) const = default;
};

// A cheap content hash of a committed checkpoint: "crc32:<8 hex>:<bytes>" of its metadata.json.
// metadata.json lists every shard file's size and a CRC32 of every chunk, so any change of a
// tensor's bytes, shape or layout changes it (a shard edited in place without a new metadata.json
// is caught by the chunk CRCs when read); hashing it reads one small file, not the shards.
// Throws CheckpointError when `checkpoint_dir` holds no metadata.json.
std::string checkpoint_hash(const std::string& checkpoint_dir);

struct CommitOptions {
  int world_size = 1;     // shard-0 .. shard-<world_size-1> must all exist
  BaseRef base;           // path set: where the tensors it does not hold are (metadata.json "base")
  nlohmann::json common;  // written as common.json
  std::string plan_toml;  // written as plan.toml
  int keep_last = 0;      // after the commit keep only the newest N step-* dirs; 0 = all
};

// Phase 2, on one rank after every rank finished phase 1. `final_dir` is `<dir>/step-<N>`; its
// parent gets the `latest` pointer. Refuses (CheckpointError) when a shard is missing, two chunks
// of one tensor overlap, a tensor is not fully covered, or shapes/dtypes of one name disagree. An
// existing `final_dir` (the same step saved again) is replaced.
void commit(const std::string& staging_dir, const std::string& final_dir, const CommitOptions& options);

// Where a step's checkpoint goes, and its staging directory.
std::string step_dir_name(int64_t step);                   // "step-<N>"
std::string staging_dir_of(const std::string& final_dir);  // "<final_dir>.partial"

// Resolves what a user names to one complete checkpoint directory:
//   a checkpoint (has metadata.json), a checkpoints dir (has `latest`), or a run dir
//   (checkpoints/latest). Returns "" when `path` is a checkpoints dir or run dir that holds no
//   checkpoint yet (auto-resume starts fresh); throws CheckpointError when `path` does not exist
//   or points at something broken (a `latest` naming a missing directory, a partial checkpoint).
std::string find_checkpoint(const std::string& path);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> global_shape;
  DType dtype = DType::f32;
};

class CheckpointReader {
 public:
  // Opens and validates: metadata.json parses, every shard file exists, its safetensors header
  // parses and agrees with metadata (names, dtypes, byte ranges) and its size matches. Metadata
  // records a CRC32 (zlib) per chunk; a chunk's checksum is verified the first time read() touches
  // it (so a rank reads and checks only what it loads). A base reference is followed: the base
  // is opened the same way after its hash is compared with the recorded one. Any failure throws
  // CheckpointError naming the file and what is wrong.
  explicit CheckpointReader(const std::string& checkpoint_dir);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const nlohmann::json& common() const { return common_; }  // common.json
  std::string plan_toml() const;                            // plan.toml ("" if absent)
  std::vector<TensorInfo> tensors() const;                  // this directory's own, sorted by name
  // This directory's tensor, else its base's; nullptr when neither holds it. (A base never refers
  // to a base itself: the constructor refuses that.)
  const TensorInfo* find(const std::string& name) const;
  bool holds(const std::string& name) const;  // in this directory itself (not its base)

  // The base this checkpoint refers to (nullptr: it holds all its tensors), and its reader.
  const BaseRef* base_ref() const { return base_ref_ ? &*base_ref_ : nullptr; }
  const CheckpointReader* base() const { return base_.get(); }

  // Copies the elements of `region` (global coordinates) of tensor `name` (this directory's, else
  // the base's) into dst, row-major over the region, converted to `dst_dtype`. Throws
  // CheckpointError when the tensor is missing, the region is outside the global shape, or the
  // saved chunks do not cover all of it.
  void read(const std::string& name, const Box& region, DType dst_dtype, void* dst) const;

 private:
  struct Impl;
  void open_base(const nlohmann::json& ref, const std::string& meta_path);
  std::string dir_;
  nlohmann::json common_;
  std::unique_ptr<Impl> impl_;
  std::optional<BaseRef> base_ref_;
  std::unique_ptr<CheckpointReader> base_;
};

}  // namespace recipe::ckpt
