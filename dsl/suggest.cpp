#include "dsl/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace recipe::dsl {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

}  // namespace

int edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = lowered(a_in), b = lowered(b_in);
  const std::size_t n = a.size(), m = b.size();
  // Full table: keys are short, and transpositions need the row two back.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::vector<std::string> suggest(std::string_view word, const std::vector<std::string>& candidates,
                                 std::size_t max_results) {
  // Each comparison costs |word|·|candidate|: a word far longer than any name (a fuzzed 1 MB key) is
  // no typo of one, and is suggested nothing rather than compared with every candidate.
  if (word.size() > kMaxSuggestWord) return {};
  const std::string w = lowered(word);
  // Two edits turn most 3- and 4-letter words into some other key ("foo" → "qos"): one for those.
  const int threshold = w.size() <= 4 ? 1 : std::max<int>(2, static_cast<int>(w.size()) / 3);
  std::vector<std::pair<int, std::string>> scored;
  for (const auto& c : candidates) {
    if (c == word) continue;
    const std::string lc = lowered(c);
    const bool contains =
        w.size() >= 3 && lc.size() >= 3 && (lc.find(w) != std::string::npos || w.find(lc) != std::string::npos);
    // The distance is at least the difference in length: skip the table when that already fails.
    const int length_gap = std::abs(static_cast<int>(w.size()) - static_cast<int>(lc.size()));
    if (length_gap > threshold && !contains) continue;
    int score = edit_distance(w, lc);
    if (score > threshold && !contains) continue;
    if (contains) score = std::min(score, threshold);
    scored.emplace_back(score, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [score, c] : scored) {
    if (std::find(out.begin(), out.end(), c) != out.end()) continue;
    out.push_back(c);
    if (out.size() == max_results) break;
  }
  return out;
}

std::string join_or(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += (i + 1 == items.size()) ? " or " : ", ";
    out += items[i];
  }
  return out;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  return format_did_you_mean(suggest(word, candidates));
}

std::string format_did_you_mean(const std::vector<std::string>& close) {
  if (close.empty()) return "";
  return "; did you mean " + join_or(close) + "?";
}

}  // namespace recipe::dsl
