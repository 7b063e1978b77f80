// GPT-2 byte-level BPE from vocab.json + merges.txt.
//
// Encoding: (1) pre-tokenize the text as GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does (core/data/pretokenize.hpp); (2) spell each pre-token's bytes in GPT-2's printable byte alphabet
// and merge adjacent symbols, lowest merge rank first (core/data/byte_level_bpe.hpp). Pre-token
// results are cached.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "core/data/byte_level_bpe.hpp"
#include "core/data/pretokenize.hpp"
#include "core/data/tokenizer.hpp"

namespace recipe::data {

namespace {

std::string read_text_file(const std::string& path, const char* what) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": " + what + " not found");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open " + what);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  Gpt2BpeTokenizer(const std::string& vocab_path, const std::string& merges_path) {
    std::unordered_map<std::string, int32_t> vocab = load_vocab(vocab_path);
    bpe_ = std::make_unique<BpeModel>(std::move(vocab), load_merges(merges_path), vocab_path + " + " + merges_path);
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (const auto& [begin, len] : pretokenize(text, SplitPattern::kGpt2)) {
      const std::string piece = text.substr(begin, len);
      {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(piece);
        if (it != cache_.end()) {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      std::vector<int32_t> piece_ids = bpe_->encode_piece(piece, false);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      std::lock_guard<std::mutex> lock(cache_mutex_);
      if (cache_.size() >= kMaxCache) cache_.clear();
      cache_.emplace(piece, std::move(piece_ids));
    }
    return ids;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)])
        throw std::out_of_range("gpt2_bpe: id " + std::to_string(id) + " is not in " + vocab_path_);
      const std::string& tok = id_to_token_[static_cast<size_t>(id)];
      auto unspelled = byte_level_unspell(tok);
      bytes += unspelled ? *unspelled : tok;  // not spelled in the byte alphabet: keep the text as written
    }
    return bytes;
  }

  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  int32_t eod_id() const override { return eod_; }
  std::string name() const override { return "gpt2_bpe"; }
  bool decodes_exactly() const override { return true; }  // every token spells its bytes

 private:
  static constexpr size_t kMaxCache = 1 << 18;

  std::unordered_map<std::string, int32_t> load_vocab(const std::string& path) {
    vocab_path_ = path;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(path, "GPT-2 vocab.json"));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ": not valid JSON: " + e.what());
    }
    if (!j.is_object() || j.empty())
      throw std::runtime_error(path + ": expected a JSON object mapping tokens to ids (GPT-2 vocab.json)");
    std::unordered_map<std::string, int32_t> vocab;
    int64_t max_id = -1;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
        throw std::runtime_error(path + ": token \"" + it.key() + "\" maps to " + it.value().dump() +
                                 ", not a non-negative integer id");
      const int32_t id = it.value().get<int32_t>();
      vocab.emplace(it.key(), id);
      max_id = std::max<int64_t>(max_id, id);
    }
    id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
    has_id_.assign(static_cast<size_t>(max_id + 1), false);
    for (const auto& [tok, id] : vocab) {
      id_to_token_[static_cast<size_t>(id)] = tok;
      has_id_[static_cast<size_t>(id)] = true;
    }
    auto eod = vocab.find("<|endoftext|>");
    if (eod == vocab.end())
      throw std::runtime_error(path + ": no <|endoftext|> token, which GPT-2 uses to end a document");
    eod_ = eod->second;
    return vocab;
  }

  static std::vector<std::pair<std::string, std::string>> load_merges(const std::string& path) {
    const std::string text = read_text_file(path, "GPT-2 merges.txt");
    std::vector<std::pair<std::string, std::string>> merges;
    size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
        throw std::runtime_error(path + ":" + std::to_string(line_no) +
                                 ": expected two symbols separated by one space, got \"" + line + "\"");
      merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    return merges;
  }

  std::string vocab_path_;
  std::unique_ptr<BpeModel> bpe_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  int32_t eod_ = 0;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_json, const std::string& merges_txt) {
  return std::make_unique<Gpt2BpeTokenizer>(vocab_json, merges_txt);
}

}  // namespace recipe::data
