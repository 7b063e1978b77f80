// UTF-8 decoding/encoding and the Unicode character classes (\p{L}, \p{N}, \s) that the byte-level
// BPE pre-tokenizers (core/data/pretokenize.hpp) scan with. The class tables cover the whole Unicode
// range and are generated (core/data/unicode_tables.cpp, scripts/gen_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace recipe::data {

struct CodePoint {
  uint32_t cp;
  size_t begin, len;  // byte range in the source text
};

// Decodes UTF-8; an invalid or truncated sequence yields U+FFFD for one byte, so any input is accepted
// and the byte ranges still tile the input.
std::vector<CodePoint> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

bool is_letter(uint32_t cp);      // \p{L}: general category L
bool is_number(uint32_t cp);      // \p{N}: general category N
bool is_whitespace(uint32_t cp);  // \s: the White_Space property

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
};

namespace unicode_tables {
extern const CodePointRange kLetters[];
extern const size_t kLettersSize;
extern const CodePointRange kNumbers[];
extern const size_t kNumbersSize;
extern const CodePointRange kWhiteSpace[];
extern const size_t kWhiteSpaceSize;
}  // namespace unicode_tables

}  // namespace recipe::data
