// Byte alphabet and ranked BPE merges shared by the byte-level BPE tokenizers.
#include "core/data/byte_level_bpe.hpp"

#include <climits>
#include <stdexcept>

#include "core/data/unicode.hpp"

namespace recipe::data {

namespace {

struct Alphabet {
  std::array<std::string, 256> symbol;
  std::array<int, 0x144> byte_of{};  // alphabet code point → byte, -1 if none; every code point is < 0x144
  Alphabet() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(symbol[static_cast<size_t>(b)], cp);
      byte_of[cp] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::array<std::string, 256>& byte_level_symbols() { return alphabet().symbol; }

std::optional<unsigned char> byte_level_byte(uint32_t cp) {
  if (cp >= alphabet().byte_of.size() || alphabet().byte_of[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(alphabet().byte_of[cp]);
}

std::string byte_level_spell(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += alphabet().symbol[b];
  return out;
}

std::optional<std::string> byte_level_unspell(std::string_view symbols) {
  std::string out;
  for (const CodePoint& c : decode_utf8(symbols)) {
    const auto b = byte_level_byte(c.cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, const std::string& source)
    : vocab_(std::move(vocab)) {
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(alphabet().symbol[static_cast<size_t>(b)]);
    if (it == vocab_.end())
      throw std::runtime_error(source + ": the byte 0x" + "0123456789ABCDEF"[b >> 4] + "0123456789ABCDEF"[b & 15] +
                               " (symbol \"" + alphabet().symbol[static_cast<size_t>(b)] +
                               "\") is not in the vocabulary; a byte-level BPE vocabulary holds all 256 bytes");
    byte_id_[static_cast<size_t>(b)] = it->second;
  }
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& [a, b] : merges) {
    auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
    for (const auto& [it, what] : {std::pair{ia, &a}, std::pair{ib, &b}}) {
      if (it == vocab_.end())
        throw std::runtime_error(source + ": merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b + "\"): \"" +
                                 *what + "\" is not in the vocabulary");
    }
    if (im == vocab_.end())
      throw std::runtime_error(source + ": merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b +
                               "\"): the merged symbol \"" + a + b + "\" is not in the vocabulary");
    merges_.try_emplace(key(ia->second, ib->second), Merge{rank, im->second});  // a repeated pair keeps its first rank
    ++rank;
  }
}

std::vector<int32_t> BpeModel::encode_piece(std::string_view bytes, bool ignore_merges) const {
  if (ignore_merges) {
    auto it = vocab_.find(byte_level_spell(bytes));
    if (it != vocab_.end()) return {it->second};
  }
  std::vector<int32_t> ids;
  ids.reserve(bytes.size());
  for (unsigned char b : bytes) ids.push_back(byte_id_[b]);
  std::vector<int32_t> merged;
  while (ids.size() > 1) {
    int32_t best_rank = INT32_MAX;
    uint64_t best_key = 0;
    Merge best{};
    for (size_t k = 0; k + 1 < ids.size(); ++k) {
      const uint64_t kk = key(ids[k], ids[k + 1]);
      auto it = merges_.find(kk);
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_key = kk;
        best = it->second;
      }
    }
    if (best_rank == INT32_MAX) break;
    merged.clear();
    for (size_t k = 0; k < ids.size();) {
      if (k + 1 < ids.size() && key(ids[k], ids[k + 1]) == best_key) {
        merged.push_back(best.id);
        k += 2;
      } else {
        merged.push_back(ids[k++]);
      }
    }
    ids.swap(merged);
  }
  return ids;
}

}  // namespace recipe::data
