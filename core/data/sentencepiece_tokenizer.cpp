#include <sentencepiece_processor.h>

#include <filesystem>
#include <stdexcept>

#include "core/data/tokenizer.hpp"

namespace recipe::data {

namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_file) : path_(model_file) {
    if (!std::filesystem::exists(model_file))
      throw std::runtime_error(model_file + ": SentencePiece model not found (data.tokenizer_model)");
    const auto status = processor_.Load(model_file);
    if (!status.ok()) throw std::runtime_error(model_file + ": cannot load SentencePiece model: " + status.ToString());
    if (processor_.eos_id() < 0)
      throw std::runtime_error(model_file +
                               ": the SentencePiece model has no eos piece, which marks the end of a document");
  }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto status = processor_.Encode(text, &ids);
    if (!status.ok()) throw std::runtime_error(path_ + ": encode failed: " + status.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(std::span<const int32_t> ids) const override {
    const std::vector<int> v(ids.begin(), ids.end());
    std::string text;
    const auto status = processor_.Decode(v, &text);
    if (!status.ok()) throw std::runtime_error(path_ + ": decode failed: " + status.ToString());
    return text;
  }
  int vocab_size() const override { return processor_.GetPieceSize(); }
  int32_t eod_id() const override { return processor_.eos_id(); }
  std::string name() const override { return "sentencepiece"; }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

}  // namespace recipe::data
