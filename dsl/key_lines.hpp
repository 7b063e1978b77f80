// Internal to dsl/: a Lua value does not remember the line that set it, so origins of Lua recipes
// are found in the source text instead: the first `key =` for each part of the dotted path, each
// after the previous part (a section's keys follow the section's name).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace recipe::dsl::load_detail {

// 1-based line of `dotted_path` (e.g. "trainer.max_steps") in `source`, searching from `from_line`
// and, failing that, from the top. 0 when the text does not spell it out.
int find_key_line(std::string_view source, int from_line, const std::string& dotted_path);

// The same lookup for many keys of one text: the text is split into lines once (a recipe of N keys
// would otherwise split it N times). Views into `source`, which must outlive this.
class KeyLines {
 public:
  explicit KeyLines(std::string_view source);
  int find(int from_line, const std::string& dotted_path) const;

 private:
  std::vector<std::string_view> lines_;
};

}  // namespace recipe::dsl::load_detail
