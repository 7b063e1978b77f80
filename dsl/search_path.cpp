// Where recipes live: the search path, preset lookup, and "did you mean" suggestions.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "dsl/dsl.hpp"
#include "dsl/recipe_files.hpp"

namespace fs = std::filesystem;

namespace recipe::dsl {
namespace {

// The presets shipped with the program: an explicit $RECIPE_HOME, else an installed tree next to
// the executable (<prefix>/bin/recipe → <prefix>/share/recipe/recipes), else the source checkout.
std::string builtin_presets_dir() {
  if (const char* home = std::getenv("RECIPE_HOME"); home && *home) return (fs::path(home) / "recipes").string();
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path() / ".." / "share" / "recipe" / "recipes";
    if (fs::is_directory(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  }
#ifdef RECIPE_SOURCE_DIR
  return std::string(RECIPE_SOURCE_DIR) + "/recipes";
#else
  return {};
#endif
}

}  // namespace

std::vector<std::string> recipe_search_path(const std::string& recipe_file) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RECIPE_PATH"); env && *env) {
    std::stringstream entries(env);
    for (std::string entry; std::getline(entries, entry, ':');)
      if (!entry.empty()) candidates.push_back(entry);
  }
  if (!recipe_file.empty()) {
    fs::path folder = fs::path(recipe_file).parent_path();
    candidates.push_back(folder.empty() ? std::string(".") : folder.string());
  }
  if (std::string builtin = builtin_presets_dir(); !builtin.empty()) candidates.push_back(builtin);

  // Only existing folders, each once (the same folder may be reached by two spellings).
  std::vector<std::string> path;
  std::set<std::string> seen;
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::string key = fs::weakly_canonical(dir, ec).string();
    if (ec) key = dir;
    if (seen.insert(key).second) path.push_back(dir);
  }
  return path;
}

std::vector<std::string> list_presets() { return load_detail::presets_in(recipe_search_path()); }

namespace load_detail {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw RecipeError("cannot read recipe file " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RecipeError("cannot read recipe file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw RecipeError("cannot read recipe file " + path + ": read error");
  return text.str();
}

bool is_safe_relative_name(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return false;
  if (name.find("..") != std::string_view::npos || name.find("//") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == '/';
  });
}

std::optional<std::string> find_lua_file(const std::string& name, const std::vector<std::string>& search_path) {
  if (!is_safe_relative_name(name)) return std::nullopt;
  for (const auto& dir : search_path) {
    fs::path candidate = fs::path(dir) / (name + ".lua");
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return std::nullopt;
}

std::vector<std::string> presets_in(const std::vector<std::string>& search_path) {
  std::set<std::string> names;
  for (const auto& dir : search_path) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      std::string stem = p.stem().string();
      if (p.extension() == ".lua" && !stem.empty() && stem.front() != '_' && it->is_regular_file(ec))
        names.insert(stem);
    }
  }
  return {names.begin(), names.end()};
}

namespace {

// Levenshtein distance where swapping two neighbours ("354" for "345") counts as one edit.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates,
                                       std::size_t max) {
  // A typo changes a few characters; allow about a third of the name, at least 2.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates)
    if (std::size_t d = edit_distance(name, c); d <= limit) scored.emplace_back(d, c);
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  // Only the best matches: "gpt3_354m" suggests gpt3_345m, not every gpt3_* that is 3 edits away.
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < max && scored[i].first == scored[0].first; ++i)
    out.push_back(scored[i].second);
  return out;
}

std::string unknown_preset_message(const std::string& name, const std::vector<std::string>& search_path) {
  // A file name of another kind (x.json, x.yaml) is no preset name either: say what is read.
  const std::string ext = std::filesystem::path(name).extension().string();
  const bool file_like = ext.size() >= 2 && std::all_of(ext.begin() + 1, ext.end(), [](char c) {
                           return std::isalpha(static_cast<unsigned char>(c)) != 0;
                         });
  if (file_like && ext != ".lua" && ext != ".toml")
    return "'" + name + "' is neither a preset nor a recipe file: recipe files end in .lua or .toml (recipe list " +
           "shows the presets)";
  std::string msg = "unknown preset '" + name + "'";
  std::vector<std::string> close = closest_names(name, presets_in(search_path));
  if (!close.empty()) {
    msg += "; did you mean ";
    for (std::size_t i = 0; i < close.size(); ++i) {
      if (i > 0) msg += i + 1 == close.size() ? " or " : ", ";
      msg += "'" + close[i] + "'";
    }
    msg += "?";
  }
  return msg + " (recipe list shows all)";
}

}  // namespace load_detail
}  // namespace recipe::dsl
