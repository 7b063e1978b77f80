// Bounds on what a message echoes of a recipe. A key or value can be megabytes long (a fuzzed key,
// a `string.rep` in Lua); a message shows its start and its size, never the whole of it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace recipe::dsl {

inline constexpr std::size_t kMaxShownWord = 512;      // one key or value in a message (a long path fits)
inline constexpr std::size_t kMaxShownMessage = 4096;  // a whole message, whatever it quotes

// `s` itself when it has at most `max` bytes; else its first `max` bytes (never splitting a UTF-8
// character) and "… (N bytes)".
std::string shown_value(std::string_view s, std::size_t max = kMaxShownWord);

// `s` with every run without spaces longer than kMaxShownWord shown by shown_value, then the
// whole bounded to kMaxShownMessage the same way. Messages of the engine's own words pass as they are.
std::string bounded_message(std::string_view s);

}  // namespace recipe::dsl
