// The loss-mask companion of a chat/instruction dataset: <prefix>.mask.bin beside <prefix>.bin/.idx,
// one byte per token of the .bin saying whether that token is trained (1) or not (0).
//
// Layout (little-endian, packed):
//   offset 0   char[8]  magic "RCPMASK\0"
//   offset 8   u64      version = 1
//   offset 16  u64      N = tokens of the .bin (its size / token size)
//   offset 24  char[16] chat template the data was rendered with ("llama3", "chatml", "plain"), NUL-padded
//   offset 40  u8[N]    mask of token i of the .bin, in .bin order: 1 = trained, 0 = not
// Token i is trained when the model must predict it: assistant content and its end token, or a
// completion and its end-of-document token. The mask therefore applies to targets: the target of
// input position t is token t+1, trained iff mask[t+1] = 1.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.hpp"

namespace recipe::data {

constexpr char kLossMaskMagic[8] = {'R', 'C', 'P', 'M', 'A', 'S', 'K', '\0'};
constexpr size_t kLossMaskHeaderBytes = 40;
constexpr size_t kLossMaskTemplateBytes = 16;

std::string mask_path_of(const std::string& prefix);  // prefix + ".mask.bin"

// The mask of a dataset, read into memory. Construction checks the header, that N equals the
// tokens of the dataset's .bin, the file size, and that every byte is 0 or 1; errors name the file,
// what is wrong and how to regenerate it.
class LossMask {
 public:
  explicit LossMask(const IndexedDataset& data);
  const std::string& chat_template() const { return template_; }
  int64_t tokens() const { return static_cast<int64_t>(mask_.size()); }
  // Copies `count` mask bytes of document d from token `offset` (same addressing as
  // IndexedDataset::read_document).
  void read_document(int64_t d, int64_t offset, int64_t count, uint8_t* out) const;

 private:
  const IndexedDataset& data_;
  std::string path_, template_;
  std::vector<uint8_t> mask_;
};

// Streams mask bytes to a file; the header's N is written by finish(). Paths are written as given
// (atomic publication is the caller's job).
class LossMaskWriter {
 public:
  LossMaskWriter(std::string path, const std::string& chat_template);
  ~LossMaskWriter();
  LossMaskWriter(const LossMaskWriter&) = delete;
  LossMaskWriter& operator=(const LossMaskWriter&) = delete;
  void add(const std::vector<uint8_t>& mask);
  void finish();
  int64_t tokens() const { return tokens_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  int64_t tokens_ = 0;
};

}  // namespace recipe::data
