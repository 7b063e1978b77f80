// Name and value rules for launch scripts (see script_values.hpp).
#include "plan/script_values.hpp"

#include <cstdio>

namespace recipe::plan {

namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.' || c == '_' || c == '-'; }

}  // namespace

bool is_env_name(std::string_view s) {
  if (s.empty() || !(is_alpha(s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(is_alpha(c) || is_digit(c) || c == '_')) return false;
  return true;
}

bool is_slurm_name(std::string_view s, bool allow_list) {
  if (s.empty()) return false;
  bool part_empty = true;
  for (char c : s) {
    if (allow_list && c == ',') {
      if (part_empty) return false;
      part_empty = true;
      continue;
    }
    if (!is_name_char(c)) return false;
    part_empty = false;
  }
  return !part_empty;
}

std::size_t find_control_char(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

bool is_folder_name(std::string_view s) {
  if (s.empty() || s.size() > kMaxFolderName || s == "." || s == "..") return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

}  // namespace recipe::plan
