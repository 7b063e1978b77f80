// Megatron-LM indexed datasets (MMIDIDX): a `.bin` of raw tokens and an `.idx` describing them.
//
// .idx layout (little-endian, packed, exactly as Megatron-LM's indexed_dataset.py writes it):
//   offset 0   char[9]  magic "MMIDIDX\x00\x00"
//   offset 9   u64      version = 1
//   offset 17  u8       dtype code of the .bin tokens (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                       6 float64, 7 float32, 8 uint16)
//   offset 18  u64      S = sequence count
//   offset 26  u64      D = document count (entries of the document index: documents + 1)
//   offset 34  i32[S]   sequence lengths (tokens)
//              i64[S]   sequence pointers (byte offsets into .bin)
//              i64[D]   document index: document d is sequences [doc[d], doc[d+1]); doc[0] = 0,
//                       doc[D-1] = S
//   (multimodal files append i8[S] sequence modes; they are accepted and ignored.)
// The arrays start at offset 34, so they are not naturally aligned: reads go through memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace recipe::data {

enum class TokenDType : uint8_t {
  uint8 = 1,
  int8 = 2,
  int16 = 3,
  int32 = 4,
  int64 = 5,
  float64 = 6,
  float32 = 7,
  uint16 = 8
};

// Megatron's choice for token files: uint16 when the vocabulary is below 65500, else int32.
TokenDType token_dtype_for_vocab(int64_t vocab_size);
size_t dtype_size(TokenDType dtype);
const char* dtype_name(TokenDType dtype);

constexpr char kMMIDIDXMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kMMIDIDXHeaderBytes = 34;

std::string idx_path_of(const std::string& prefix);  // prefix + ".idx"
std::string bin_path_of(const std::string& prefix);  // prefix + ".bin"

// Read-only view of <prefix>.idx/.bin through POSIX mmap. Construction validates the header, the
// array sizes, the document index and that every sequence lies inside the .bin; errors name the
// file and what is wrong. Immutable after construction, so concurrent reads are safe.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  std::string idx_path() const { return idx_path_of(prefix_); }
  std::string bin_path() const { return bin_path_of(prefix_); }
  TokenDType dtype() const { return dtype_; }

  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_doc_entries_ - 1; }
  int32_t sequence_length(int64_t seq) const;
  int64_t sequence_pointer(int64_t seq) const;
  // Document d spans sequences [document_begin(d), document_begin(d+1)).
  int64_t document_begin(int64_t d) const;
  int64_t document_length(int64_t d) const;  // tokens over all of the document's sequences

  // Copies `count` tokens of sequence `seq` starting at token `offset` into out, as int32.
  void read_sequence(int64_t seq, int64_t offset, int64_t count, int32_t* out) const;
  // Copies `count` tokens of document d starting at token `offset` (across its sequences).
  void read_document(int64_t d, int64_t offset, int64_t count, int32_t* out) const;
  std::vector<int32_t> sequence(int64_t seq) const;
  std::vector<int32_t> document(int64_t d) const;

  // Largest token id over all sequences (a full scan of the .bin); -1 when there are no tokens.
  int64_t max_token_id() const;
  size_t bin_bytes() const { return bin_size_; }

 private:
  std::string prefix_;
  const unsigned char* idx_ = nullptr;
  size_t idx_size_ = 0;
  const unsigned char* bin_ = nullptr;
  size_t bin_size_ = 0;
  TokenDType dtype_ = TokenDType::uint16;
  size_t item_ = 2;
  int64_t num_sequences_ = 0;
  int64_t num_doc_entries_ = 0;
  size_t lengths_at_ = 0, pointers_at_ = 0, docs_at_ = 0;
};

// Streams documents into a .bin and writes the matching .idx on finish(), in Megatron's layout with
// one sequence per document (document index = 0, 1, ..., n). Paths are written as given; atomic
// publication (temp names + rename) is the caller's job. Token ids must fit the dtype.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string bin_path, std::string idx_path, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  void add_document(std::span<const int32_t> tokens);
  void finish();  // flushes the .bin and writes the .idx; the writer is unusable afterwards

  int64_t documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t tokens() const { return tokens_; }

 private:
  std::string bin_path_, idx_path_;
  TokenDType dtype_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> lengths_;
  std::vector<unsigned char> buffer_;
  int64_t tokens_ = 0;
};

}  // namespace recipe::data
