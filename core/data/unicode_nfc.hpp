// Unicode Normalization Form C (canonical decomposition, then canonical composition), as the
// `tokenizers` library's NFC normalizer applies it before pre-tokenizing (Qwen2's tokenizer.json).
// Computed by utf8proc (Debian's libutf8proc), not by tables of our own.
#pragma once

#include <string>
#include <string_view>

namespace recipe::data {

// NFC of UTF-8 text. Text whose code points are all below U+0300 (ASCII, Latin-1, Latin Extended)
// is returned as it is without a lookup: no such code point decomposes or composes with another.
// Bytes that are not valid UTF-8 (which `tokenizers` can never be given: its strings are valid)
// pass through unchanged and split the text: each valid run between them is normalized alone.
std::string nfc(std::string_view utf8);

}  // namespace recipe::data
