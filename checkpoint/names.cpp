// Names on disk: dtype strings, step directories, shard files.
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/chunk_record.hpp"

namespace recipe::ckpt {

const char* dtype_name(DType d) { return d == DType::bf16 ? "BF16" : "F32"; }

size_t dtype_size(DType d) { return d == DType::bf16 ? 2 : 4; }

DType parse_dtype(const std::string& name, const std::string& where) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  throw CheckpointError(where + ": unsupported dtype \"" + name + "\" (checkpoints hold F32 or BF16)");
}

std::string step_dir_name(int64_t step) { return "step-" + std::to_string(step); }

std::string staging_dir_of(const std::string& final_dir) { return final_dir + ".partial"; }

std::string shard_file_name(int rank) { return "shard-" + std::to_string(rank) + ".safetensors"; }

std::string shard_index_name(int rank) { return "shard-" + std::to_string(rank) + ".json"; }

}  // namespace recipe::ckpt
