// Text ↔ token ids for `recipe data prepare` (and for inspecting samples).
//
// Kinds:
//   "byte"          UTF-8 bytes as ids. vocab_size 256, eod id 0; byte b (1..255) is id b. A NUL byte
//                   in the input is dropped on encode (id 0 is reserved for the end of document, and
//                   NUL does not occur in text); decode skips id 0.
//   "gpt2_bpe"      GPT-2 byte-level BPE from vocab.json + merges.txt; eod = <|endoftext|>.
//   "sentencepiece" a SentencePiece .model; eod = the model's eos id.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace recipe::data {

class Tokenizer {
 public:
  virtual ~Tokenizer();
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;  // ids are in [0, vocab_size)
  virtual int32_t eod_id() const = 0;
  virtual std::string name() const = 0;
  // The id of a special token by its literal name ("<|eot_id|>", "<|im_start|>"), which chat
  // templates place as one id, never through encode(). nullopt: this tokenizer has no such special
  // token (byte, gpt2_bpe and sentencepiece have none).
  virtual std::optional<int32_t> special_id(const std::string& name) const {
    (void)name;
    return std::nullopt;
  }
};

std::unique_ptr<Tokenizer> make_byte_tokenizer();
std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_json, const std::string& merges_txt);
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_file);

// kind: "byte" | "gpt2_bpe" | "sentencepiece". Throws std::runtime_error naming the missing file or
// the unknown kind.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file, const std::string& model_file);

}  // namespace recipe::data
