// Hugging Face style safetensors files: what `transformers` writes with save_pretrained and reads
// with from_pretrained. Independent of our sharded checkpoint format (checkpoint.hpp); the model
// knowledge (which tensor is which) lives in hf/hf_convert.hpp.
//
// A model directory holds either
//   model.safetensors                      one file with every tensor, or
//   model.safetensors.index.json           {"weight_map": {tensor name → file name}} and the files
//                                          it names (model-00001-of-00003.safetensors, ...).
// Each file: u64 little-endian N | N bytes of JSON header | byte buffer (see safetensors.hpp).
// Tensors are read whole and converted to f32 from F32, BF16 or F16; other dtypes (I64 position
// ids, BOOL masks that some exports carry) are listed but refused when read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt::hf {

inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";

struct HfTensor {
  std::string name;
  std::string file;   // absolute path of the file holding it
  std::string dtype;  // safetensors dtype string: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute file offset of its bytes
  uint64_t bytes = 0;
  int64_t numel() const;
};

// Opens a model directory (single file or index + shards) and validates every header: the JSON
// parses, offsets lie inside the file and match shape × dtype size, and with an index every named
// tensor is in the file the index names. Throws CheckpointError naming the file and the problem.
class HfTensorFiles {
 public:
  explicit HfTensorFiles(const std::string& dir);
  ~HfTensorFiles();
  HfTensorFiles(const HfTensorFiles&) = delete;
  HfTensorFiles& operator=(const HfTensorFiles&) = delete;

  const std::vector<std::string>& files() const { return files_; }  // absolute paths, sorted
  std::vector<std::string> names() const;                           // sorted
  const HfTensor* find(const std::string& name) const;              // nullptr when absent

  // The whole tensor as f32 (row-major). Throws CheckpointError when absent or of a dtype other
  // than F32/BF16/F16.
  std::vector<float> read_f32(const std::string& name) const;

 private:
  std::vector<std::string> files_;
  std::map<std::string, HfTensor> tensors_;
};

// One tensor to write: its bytes are passed to SafetensorsFileWriter::write in declaration order.
struct HfOutTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
};

// Streams one safetensors file: the header is written from the declared tensors up front, then
// each tensor's bytes in the declared order (so a large model is never whole in memory). The
// file appears under `path` only after finish(); destroyed earlier, nothing is left behind.
class SafetensorsFileWriter {
 public:
  SafetensorsFileWriter(const std::string& path, std::vector<HfOutTensor> tensors,
                        const std::map<std::string, std::string>& metadata);
  ~SafetensorsFileWriter();
  SafetensorsFileWriter(const SafetensorsFileWriter&) = delete;
  SafetensorsFileWriter& operator=(const SafetensorsFileWriter&) = delete;

  // The next declared tensor, numel elements of f32, stored as its declared dtype.
  void write(const std::string& name, const float* data, int64_t numel);
  void finish();  // throws CheckpointError when a declared tensor was not written
  uint64_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// IEEE conversions: bf16 narrowing rounds to nearest even (NaN stays NaN).
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

}  // namespace recipe::ckpt::hf
