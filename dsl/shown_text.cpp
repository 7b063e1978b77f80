// Bounds on what a message echoes of a recipe (see shown_text.hpp).
#include "dsl/shown_text.hpp"

namespace recipe::dsl {

std::string shown_value(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // inside a character
  return std::string(s.substr(0, cut)) + "… (" + std::to_string(s.size()) + " bytes)";
}

std::string bounded_message(std::string_view s) {
  if (s.size() <= kMaxShownWord) return std::string(s);
  std::string out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t space = s.find(' ', pos);
    const std::size_t end = space == std::string_view::npos ? s.size() : space;
    out += shown_value(s.substr(pos, end - pos));
    if (space == std::string_view::npos) break;
    out += ' ';
    pos = space + 1;
  }
  return shown_value(out, kMaxShownMessage);
}

}  // namespace recipe::dsl
