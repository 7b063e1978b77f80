// Internal to dsl/: a Lua value does not remember the line that set it, so origins of Lua recipes
// are found in the source text instead: the first `key =` for each part of the dotted path, each
// after the previous part (a section's keys follow the section's name).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace recipe::dsl::load_detail {

// 1-based line of `dotted_path` (e.g. "trainer.max_steps") in `source`, searching from `from_line`
// and, failing that, from the top. 0 when the text does not spell it out.
int find_key_line(std::string_view source, int from_line, const std::string& dotted_path);

// The same lookup for many keys of one text. The text is read once into an index of every
// assignment (`key =`, `["key"] =`) by key, so each lookup is a few binary searches: scanning the
// text per key made a recipe of N keys cost O(N²).
class KeyLines {
 public:
  explicit KeyLines(std::string_view source);
  int find(int from_line, const std::string& dotted_path) const;

  struct Assignment {
    int row;           // 0-based line
    std::size_t at;    // column where the key starts
    std::size_t next;  // column just past its '='
  };

 private:
  int search(int from_line, const std::string& dotted_path) const;
  std::unordered_map<std::string, std::vector<Assignment>> index_;  // key → assignments, in text order
};

}  // namespace recipe::dsl::load_detail
