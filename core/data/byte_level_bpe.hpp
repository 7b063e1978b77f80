// The pieces byte-level BPE tokenizers share (GPT-2's vocab.json + merges.txt, Hugging Face
// tokenizer.json): the printable byte alphabet and the merge loop.
//
// Byte alphabet (GPT-2's bytes_to_unicode): printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF)
// stand for themselves, the other 68 bytes map to U+0100..U+0143 in byte order; a piece of text is
// spelled as the UTF-8 of its bytes' code points, which is how vocabularies and merges are written.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace recipe::data {

// UTF-8 spelling of each byte in the byte alphabet.
const std::array<std::string, 256>& byte_level_symbols();
// The byte whose alphabet code point is `cp`, or nullopt.
std::optional<unsigned char> byte_level_byte(uint32_t cp);
// `bytes` spelled in the byte alphabet.
std::string byte_level_spell(std::string_view bytes);
// Inverse of byte_level_spell for a string made only of alphabet code points; nullopt otherwise.
std::optional<std::string> byte_level_unspell(std::string_view symbols);

// Ranked merges over a vocabulary. Every merge's two parts and their concatenation must be in the
// vocabulary, as must every byte's symbol (both are checked at construction; `source` names the file
// in the errors).
class BpeModel {
 public:
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, const std::string& source);

  // Ids of one pre-token's bytes: start from one symbol per byte and repeatedly merge the adjacent pair
  // of lowest rank (all its non-overlapping occurrences, left to right) until no listed merge applies.
  // ignore_merges: a pre-token whose spelling is itself in the vocabulary is that one id (Llama 3).
  std::vector<int32_t> encode_piece(std::string_view bytes, bool ignore_merges) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32U) | static_cast<uint32_t>(b);
  }

  std::unordered_map<std::string, int32_t> vocab_;
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<uint64_t, Merge> merges_;  // key(left id, right id) → rank and merged id
};

}  // namespace recipe::data
