#include "dsl/key_lines.hpp"

#include <vector>

namespace recipe::dsl::load_detail {
namespace {

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::vector<std::string_view> code_lines(std::string_view source) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= source.size()) {
    std::size_t end = source.find('\n', start);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(start, end - start);
    // Comments would give false hits; a "--" inside a string is rare enough to ignore.
    if (std::size_t comment = line.find("--"); comment != std::string_view::npos) line = line.substr(0, comment);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

// Column just past `key` where the line assigns it (`key =` or `["key"] =`), searching from `col`.
std::size_t find_assignment(std::string_view line, std::size_t col, std::string_view key) {
  for (std::size_t at = line.find(key, col); at != std::string_view::npos; at = line.find(key, at + 1)) {
    std::size_t end = at + key.size();
    bool bracketed = at >= 2 && (line[at - 1] == '"' || line[at - 1] == '\'') && line[at - 2] == '[' &&
                     end + 1 < line.size() && line[end] == line[at - 1] && line[end + 1] == ']';
    if (bracketed)
      end += 2;
    else if ((at > 0 && is_ident_char(line[at - 1])) || (end < line.size() && is_ident_char(line[end])))
      continue;
    std::size_t eq = end;
    while (eq < line.size() && (line[eq] == ' ' || line[eq] == '\t')) ++eq;
    if (eq < line.size() && line[eq] == '=' && (eq + 1 >= line.size() || line[eq + 1] != '=')) return eq + 1;
  }
  return std::string_view::npos;
}

int search(const std::vector<std::string_view>& lines, int from_line, const std::string& dotted_path) {
  std::size_t row = static_cast<std::size_t>(from_line > 0 ? from_line - 1 : 0);
  std::size_t col = 0;
  std::size_t begin = 0;
  while (begin <= dotted_path.size()) {
    std::size_t dot = dotted_path.find('.', begin);
    if (dot == std::string::npos) dot = dotted_path.size();
    std::string_view key(dotted_path.data() + begin, dot - begin);
    bool found = false;
    for (; row < lines.size(); ++row, col = 0) {
      if (std::size_t next = find_assignment(lines[row], col, key); next != std::string_view::npos) {
        col = next;
        found = true;
        break;
      }
    }
    if (!found) return 0;
    begin = dot + 1;
  }
  return static_cast<int>(row) + 1;
}

}  // namespace

KeyLines::KeyLines(std::string_view source) : lines_(code_lines(source)) {}

int KeyLines::find(int from_line, const std::string& dotted_path) const {
  if (dotted_path.empty()) return 0;
  if (int line = search(lines_, from_line, dotted_path); line > 0) return line;
  return from_line > 1 ? search(lines_, 1, dotted_path) : 0;
}

int find_key_line(std::string_view source, int from_line, const std::string& dotted_path) {
  return KeyLines(source).find(from_line, dotted_path);
}

}  // namespace recipe::dsl::load_detail
