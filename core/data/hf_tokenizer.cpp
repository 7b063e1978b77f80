// Hugging Face tokenizer.json reader for the byte-level BPE family (GPT-2/RoBERTa ByteLevel
// pre-tokenizer; Llama 3 / Qwen2 Sequence[Split(regex), ByteLevel(use_regex=false)]; Qwen2's NFC
// normalizer).
//
// Encoding follows the `tokenizers` library: (1) added tokens written in the text are matched first,
// leftmost-longest, as whole tokens (special ones only in encode_with_specials; encode treats them as
// text, as `encode_special_tokens=True` does, so a raw document cannot forge a control token); with a
// normalizer, only the tokens marked "normalized": false are matched on the raw text: (1b) each
// stretch between them is normalized (NFC, core/data/unicode_nfc.hpp) and the "normalized": true
// tokens, their content normalized too, are matched in that; (2) each stretch between them is split
// by the pre-tokenizer (core/data/pretokenize.hpp); (3) each piece is BPE-merged over its
// byte-alphabet spelling (core/data/byte_level_bpe.hpp). No post-processor tokens are added:
// bos_id() tells the caller what the TemplateProcessing would prepend. Anything else a file may ask
// for (other normalizers, other models, byte fallback, other split patterns, ...) is rejected with
// the file and the JSON field, never silently ignored.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "core/data/byte_level_bpe.hpp"
#include "core/data/pretokenize.hpp"
#include "core/data/tokenizer.hpp"
#include "core/data/unicode_nfc.hpp"

namespace recipe::data {

namespace {

using nlohmann::json;

struct AddedToken {
  std::string content;  // NFC'd where it is matched on normalized text
  int32_t id;
  bool special;
  bool normalized;  // matched on the normalized text (only meaningful with a normalizer)
};

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(const std::string& path, const std::string& eod_token) : path_(path) {
    if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": tokenizer.json not found");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open tokenizer.json");
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw std::runtime_error(path + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) fail("(top level)", "is not a JSON object");
    for (const char* key : {"truncation", "padding"})
      if (j.contains(key) && !j[key].is_null()) fail(key, "is set; recipe neither truncates nor pads, set it to null");
    load_normalizer(j.contains("normalizer") ? j["normalizer"] : json());
    load_model(j.contains("model") ? j["model"] : json());
    load_added_tokens(j.value("added_tokens", json::array()));
    load_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json());
    load_post_processor(j.contains("post_processor") ? j["post_processor"] : json(), "post_processor");
    if (j.contains("decoder") && !j["decoder"].is_null() && j["decoder"].value("type", std::string()) != "ByteLevel")
      fail("decoder.type", "is " + j["decoder"].value("type", std::string("?")) + "; only ByteLevel is supported");
    choose_eod(eod_token);
  }

  std::vector<int32_t> encode(const std::string& text) const override { return encode_impl(text, false); }
  std::vector<int32_t> encode_with_specials(const std::string& text) const override { return encode_impl(text, true); }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)])
        throw std::out_of_range("hf: id " + std::to_string(id) + " is not in " + path_);
      // Every token, added ones included, goes through the ByteLevel decoder as in the library: spelled in
      // the byte alphabet it becomes those bytes, otherwise it stays as written.
      const std::string& tok = id_to_token_[static_cast<size_t>(id)];
      auto bytes = byte_level_unspell(tok);
      out += bytes ? *bytes : tok;
    }
    return out;
  }

  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  int32_t eod_id() const override { return eod_; }
  std::string name() const override { return "hf"; }
  // Every token goes through the ByteLevel decoder (decode above), which spells the bytes it encoded.
  bool decodes_exactly() const override { return true; }
  std::string normalize(const std::string& text) const override { return nfc_ ? nfc(text) : text; }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::optional<int32_t> special_id(const std::string& name) const override {
    for (const auto& t : added_)
      if (t.content == name) return t.id;
    return std::nullopt;
  }

 private:
  static constexpr size_t kMaxCache = 1 << 18;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error(path_ + ": " + field + " " + what);
  }

  // null, or NFC (Qwen2). The others (NFKC, Lowercase, Replace, Prepend, ... and Sequences of
  // them) change the text in ways the engine does not compute.
  void load_normalizer(const json& n) {
    if (n.is_null()) return;
    const std::string type = n.is_object() ? n.value("type", std::string("?")) : n.dump();
    if (type != "NFC") fail("normalizer", "is " + type + "; supported: NFC (Qwen2's) or none (null)");
    nfc_ = true;
  }

  void load_model(const json& m) {
    if (!m.is_object()) fail("model", "is missing");
    const std::string type = m.value("type", std::string("BPE"));
    if (type != "BPE") fail("model.type", "is " + type + "; only BPE (byte-level) is supported");
    if (m.contains("dropout") && !m["dropout"].is_null()) fail("model.dropout", "is set; BPE dropout is not supported");
    if (m.value("byte_fallback", false))
      fail("model.byte_fallback", "is true; only byte-level BPE (false) is supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty())
        fail(std::string("model.") + key, "is set; byte-level BPE files leave it null");
    ignore_merges_ = m.value("ignore_merges", false);
    if (!m.contains("vocab") || !m["vocab"].is_object()) fail("model.vocab", "is missing or not an object");
    std::unordered_map<std::string, int32_t> vocab;
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
        fail("model.vocab", "maps \"" + it.key() + "\" to " + it.value().dump() + ", not a non-negative id");
      vocab.emplace(it.key(), it.value().get<int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    const json& jm = m.value("merges", json::array());
    merges.reserve(jm.size());
    for (size_t k = 0; k < jm.size(); ++k) {
      const json& e = jm[k];
      if (e.is_string()) {  // "a b", the older form
        const auto s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail("model.merges[" + std::to_string(k) + "]", "is \"" + s + "\", not two symbols separated by one space");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        fail("model.merges[" + std::to_string(k) + "]", "is " + e.dump() + ", neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
    bpe_ = std::make_unique<BpeModel>(std::move(vocab), merges, path_);
    for (const auto& [tok, id] : bpe_->vocab()) set_token(id, tok);
  }

  void set_token(int32_t id, const std::string& tok) {
    const auto idx = static_cast<size_t>(id);
    if (idx >= id_to_token_.size()) {
      id_to_token_.resize(idx + 1);
      has_id_.resize(idx + 1, false);
    }
    id_to_token_[idx] = tok;
    has_id_[idx] = true;
  }

  void load_added_tokens(const json& a) {
    if (!a.is_array()) fail("added_tokens", "is not an array");
    for (size_t k = 0; k < a.size(); ++k) {
      const json& t = a[k];
      const std::string field = "added_tokens[" + std::to_string(k) + "]";
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 ||
          !t.contains("content") || !t["content"].is_string() || t["content"].get<std::string>().empty())
        fail(field, "needs a non-negative integer id and a non-empty content");
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        if (t.value(key, false))
          fail(field + "." + key, "is true for \"" + t["content"].get<std::string>() + "\"; only false is supported");
      const bool special = t.value("special", false);
      // `tokenizers`' default: special tokens are matched on the raw text, the others normalized.
      AddedToken tok{t["content"].get<std::string>(), t["id"].get<int32_t>(), special, t.value("normalized", !special)};
      set_token(tok.id, tok.content);
      added_.push_back(tok);
    }
    // Longest first, so the first candidate matching at a position is the longest (leftmost-longest).
    // Without a normalizer every token is matched on the raw text.
    std::vector<AddedToken> sorted = added_;
    for (AddedToken& t : sorted) {
      t.normalized = nfc_ && t.normalized;
      if (t.normalized) t.content = nfc(t.content);
    }
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
    for (const auto& t : sorted)
      by_first_byte_[t.normalized ? 1 : 0][static_cast<unsigned char>(t.content[0])].push_back(t);
  }

  void load_pre_tokenizer(const json& p) {
    if (!p.is_object()) fail("pre_tokenizer", "is missing; byte-level BPE needs ByteLevel");
    const std::string type = p.value("type", std::string());
    if (type == "ByteLevel") {
      load_byte_level(p, "pre_tokenizer", true);
      return;
    }
    if (type != "Sequence") fail("pre_tokenizer.type", "is " + type + "; supported: ByteLevel, Sequence");
    const json& steps = p.value("pretokenizers", json::array());
    for (size_t k = 0; k < steps.size(); ++k) {
      const std::string field = "pre_tokenizer.pretokenizers[" + std::to_string(k) + "]";
      const json& s = steps[k];
      const std::string st = s.value("type", std::string());
      const bool last = k + 1 == steps.size();
      if (st == "ByteLevel" && last) {
        load_byte_level(s, field, false);
        return;
      }
      if (st != "Split" || last || !splits_.empty())
        fail(field + ".type", "is " + st + "; supported: one Split(Regex) followed by ByteLevel");
      if (s.value("behavior", std::string()) != "Isolated")
        fail(field + ".behavior", "is " + s.value("behavior", std::string("?")) + "; only Isolated is supported");
      if (s.value("invert", false)) fail(field + ".invert", "is true; only false is supported");
      const json& pat = s.value("pattern", json::object());
      if (!pat.contains("Regex") || !pat["Regex"].is_string())
        fail(field + ".pattern", "is " + pat.dump() + "; only a Regex pattern is supported");
      const auto regex = pat["Regex"].get<std::string>();
      const auto sp = split_pattern_from_regex(regex);
      if (!sp)
        fail(field + ".pattern.Regex", "is " + json(regex).dump() + ", not one recipe implements (GPT-2's " +
                                           json(std::string(split_pattern_regex(SplitPattern::kGpt2))).dump() +
                                           ", Llama 3's or Qwen2's)");
      splits_.push_back(*sp);
    }
    fail("pre_tokenizer.pretokenizers", "does not end with ByteLevel");
  }

  void load_byte_level(const json& b, const std::string& field, bool alone) {
    const bool use_regex = b.value("use_regex", true);
    add_prefix_space_ = b.value("add_prefix_space", false);
    if (!alone && use_regex)
      fail(field + ".use_regex", "is true after a Split; only ByteLevel(use_regex=false) follows a Split");
    if (!alone && add_prefix_space_)
      fail(field + ".add_prefix_space", "is true after a Split; only false is supported there");
    if (use_regex) splits_.push_back(SplitPattern::kGpt2);
  }

  void load_post_processor(const json& p, const std::string& field) {
    if (p.is_null()) return;
    const std::string type = p.value("type", std::string());
    if (type == "ByteLevel") return;  // offsets only
    if (type == "Sequence") {
      const json& ps = p.value("processors", json::array());
      for (size_t k = 0; k < ps.size(); ++k)
        load_post_processor(ps[k], field + ".processors[" + std::to_string(k) + "]");
      return;
    }
    if (type != "TemplateProcessing")
      fail(field + ".type", "is " + type + "; supported: TemplateProcessing, ByteLevel, Sequence");
    // single: [SpecialToken..., Sequence A, SpecialToken...]; the leading special is the BOS.
    const json& single = p.value("single", json::array());
    for (const json& item : single) {
      if (item.contains("Sequence")) break;
      if (!item.contains("SpecialToken")) continue;
      const auto name = item["SpecialToken"].value("id", std::string());
      const json& st = p.value("special_tokens", json::object());
      if (!st.contains(name) || st[name].value("ids", json::array()).size() != 1)
        fail(field + ".special_tokens", "does not give one id for \"" + name + "\"");
      if (bos_) fail(field + ".single", "prepends several special tokens; only one (the BOS) is supported");
      bos_ = st[name]["ids"][0].get<int32_t>();
    }
  }

  void choose_eod(const std::string& eod_token) {
    if (!eod_token.empty()) {
      if (auto id = special_id(eod_token)) {
        eod_ = *id;
        return;
      }
      auto it = bpe_->vocab().find(eod_token);
      if (it == bpe_->vocab().end())
        throw std::runtime_error(path_ + ": data.eod_token \"" + eod_token +
                                 "\" is neither an added token nor in the " +
                                 "vocabulary; added tokens: " + added_names());
      eod_ = it->second;
      return;
    }
    for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"}) {
      if (auto id = special_id(name)) {
        eod_ = *id;
        return;
      }
    }
    throw std::runtime_error(path_ + ": no end-of-document token (none of <|end_of_text|>, <|endoftext|>, </s>, " +
                             "<eos> is an added token); set data.eod_token (--eod-token) to one of: " + added_names());
  }

  std::string added_names() const {
    std::string s;
    for (const auto& t : added_) s += (s.empty() ? "" : ", ") + t.content;
    return s.empty() ? "(none)" : s;
  }

  std::vector<int32_t> encode_impl(const std::string& text, bool specials) const {
    std::vector<int32_t> ids;
    split_added(text, specials, 0, ids, [&](std::string_view raw) {
      if (!nfc_) return encode_plain(raw, ids);
      const std::string normalized = nfc(raw);
      split_added(normalized, specials, 1, ids, [&](std::string_view plain) { encode_plain(plain, ids); });
    });
    return ids;
  }

  // Cuts `text` at the added tokens of table `pass` (0: matched on the raw text, 1: on the
  // normalized text), appending each token's id and handing each stretch between them (possibly
  // empty) to `plain` in order.
  template <class Plain>
  void split_added(std::string_view text, bool specials, int pass, std::vector<int32_t>& ids, Plain&& plain) const {
    size_t seg = 0;  // start of the stretch of plain text before the next added token
    for (size_t p = 0; p < text.size();) {
      const AddedToken* hit = nullptr;
      for (const auto& t : by_first_byte_[size_t(pass)][static_cast<unsigned char>(text[p])]) {
        if ((specials || !t.special) && text.compare(p, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
      }
      if (hit == nullptr) {
        ++p;
        continue;
      }
      plain(text.substr(seg, p - seg));
      ids.push_back(hit->id);
      p += hit->content.size();
      seg = p;
    }
    plain(text.substr(seg));
  }

  void encode_plain(std::string_view text, std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    std::string prefixed;
    if (add_prefix_space_ && text.front() != ' ') {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    // Successive splits refine the pieces; no split leaves the stretch one piece.
    std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
    for (SplitPattern sp : splits_) {
      std::vector<std::pair<size_t, size_t>> finer;
      for (const auto& [b, n] : pieces)
        for (const auto& [b2, n2] : pretokenize(text.substr(b, n), sp)) finer.emplace_back(b + b2, n2);
      pieces.swap(finer);
    }
    for (const auto& [b, n] : pieces) encode_piece(text.substr(b, n), ids);
  }

  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
    std::string key(piece);
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> piece_ids = bpe_->encode_piece(piece, ignore_merges_);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCache) cache_.clear();
    cache_.emplace(std::move(key), std::move(piece_ids));
  }

  std::string path_;
  std::unique_ptr<BpeModel> bpe_;
  bool ignore_merges_ = false;
  bool add_prefix_space_ = false;
  std::vector<SplitPattern> splits_;
  std::vector<AddedToken> added_;
  bool nfc_ = false;  // the NFC normalizer
  // Per pass (see split_added), the added tokens by their first byte, longest first.
  std::array<std::array<std::vector<AddedToken>, 256>, 2> by_first_byte_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::optional<int32_t> bos_;
  int32_t eod_ = 0;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& tokenizer_json, const std::string& eod_token) {
  return std::make_unique<HfTokenizer>(tokenizer_json, eod_token);
}

}  // namespace recipe::data
