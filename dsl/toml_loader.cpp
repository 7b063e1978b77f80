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

  Json table(const toml::table& t, const std::string& prefix) {
    Json out = Json::object();
    for (const auto& [key, node] : t) {
      const std::string name(key.str());
      const std::string path = join_path(prefix, name);
      if (const auto* sub = node.as_table()) {
        out[name] = table(*sub, path);
      } else {
        out[name] = value(node, path);
        origins[path] = Origin{file_, static_cast<int>(node.source().begin.line)};
      }
    }
    return out;
  }

 private:
  std::string file_;

  Json value(const toml::node& node, const std::string& path) {
    if (const auto* t = node.as_table()) return table(*t, path);
    if (const auto* a = node.as_array()) {
      Json out = Json::array();
      std::size_t i = 0;
      for (const auto& element : *a) out.push_back(value(element, path + "[" + std::to_string(++i) + "]"));
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
  return tree;
}

}  // namespace recipe::dsl::load_detail
