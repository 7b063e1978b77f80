// "Did you mean ...?" for mistyped recipe keys and choice values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace recipe::dsl {

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions), case-insensitive.
int edit_distance(std::string_view a, std::string_view b);

// Words longer than this get no suggestions (no key or choice is near this long).
inline constexpr std::size_t kMaxSuggestWord = 128;

// Candidates close to `word`, best first, at most `max_results`. Close means a small edit distance
// relative to the word's length, or one name containing the other (e.g. "layers" / "num_layers").
std::vector<std::string> suggest(std::string_view word, const std::vector<std::string>& candidates,
                                 std::size_t max_results = 3);

// "a", "a or b", "a, b or c" — the wording used in fixes.
std::string join_or(const std::vector<std::string>& items);

// "; did you mean X?" / "; did you mean X or Y?" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean X or Y?" for suggestions already chosen; "" when `close` is empty.
std::string format_did_you_mean(const std::vector<std::string>& close);

}  // namespace recipe::dsl
