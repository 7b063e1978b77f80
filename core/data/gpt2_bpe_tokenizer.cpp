// GPT-2 byte-level BPE.
//
// Encoding: (1) pre-tokenize the text as GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, scanning code points by hand (std::regex has no \p{..}); letters and numbers are recognized
// by a range table covering the common scripts, not the full Unicode database; (2) spell each
// pre-token's UTF-8 bytes in GPT-2's printable byte alphabet (bytes_to_unicode: printable Latin-1
// bytes stand for themselves, the other 68 bytes map to U+0100..U+0143 in byte order); (3) merge
// adjacent symbols, lowest merge rank first, until no listed merge applies; (4) look symbols up in
// vocab.json. Pre-token results are cached.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "core/data/tokenizer.hpp"

namespace recipe::data {

namespace {

struct CodePoint {
  uint32_t cp;
  size_t begin, len;  // byte range in the source text
};

// Decodes UTF-8; an invalid or truncated sequence yields U+FFFD for one byte, so any input is accepted.
std::vector<CodePoint> decode_utf8(const std::string& s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    uint32_t cp = c;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else if (c >= 0x80) {
      out.push_back({0xFFFD, i, 1});
      ++i;
      continue;
    }
    bool ok = i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back({0xFFFD, i, 1});
      ++i;
      continue;
    }
    out.push_back({cp, i, len});
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct Range {
  uint32_t lo, hi;
};

bool in_ranges(uint32_t cp, const Range* r, size_t n) {
  const Range* end = r + n;
  const Range* it = std::upper_bound(r, end, cp, [](uint32_t v, const Range& x) { return v < x.lo; });
  return it != r && cp <= (it - 1)->hi;
}

// \p{L} for Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Thai, Georgian, Hangul,
// kana, CJK and fullwidth Latin (sorted, disjoint).
constexpr Range kLetters[] = {
    {0x41, 0x5A},     {0x61, 0x7A},     {0xAA, 0xAA},     {0xB5, 0xB5},     {0xBA, 0xBA},     {0xC0, 0xD6},
    {0xD8, 0xF6},     {0xF8, 0x2C1},    {0x2C6, 0x2D1},   {0x2E0, 0x2E4},   {0x2EC, 0x2EC},   {0x2EE, 0x2EE},
    {0x370, 0x374},   {0x376, 0x377},   {0x37A, 0x37D},   {0x37F, 0x37F},   {0x386, 0x386},   {0x388, 0x3F5},
    {0x3F7, 0x481},   {0x48A, 0x52F},   {0x531, 0x556},   {0x559, 0x559},   {0x560, 0x588},   {0x5D0, 0x5EA},
    {0x5EF, 0x5F2},   {0x620, 0x64A},   {0x66E, 0x66F},   {0x671, 0x6D3},   {0x6D5, 0x6D5},   {0x6FA, 0x6FC},
    {0x904, 0x939},   {0x93D, 0x93D},   {0x950, 0x950},   {0x958, 0x961},   {0x971, 0x980},   {0xE01, 0xE30},
    {0xE32, 0xE33},   {0xE40, 0xE46},   {0x10A0, 0x10C5}, {0x10D0, 0x10FA}, {0x10FC, 0x10FF}, {0x1100, 0x11FF},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F7D}, {0x1F80, 0x1FBC},
    {0x1FC2, 0x1FCC}, {0x1FD0, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FFC}, {0x3041, 0x3096}, {0x309D, 0x309F},
    {0x30A1, 0x30FA}, {0x30FC, 0x30FF}, {0x3105, 0x312F}, {0x3131, 0x318E}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF},
    {0xAC00, 0xD7A3}, {0xF900, 0xFAFF}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFFBE}, {0x20000, 0x2FA1F}};

// \p{N}: decimal digits, superscripts/subscripts, vulgar fractions, Roman numerals, circled numbers.
constexpr Range kNumbers[] = {{0x30, 0x39},     {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x660, 0x669},
                              {0x6F0, 0x6F9},   {0x966, 0x96F},   {0xE50, 0xE59},   {0x2070, 0x2070}, {0x2074, 0x2079},
                              {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
                              {0x3007, 0x3007}, {0x3021, 0x3029}, {0xFF10, 0xFF19}};

// \s: the Unicode White_Space property.
constexpr Range kSpaces[] = {{0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
                             {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

bool is_letter(uint32_t cp) { return in_ranges(cp, kLetters, std::size(kLetters)); }
bool is_number(uint32_t cp) { return in_ranges(cp, kNumbers, std::size(kNumbers)); }
bool is_space(uint32_t cp) { return in_ranges(cp, kSpaces, std::size(kSpaces)); }
bool is_other(uint32_t cp) { return !is_space(cp) && !is_letter(cp) && !is_number(cp); }

// Byte ranges of the pre-tokens of `text`, alternatives tried in the pattern's order.
std::vector<std::pair<size_t, size_t>> pretokenize(const std::string& text) {
  const auto c = decode_utf8(text);
  const size_t n = c.size();
  std::vector<std::pair<size_t, size_t>> out;
  auto emit = [&](size_t from, size_t to) {  // code point range [from, to)
    out.emplace_back(c[from].begin, c[to - 1].begin + c[to - 1].len - c[from].begin);
  };
  auto at = [&](size_t k) { return k < n ? c[k].cp : 0xFFFFFFFFu; };
  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c[i].cp == '\'') {
      const uint32_t a = at(i + 1), b = at(i + 2);
      size_t len = 0;
      if (a == 's' || a == 't')
        len = 2;
      else if ((a == 'r' || a == 'v') && b == 'e')
        len = 3;
      else if (a == 'm')
        len = 2;
      else if (a == 'l' && b == 'l')
        len = 3;
      else if (a == 'd')
        len = 2;
      if (len > 0) {
        emit(i, i + len);
        i += len;
        continue;
      }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
    const size_t k = (c[i].cp == ' ' && i + 1 < n) ? i + 1 : i;
    bool (*const classes[])(uint32_t) = {is_letter, is_number, is_other};
    bool matched = false;
    for (auto cls : classes) {
      size_t start = cls(c[k].cp) ? k : (cls(c[i].cp) ? i : n);
      if (start == n) continue;
      size_t end = start;
      while (end < n && cls(c[end].cp)) ++end;
      emit(i, end);
      i = end;
      matched = true;
      break;
    }
    if (matched) continue;
    // `\s+(?!\S)` then `\s+`: a whitespace run followed by a non-space leaves its last space to
    // prefix the next word.
    size_t end = i;
    while (end < n && is_space(c[end].cp)) ++end;
    if (end < n && end - i >= 2) --end;
    emit(i, end);
    i = end;
  }
  return out;
}

// GPT-2's bytes_to_unicode table.
std::array<uint32_t, 256> byte_to_codepoint_table() {
  std::array<uint32_t, 256> t{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<uint32_t>(b) : next++;
  return t;
}

std::string read_text_file(const std::string& path, const char* what) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": " + what + " not found");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open " + what);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  Gpt2BpeTokenizer(const std::string& vocab_path, const std::string& merges_path) {
    const auto byte_cp = byte_to_codepoint_table();
    for (int b = 0; b < 256; ++b) {
      byte_symbol_[b].clear();
      append_utf8(byte_symbol_[b], byte_cp[b]);
      codepoint_byte_[byte_cp[b]] = static_cast<unsigned char>(b);
    }
    load_vocab(vocab_path);
    load_merges(merges_path);
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (const auto& [begin, len] : pretokenize(text)) {
      const std::string piece = text.substr(begin, len);
      {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(piece);
        if (it != cache_.end()) {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      std::vector<int32_t> piece_ids = bpe(piece);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      std::lock_guard<std::mutex> lock(cache_mutex_);
      if (cache_.size() >= kMaxCache) cache_.clear();
      cache_.emplace(piece, std::move(piece_ids));
    }
    return ids;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string symbols;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)])
        throw std::out_of_range("gpt2_bpe: id " + std::to_string(id) + " is not in " + vocab_path_);
      symbols += id_to_token_[static_cast<size_t>(id)];
    }
    std::string bytes;
    for (const auto& cp : decode_utf8(symbols)) {
      auto it = codepoint_byte_.find(cp.cp);
      if (it != codepoint_byte_.end())
        bytes.push_back(static_cast<char>(it->second));
      else
        bytes.append(symbols, cp.begin, cp.len);  // not a byte symbol: keep the text as written
    }
    return bytes;
  }

  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  int32_t eod_id() const override { return eod_; }
  std::string name() const override { return "gpt2_bpe"; }

 private:
  static constexpr size_t kMaxCache = 1 << 18;

  void load_vocab(const std::string& path) {
    vocab_path_ = path;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text_file(path, "GPT-2 vocab.json"));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ": not valid JSON: " + e.what());
    }
    if (!j.is_object() || j.empty())
      throw std::runtime_error(path + ": expected a JSON object mapping tokens to ids (GPT-2 vocab.json)");
    int64_t max_id = -1;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
        throw std::runtime_error(path + ": token \"" + it.key() + "\" maps to " + it.value().dump() +
                                 ", not a non-negative integer id");
      const int32_t id = it.value().get<int32_t>();
      vocab_.emplace(it.key(), id);
      max_id = std::max<int64_t>(max_id, id);
    }
    id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
    has_id_.assign(static_cast<size_t>(max_id + 1), false);
    for (const auto& [tok, id] : vocab_) {
      id_to_token_[static_cast<size_t>(id)] = tok;
      has_id_[static_cast<size_t>(id)] = true;
    }
    auto eod = vocab_.find("<|endoftext|>");
    if (eod == vocab_.end())
      throw std::runtime_error(path + ": no <|endoftext|> token, which GPT-2 uses to end a document");
    eod_ = eod->second;
  }

  void load_merges(const std::string& path) {
    const std::string text = read_text_file(path, "GPT-2 merges.txt");
    size_t pos = 0;
    int line_no = 0;
    int rank = 0;
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
      ranks_.emplace(line, rank++);  // the key is "first second", the lookup form used in bpe()
    }
  }

  std::vector<int32_t> bpe(const std::string& piece) const {
    std::vector<std::string> symbols;
    for (unsigned char b : piece) symbols.push_back(byte_symbol_[b]);
    while (symbols.size() > 1) {
      int best_rank = INT32_MAX;
      size_t best = 0;
      for (size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = ranks_.find(symbols[k] + ' ' + symbols[k + 1]);
        if (it != ranks_.end() && it->second < best_rank) {
          best_rank = it->second;
          best = k;
        }
      }
      if (best_rank == INT32_MAX) break;
      const std::string first = symbols[best], second = symbols[best + 1];
      std::vector<std::string> merged;
      merged.reserve(symbols.size());
      for (size_t k = 0; k < symbols.size();) {
        if (k + 1 < symbols.size() && symbols[k] == first && symbols[k + 1] == second) {
          merged.push_back(first + second);
          k += 2;
        } else {
          merged.push_back(symbols[k++]);
        }
      }
      symbols.swap(merged);
    }
    std::vector<int32_t> ids;
    ids.reserve(symbols.size());
    for (const auto& s : symbols) {
      auto it = vocab_.find(s);
      if (it == vocab_.end())
        throw std::runtime_error(vocab_path_ + ": symbol \"" + s + "\" (from the text \"" + piece +
                                 "\") is not in the vocabulary; vocab.json and merges.txt do not belong together");
      ids.push_back(it->second);
    }
    return ids;
  }

  std::string vocab_path_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<std::string, int> ranks_;
  std::array<std::string, 256> byte_symbol_;
  std::unordered_map<uint32_t, unsigned char> codepoint_byte_;
  int32_t eod_ = 0;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_json, const std::string& merges_txt) {
  return std::make_unique<Gpt2BpeTokenizer>(vocab_json, merges_txt);
}

}  // namespace recipe::data
