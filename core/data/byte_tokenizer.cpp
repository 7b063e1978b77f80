#include <stdexcept>

#include "core/data/tokenizer.hpp"

namespace recipe::data {

Tokenizer::~Tokenizer() = default;

namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) {
      if (c != 0) ids.push_back(c);
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id > 255) throw std::out_of_range("byte tokenizer: id " + std::to_string(id) + " is not a byte");
      if (id != 0) text.push_back(static_cast<char>(id));
    }
    return text;
  }
  int vocab_size() const override { return 256; }
  int32_t eod_id() const override { return 0; }
  std::string name() const override { return "byte"; }
  // Each id is its byte (a NUL, dropped on encode, is the one byte no token spells).
  bool decodes_exactly() const override { return true; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file, const std::string& model_file,
                                          const std::string& eod_token) {
  if (kind == "byte") return make_byte_tokenizer();
  if (kind == "gpt2_bpe") {
    if (vocab_file.empty() || merges_file.empty())
      throw std::runtime_error(
          "tokenizer gpt2_bpe needs a vocab.json and a merges.txt (data.vocab_file, data.merges_file)");
    return make_gpt2_bpe_tokenizer(vocab_file, merges_file);
  }
  if (kind == "sentencepiece") {
    if (model_file.empty())
      throw std::runtime_error("tokenizer sentencepiece needs a .model file (data.tokenizer_model)");
    return make_sentencepiece_tokenizer(model_file);
  }
  if (kind == "hf") {
    if (model_file.empty())
      throw std::runtime_error("tokenizer hf needs a Hugging Face tokenizer.json (data.tokenizer_model)");
    return make_hf_tokenizer(model_file, eod_token);
  }
  throw std::runtime_error("unknown tokenizer \"" + kind + "\"; use byte, gpt2_bpe, sentencepiece or hf");
}

}  // namespace recipe::data
