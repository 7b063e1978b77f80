// Internal to dsl/: finding recipe files on the search path and reading them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recipe::dsl::load_detail {

// Whole file as text; throws RecipeError("cannot read recipe file X: reason").
std::string read_text_file(const std::string& path);

// `<dir>/<name>.lua` in the first search-path folder that has it. `name` may hold '/' between
// parts (a module in a subfolder) but never "..", a leading '/' or a backslash.
std::optional<std::string> find_lua_file(const std::string& name, const std::vector<std::string>& search_path);

// True when `name` may be looked up on the search path at all (see find_lua_file).
bool is_safe_relative_name(std::string_view name);

// Presets (*.lua not starting with '_') in the given folders, sorted, without duplicates.
std::vector<std::string> presets_in(const std::vector<std::string>& search_path);

// "unknown preset 'x'; did you mean 'y'? (recipe list shows all)".
std::string unknown_preset_message(const std::string& name, const std::vector<std::string>& search_path);

// Up to `max` candidates at the smallest edit distance from `name`, if that is close enough to be a typo.
std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates,
                                       std::size_t max = 3);

}  // namespace recipe::dsl::load_detail
