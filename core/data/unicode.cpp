// UTF-8 decoding/encoding and character class lookups over the generated range tables.
#include "core/data/unicode.hpp"

#include <algorithm>

namespace recipe::data {

std::vector<CodePoint> decode_utf8(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    uint32_t cp = c;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1FU;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0FU;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07U;
    } else if (c >= 0x80) {
      out.push_back({0xFFFD, i, 1});
      ++i;
      continue;
    }
    bool ok = i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0U) != 0x80U)
        ok = false;
      else
        cp = (cp << 6U) | (cc & 0x3FU);
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
    out.push_back(static_cast<char>(0xC0U | (cp >> 6U)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0U | (cp >> 12U)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  } else {
    out.push_back(static_cast<char>(0xF0U | (cp >> 18U)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 12U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  }
}

namespace {

bool in_ranges(uint32_t cp, const CodePointRange* r, size_t n) {
  const CodePointRange* end = r + n;
  const CodePointRange* it = std::upper_bound(r, end, cp, [](uint32_t v, const CodePointRange& x) { return v < x.lo; });
  return it != r && cp <= (it - 1)->hi;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20U) >= 'a' && (cp | 0x20U) <= 'z';
  return in_ranges(cp, unicode_tables::kLetters, unicode_tables::kLettersSize);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(cp, unicode_tables::kNumbers, unicode_tables::kNumbersSize);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(cp, unicode_tables::kWhiteSpace, unicode_tables::kWhiteSpaceSize);
}

}  // namespace recipe::data
