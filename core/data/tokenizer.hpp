// Text ↔ token ids for `recipe data prepare` (and for inspecting samples).
//
// Kinds:
//   "byte"          UTF-8 bytes as ids. vocab_size 256, eod id 0; byte b (1..255) is id b. A NUL byte
//                   in the input is dropped on encode (id 0 is reserved for the end of document, and
//                   NUL does not occur in text); decode skips id 0.
//   "gpt2_bpe"      GPT-2 byte-level BPE from vocab.json + merges.txt; eod = <|endoftext|>.
//   "sentencepiece" a SentencePiece .model; eod = the model's eos id.
//   "hf"            a Hugging Face tokenizer.json of the byte-level BPE family (GPT-2, Llama 3, Qwen2;
//                   core/data/hf_tokenizer.cpp). eod = the added token named by eod_token when given,
//                   else the first of <|end_of_text|>, <|endoftext|>, </s>, <eos> that is an added token.
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
  // Text → ids. Special tokens written in the text are plain text here (a document cannot forge a
  // control token), and nothing is added around the text (no BOS/EOS).
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // As encode, but special tokens written in the text (e.g. "<|eot_id|>" in a chat template) become
  // their ids. Tokenizers without special tokens encode as encode() does.
  virtual std::vector<int32_t> encode_with_specials(const std::string& text) const { return encode(text); }
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;  // ids are in [0, vocab_size)
  virtual int32_t eod_id() const = 0;
  virtual std::string name() const = 0;
  // The id of the special (added) token written `name`, e.g. "<|eot_id|>"; nullopt when the tokenizer
  // has no such token (always for byte, gpt2_bpe and sentencepiece).
  virtual std::optional<int32_t> special_id(const std::string& name) const {
    (void)name;
    return std::nullopt;
  }
  // The token a model expects before each sequence (Llama 3's <|begin_of_text|>, from the file's
  // TemplateProcessing); nullopt when none is declared.
  virtual std::optional<int32_t> bos_id() const { return std::nullopt; }
  // Whether decode() of each id alone gives exactly the bytes that id encoded, so the tokens of an
  // encoding tile its text (byte-level tokenizers: byte, gpt2_bpe, hf). Chat templates split a joint
  // encoding into trained and untrained tokens by those bytes (core/data/chat_template.hpp).
  virtual bool decodes_exactly() const { return false; }
  // The text as the tokenizer's normalizer makes it before splitting it (the hf kind with Qwen2's
  // NFC; the text itself for the others). encode(normalize(t)) == encode(t), and where
  // decodes_exactly() the tokens spell normalize(t).
  virtual std::string normalize(const std::string& text) const { return text; }
};

std::unique_ptr<Tokenizer> make_byte_tokenizer();
std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_json, const std::string& merges_txt);
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_file);
// eod_token: the token that ends a document; empty picks it by the rule above.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& tokenizer_json, const std::string& eod_token = "");

// kind: "byte" | "gpt2_bpe" | "sentencepiece" | "hf" (model_file is the tokenizer.json). Throws
// std::runtime_error naming the missing file or the unknown kind.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file, const std::string& model_file,
                                          const std::string& eod_token = "");

}  // namespace recipe::data
