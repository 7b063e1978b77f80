// `recipe runs diff`: key-by-key differences of two runs' resolved.toml, and of their final metrics.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace recipe::exec {

// A TOML document flattened to dotted keys ("parallelism.tp" → "2"); values rendered as TOML
// text (strings quoted, arrays inline), so equal values compare equal as strings.
std::map<std::string, std::string> flatten_toml_file(const std::string& path);
std::map<std::string, std::string> flatten_toml_text(const std::string& text, const std::string& source_name);

struct KeyDiff {
  std::string key;
  std::optional<std::string> a, b;  // nullopt = key absent on that side
};
std::vector<KeyDiff> diff_maps(const std::map<std::string, std::string>& a,
                               const std::map<std::string, std::string>& b);

struct RunsDiff {
  std::vector<KeyDiff> config;   // resolved.toml differences, sorted by key
  std::vector<KeyDiff> metrics;  // final metrics (steps, loss, val loss, lr, grad norm, tok/s, state)
};
// Throws std::runtime_error when either resolved.toml is missing or does not parse.
RunsDiff diff_runs(const std::string& run_a, const std::string& run_b);

}  // namespace recipe::exec
