#include "dsl/toml_loader.hpp"

#include <cmath>

#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>
#endif

#include "dsl/lua_loader.hpp"
#include "dsl/recipe_files.hpp"
#include "dsl/tree_merge.hpp"

namespace recipe::dsl::load_detail {
namespace {

std::string where(const std::string& file, const toml::node& node) {
  const auto& begin = node.source().begin;
  return file + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column);
}

class TomlConverter {
 public:
  explicit TomlConverter(std::string file) : file_(std::move(file)) {}
  std::map<std::string, Origin> origins;

  // `depth` counts the tables around `t`; deeper than kMaxTreeDepth is refused before recursing
  // further, so a 50,000-level dotted key is an error message, not a stack overflow.
  Json table(const toml::table& t, const std::string& prefix, int depth = 0) {
    if (depth > kMaxTreeDepth)
      throw RecipeError(where(file_, t) + ": " + shorten(prefix) + " is nested more than " +
                        std::to_string(kMaxTreeDepth) + " tables deep; recipes nest sections 2 or 3 deep");
    Json out = Json::object();
    for (const auto& [key, node] : t) {
      std::string name(key.str());
      const std::string path = join_path(prefix, name);
      Json converted;
      if (const auto* sub = node.as_table()) {
        converted = table(*sub, path, depth + 1);
      } else {
        converted = value(node, path, depth + 1);
        origins.emplace_hint(origins.end(), path, Origin{file_, static_cast<int>(node.source().begin.line)});
      }
      append_new_key(out, std::move(name), std::move(converted));  // TOML keys of a table are unique
    }
    return out;
  }

 private:
  std::string file_;

  // A path of 50,000 parts would make every message 50,000 keys long.
  static std::string shorten(const std::string& path) {
    return path.size() <= 200 ? path : path.substr(0, 200) + "...";
  }

  Json value(const toml::node& node, const std::string& path, int depth) {
    if (const auto* t = node.as_table()) return table(*t, path, depth);
    if (const auto* a = node.as_array()) {
      if (depth > kMaxTreeDepth)
        throw RecipeError(where(file_, node) + ": " + shorten(path) + " is nested more than " +
                          std::to_string(kMaxTreeDepth) + " lists or tables deep");
      Json out = Json::array();
      std::size_t i = 0;
      for (const auto& element : *a) out.push_back(value(element, path + "[" + std::to_string(++i) + "]", depth + 1));
      return out;
    }
    if (const auto* v = node.as_integer()) return static_cast<std::int64_t>(v->get());
    if (const auto* v = node.as_floating_point()) {
      if (!std::isfinite(v->get())) throw RecipeError(where(file_, node) + ": " + path + " is not a finite number");
      return v->get();
    }
    if (const auto* v = node.as_boolean()) return v->get();
    if (const auto* v = node.as_string()) return v->get();
    throw RecipeError(where(file_, node) + ": " + path +
                      " is a date or time; recipe values are numbers, strings, booleans, lists and tables");
  }
};

}  // namespace

ConfigTree load_toml_file(const std::string& path, const std::vector<std::string>& search_path) {
  const std::string text = read_text_file(path);
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw RecipeError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                      std::string(e.description()));
  }

  // An empty recipe is a mistake (a truncated or wrong file), not a request for the defaults.
  if (doc.empty())
    throw RecipeError(path +
                      ": the recipe is empty; write preset = \"<name>\" and the tables to change, e.g. "
                      "preset = \"gpt_tiny\"");
  std::string preset;
  if (const toml::node* node = doc.get("preset")) {
    const auto* name = node->as_string();
    if (!name || name->get().empty())
      throw RecipeError(where(path, *node) + ": preset must be a preset name, e.g. preset = \"gpt3_345m\"");
    preset = name->get();
    if (!find_lua_file(preset, search_path))
      throw RecipeError(where(path, *node) + ": " + unknown_preset_message(preset, search_path));
    doc.erase("preset");
  }
  const bool resolved_plan = doc.contains("derived");
  doc.erase("derived");  // recomputed by the resolver; written only for people reading resolved.toml

  TomlConverter converter(path);
  Json root = converter.table(doc, "");

  ConfigTree tree;
  if (!preset.empty()) {
    tree = load_lua_preset(preset, search_path);
    merge_into(tree, root, converter.origins);
  } else {
    tree.root = std::move(root);
    tree.origins = std::move(converter.origins);
    canonicalize(tree.root);
  }
  tree.source = path;
  tree.resolved_plan = resolved_plan;
  return tree;
}

}  // namespace recipe::dsl::load_detail
