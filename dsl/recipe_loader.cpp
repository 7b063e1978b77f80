// load_recipe: a preset name, a .lua file or a .toml file → config tree.
#include <filesystem>
#include <system_error>

#include "dsl/dsl.hpp"
#include "dsl/lua_loader.hpp"
#include "dsl/recipe_files.hpp"
#include "dsl/toml_loader.hpp"

namespace recipe::dsl {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ConfigTree load_recipe(const std::string& spec) {
  const bool is_lua = ends_with(spec, ".lua");
  const bool is_toml = ends_with(spec, ".toml");
  if (is_lua || is_toml) {
    std::error_code ec;
    if (std::filesystem::is_directory(spec, ec))
      throw RecipeError(spec + " is a directory, not a recipe file (a recipe is one .lua or .toml file)");
    if (!std::filesystem::is_regular_file(spec, ec)) throw RecipeError("no such recipe file: " + spec);
    const auto search_path = recipe_search_path(spec);
    ConfigTree tree =
        is_lua ? load_detail::load_lua_file(spec, search_path) : load_detail::load_toml_file(spec, search_path);
    tree.source = spec;
    return tree;
  }
  if (spec.empty()) throw RecipeError("no recipe given: name a preset (recipe list shows them) or a .lua/.toml file");
  if (std::error_code ec; std::filesystem::is_directory(spec, ec)) {
    // What `recipe ckpt import` wrote: the checkpoints and, beside them, the model's recipe.
    const std::filesystem::path imported = std::filesystem::path(spec) / "model.lua";
    if (std::filesystem::is_regular_file(imported, ec)) return load_recipe(imported.string());
    throw RecipeError(spec + " is a directory, not a recipe (name a preset, or a .lua or .toml file)");
  }
  if (spec.find('/') != std::string::npos || !load_detail::is_safe_relative_name(spec))
    throw RecipeError("no such recipe file: " + spec +
                      " (recipe files end in .lua or .toml; presets are plain "
                      "names, recipe list shows them)");
  const auto search_path = recipe_search_path();
  if (!load_detail::find_lua_file(spec, search_path))
    throw RecipeError(load_detail::unknown_preset_message(spec, search_path));
  ConfigTree tree = load_detail::load_lua_preset(spec, search_path);
  tree.source = spec;
  return tree;
}

}  // namespace recipe::dsl
