// Hand-written scanners for the byte-level BPE split regexes (see pretokenize.hpp).
#include "core/data/pretokenize.hpp"

#include <array>

#include "core/data/unicode.hpp"

namespace recipe::data {

namespace {

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr uint32_t kNone = 0xFFFFFFFFU;  // past the end of the text: in no class

bool is_other(uint32_t cp) { return cp != kNone && !is_whitespace(cp) && !is_letter(cp) && !is_number(cp); }
bool is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Length of the contraction at `at(i)` == '\'' (0 if none): 's 't 're 've 'm 'll 'd. Case-insensitive
// matching uses Unicode simple case folding, under which S, s and U+017F (long s) are equal; none of
// the other letters has a non-ASCII fold partner.
size_t contraction(uint32_t a, uint32_t b, bool ignore_case) {
  auto fold = [ignore_case](uint32_t cp) -> uint32_t {
    if (!ignore_case) return cp;
    if (cp == 0x17F) return 's';
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  };
  a = fold(a);
  b = fold(b);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' || a == 'v') && b == 'e') return 3;
  if (a == 'l' && b == 'l') return 3;
  return 0;
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : cps_(decode_utf8(text)), n_(cps_.size()) {}

  std::vector<std::pair<size_t, size_t>> run(SplitPattern p) {
    size_t i = 0;
    while (i < n_) {
      const size_t end = p == SplitPattern::kGpt2 ? gpt2_step(i) : llama3_step(i, p == SplitPattern::kQwen2 ? 1 : 3);
      out_.emplace_back(cps_[i].begin, cps_[end - 1].begin + cps_[end - 1].len - cps_[i].begin);
      i = end;
    }
    return std::move(out_);
  }

 private:
  uint32_t at(size_t k) const { return k < n_ ? cps_[k].cp : kNone; }
  template <class Pred>
  size_t run_of(size_t k, Pred pred) const {
    while (k < n_ && pred(cps_[k].cp)) ++k;
    return k;
  }

  // \s+(?!\S) then \s+ at a whitespace code point: a run followed by a non-space gives up its last
  // space (which then prefixes the next piece), unless that would leave the run empty.
  size_t whitespace_tail(size_t i) const {
    const size_t e = run_of(i, is_whitespace);
    return (e < n_ && e - i >= 2) ? e - 1 : e;
  }

  // One piece of GPT-2's pattern starting at i; returns its end.
  size_t gpt2_step(size_t i) const {
    if (at(i) == '\'') {
      if (const size_t len = contraction(at(i + 1), at(i + 2), false)) return i + len;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`, in that order (a space is in none of the classes,
    // so skipping the optional space never helps).
    const size_t k = at(i) == ' ' ? i + 1 : i;
    for (bool (*cls)(uint32_t) : std::array<bool (*)(uint32_t), 3>{is_letter, is_number, is_other}) {
      if (cls(at(k))) return run_of(k, cls);
    }
    return whitespace_tail(i);
  }

  // One piece of Llama 3's (max_digits 3) or Qwen2's (max_digits 1) pattern starting at i.
  size_t llama3_step(size_t i, size_t max_digits) const {
    const uint32_t c = at(i);
    if (c == '\'') {
      if (const size_t len = contraction(at(i + 1), at(i + 2), true)) return i + len;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_crlf(c) && !is_letter(c) && !is_number(c) && is_letter(at(i + 1))) return run_of(i + 1, is_letter);
    if (is_letter(c)) return run_of(i, is_letter);
    // \p{N}{1,max_digits}
    if (is_number(c)) {
      size_t e = i;
      while (e < n_ && e - i < max_digits && is_number(at(e))) ++e;
      return e;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    size_t j = n_;
    if (c == ' ' && is_other(at(i + 1)))
      j = i + 1;
    else if (is_other(c))
      j = i;
    if (j != n_) return run_of(run_of(j, is_other), is_crlf);
    // c is whitespace. `\s*[\r\n]+`: the greedy \s* backs off to the run's last CR/LF.
    const size_t e = run_of(i, is_whitespace);
    for (size_t k = e; k > i; --k) {
      if (is_crlf(at(k - 1))) return k;
    }
    return whitespace_tail(i);
  }

  std::vector<CodePoint> cps_;
  size_t n_;
  std::vector<std::pair<size_t, size_t>> out_;
};

}  // namespace

std::string_view split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2:
      return kGpt2Regex;
    case SplitPattern::kLlama3:
      return kLlama3Regex;
    case SplitPattern::kQwen2:
      return kQwen2Regex;
  }
  return {};
}

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    if (regex == split_pattern_regex(p)) return p;
  }
  return std::nullopt;
}

std::vector<std::pair<size_t, size_t>> pretokenize(std::string_view text, SplitPattern pattern) {
  return Scanner(text).run(pattern);
}

}  // namespace recipe::data
