// Pre-tokenizers of byte-level BPE tokenizers: the Split regexes real models ship, recognized by their
// exact pattern string and run as hand-written scanners over code points (std::regex has no \p{..}
// classes, and no regex library is a dependency). Each scanner follows the regex's semantics exactly:
// alternatives tried in order at each position, greedy quantifiers with backtracking worked out by
// hand, \p{L}/\p{N}/\s over the whole Unicode range (core/data/unicode.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace recipe::data {

enum class SplitPattern {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   // Llama 3's with \p{N} (one digit per piece) instead of \p{N}{1,3}
};

// The exact regex text of each pattern, as a tokenizer.json writes it (after JSON unescaping).
std::string_view split_pattern_regex(SplitPattern p);
// The pattern whose regex text is `regex`, or nullopt.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// Byte ranges {begin, length} of the pieces of `text`, in order; together they tile `text`.
std::vector<std::pair<size_t, size_t>> pretokenize(std::string_view text, SplitPattern pattern);

}  // namespace recipe::data
