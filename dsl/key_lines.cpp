#include "dsl/key_lines.hpp"

#include <algorithm>
#include <utility>
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

}  // namespace

KeyLines::KeyLines(std::string_view source) {
  const auto lines = code_lines(source);
  for (std::size_t row = 0; row < lines.size(); ++row) {
    const std::string_view line = lines[row];
    std::size_t i = 0;
    while (i < line.size()) {
      // A key: a whole identifier, or a quoted name in brackets (["key"] or ['key']).
      std::size_t at = 0, end = 0;
      if (is_ident_char(line[i])) {
        at = i;
        end = i;
        while (end < line.size() && is_ident_char(line[end])) ++end;
        i = end;
      } else if (line[i] == '[' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\'')) {
        const char quote = line[i + 1];
        const std::size_t close = line.find(quote, i + 2);
        if (close == std::string_view::npos || close + 1 >= line.size() || line[close + 1] != ']') {
          i += 2;
          continue;
        }
        at = i + 2;
        end = close;
        i = close + 2;
      } else {
        ++i;
        continue;
      }
      std::size_t eq = i;
      while (eq < line.size() && (line[eq] == ' ' || line[eq] == '\t')) ++eq;
      if (eq < line.size() && line[eq] == '=' && (eq + 1 >= line.size() || line[eq + 1] != '='))
        index_[std::string(line.substr(at, end - at))].push_back({static_cast<int>(row), at, eq + 1});
    }
  }
}

// Each part of the path is the first assignment of that key at or after where the previous part's
// value starts (row, column), as the text reads.
int KeyLines::search(int from_line, const std::string& dotted_path) const {
  int row = from_line > 0 ? from_line - 1 : 0;
  std::size_t col = 0;
  std::size_t begin = 0;
  while (begin <= dotted_path.size()) {
    std::size_t dot = dotted_path.find('.', begin);
    if (dot == std::string::npos) dot = dotted_path.size();
    const auto it = index_.find(dotted_path.substr(begin, dot - begin));
    if (it == index_.end()) return 0;
    const auto& hits = it->second;
    const auto hit = std::lower_bound(hits.begin(), hits.end(), std::make_pair(row, col),
                                      [](const Assignment& a, const std::pair<int, std::size_t>& p) {
                                        return a.row != p.first ? a.row < p.first : a.at < p.second;
                                      });
    if (hit == hits.end()) return 0;
    row = hit->row;
    col = hit->next;
    begin = dot + 1;
  }
  return row + 1;
}

int KeyLines::find(int from_line, const std::string& dotted_path) const {
  if (dotted_path.empty()) return 0;
  if (int line = search(from_line, dotted_path); line > 0) return line;
  return from_line > 1 ? search(1, dotted_path) : 0;
}

int find_key_line(std::string_view source, int from_line, const std::string& dotted_path) {
  return KeyLines(source).find(from_line, dotted_path);
}

}  // namespace recipe::dsl::load_detail
