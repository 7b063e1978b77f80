// NFC through utf8proc (see unicode_nfc.hpp).
#include "core/data/unicode_nfc.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace recipe::data {

namespace {

// NFC of a valid UTF-8 run, appended to `out`. utf8proc_map with an explicit length (no
// UTF8PROC_NULLTERM) reads NUL as a code point like any other; STABLE | COMPOSE is utf8proc_NFC.
void append_nfc(std::string& out, std::string_view run) {
  if (run.empty()) return;
  utf8proc_uint8_t* dst = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()), utf8proc_ssize_t(run.size()), &dst,
                   utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw std::runtime_error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(dst), size_t(n));
  std::free(dst);
}

}  // namespace

std::string nfc(std::string_view s) {
  // U+0300 is the first code point with a lead byte of 0xCC; every byte below that is ASCII, a
  // continuation byte or the lead byte of a code point below U+0300.
  if (std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; }))
    return std::string(s);
  std::string out;
  out.reserve(s.size());
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t run = 0, p = 0;
  while (p < s.size()) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + p, utf8proc_ssize_t(s.size() - p), &cp);
    if (n > 0) {
      p += size_t(n);
      continue;
    }
    append_nfc(out, s.substr(run, p - run));
    out += s[p];  // not UTF-8: kept as it is
    run = ++p;
  }
  append_nfc(out, s.substr(run, p - run));
  return out;
}

}  // namespace recipe::data
