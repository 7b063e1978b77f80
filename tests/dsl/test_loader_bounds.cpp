// Loader bounds (issue 18 B and C): nesting depth, tables of many keys, huge keys, invalid UTF-8,
// keys a Lua recipe cannot set, empty recipes, directories given as recipes. Every case ends in a
// RecipeError or a violation naming file and key, never in a crash, a hang or a nlohmann error.
#include <string>

#include "helpers.hpp"
#include "temp_recipes.hpp"

#include "dsl/suggest.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using recipe::dsl::test::recipe_error_of;
using recipe::dsl::test::TempRecipes;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("loader bounds: a 50,000-level TOML key or table header is an error with file and line") {
  TempRecipes dir;
  const std::string dotted = dir.write("dotted.toml", "preset = \"gpt_tiny\"\n" + repeat("a.", 50000) + "b = 1\n");
  std::string msg = recipe_error_of([&] { load_recipe(dotted); });
  CHECK(contains(msg, dotted + ":2"));
  CHECK(contains(msg, "nested more than 64"));
  CHECK(msg.size() < 1000);

  const std::string header = dir.write("header.toml", "[" + repeat("t.", 50000) + "x]\nv = 1\n");
  msg = recipe_error_of([&] { load_recipe(header); });
  CHECK(contains(msg, header + ":"));
  CHECK(contains(msg, "nested more than 64"));

  // 64 levels are accepted by the loader (the resolver then names the unknown key).
  const std::string ok = dir.write("ok.toml", "preset = \"gpt_tiny\"\n" + repeat("a.", 60) + "b = 1\n");
  ConfigTree t = load_recipe(ok);
  CHECK(t.root.contains("a"));
}

TEST_CASE("loader bounds: deep Lua tables and deep arrays never crash") {
  TempRecipes dir;
  const std::string deep = dir.write("deep.lua", "return " + repeat("{a=", 50000) + "1" + repeat("}", 50000));
  CHECK_FALSE(recipe_error_of([&] { load_recipe(deep); }).empty());
  const std::string built = dir.write("built.lua",
                                      "local t = {}\nlocal cur = t\nfor i = 1, 50000 do cur.a = {}; cur = cur.a end\n"
                                      "return { model = t }");
  CHECK(contains(recipe_error_of([&] { load_recipe(built); }), built));
  const std::string arrays = dir.write("arrays.toml", "x = " + repeat("[", 5000) + repeat("]", 5000) + "\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(arrays); }), arrays + ":"));
}

TEST_CASE("loader bounds: 20,000 unknown keys load and resolve, reporting the first 50 and a count") {
  TempRecipes dir;
  std::string text = "preset = \"gpt_tiny\"\n[trainer]\n";
  for (int i = 0; i < 20000; ++i) text += "unknown_key_" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  const std::string file = dir.write("many.toml", text);
  ConfigTree t = load_recipe(file);
  CHECK(t.root["trainer"].size() > 20000);
  CHECK(t.origins.at("trainer.unknown_key_19999").line == 20002);
  const ResolveResult r = resolve(t, ExecutorFacts{});
  REQUIRE(r.violations.size() == 51);
  CHECK(contains(r.violations.back().message, "and 19950 more unknown keys"));

  // The same from Lua, where origins are found in the source text.
  std::string lua = "return preset 'gpt_tiny' { trainer = {\n";
  for (int i = 0; i < 20000; ++i) lua += "  unknown_key_" + std::to_string(i) + " = " + std::to_string(i) + ",\n";
  lua += "} }\n";
  const std::string lua_file = dir.write("many.lua", lua);
  ConfigTree tl = load_recipe(lua_file);
  CHECK(tl.root["trainer"].size() > 20000);
  CHECK(resolve(tl, ExecutorFacts{}).violations.size() == 51);
}

TEST_CASE("loader bounds: a 1 MB key gets no suggestion and a short message") {
  const std::string huge(1 << 20, 'k');
  CHECK(suggest(huge, {"num_layers", "hidden_size"}).empty());
  CHECK(suggest("num_layer", {"num_layers", "hidden_size"}) == std::vector<std::string>{"num_layers"});
  TempRecipes dir;
  const std::string file = dir.write("huge.toml", "preset = \"gpt_tiny\"\n[trainer]\n" + huge + " = 1\n");
  const ResolveResult r = resolve(load_recipe(file), ExecutorFacts{});
  REQUIRE(r.violations.size() == 1);
  CHECK(r.violations[0].message.size() < 400);
  CHECK(contains(r.violations[0].fix, "`recipe keys`"));
}

TEST_CASE("messages: invalid UTF-8 in a Lua value or key names the key and the file") {
  TempRecipes dir;
  const std::string value = dir.write("value.lua", "return { optimizer = {\n  lr = \"\\xff\\xfe\" } }\n");
  std::string msg = recipe_error_of([&] { load_recipe(value); });
  CHECK(contains(msg, value + ":2"));
  CHECK(contains(msg, "optimizer.lr"));
  CHECK(contains(msg, "not valid UTF-8"));
  CHECK_FALSE(contains(msg, "json.exception"));

  const std::string name = dir.write("name.lua", "return { experiment = { name = \"run\\xff\\xfe\" } }\n");
  msg = recipe_error_of([&] { load_recipe(name); });
  CHECK(contains(msg, "experiment.name"));
  CHECK(contains(msg, name + ":1"));

  const std::string key = dir.write("key.lua", "return { optimizer = { [\"l\\xffr\"] = 1 } }\n");
  msg = recipe_error_of([&] { load_recipe(key); });
  CHECK(contains(msg, "optimizer has the key"));
  CHECK(contains(msg, key));

  // TOML rejects invalid UTF-8 in its parser, with file:line:col.
  const std::string toml = dir.write("bad.toml", "[optimizer]\nlr = \"\xff\xfe\"\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(toml); }), toml + ":2:"));
}

TEST_CASE("messages: preset in a Lua table, an empty TOML file or Lua table and a directory are errors") {
  TempRecipes dir;
  const std::string lua = dir.write("preset.lua", "return { preset = \"no_such_preset\" }\n");
  const ResolveResult r = resolve(load_recipe(lua), ExecutorFacts{});
  const Violation* v = recipe::dsl::test::find_violation(r, "preset");
  REQUIRE(v != nullptr);
  CHECK(contains(v->message, "no_such_preset"));
  CHECK(contains(v->fix, "return preset"));

  const std::string empty = dir.write("empty.toml", "");
  CHECK(contains(recipe_error_of([&] { load_recipe(empty); }), empty + ": the recipe is empty"));
  const std::string comments = dir.write("comments.toml", "# nothing but a comment\n\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(comments); }), "the recipe is empty"));

  // The same for Lua (issue 18): `return {}` resolved to the built-in 124.5M defaults.
  const std::string empty_lua = dir.write("empty.lua", "return {}\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(empty_lua); }), empty_lua + ": the recipe is empty"));
  CHECK(contains(recipe_error_of([&] { load_recipe(empty_lua); }), "return preset \"gpt_tiny\""));

  const std::string folder = dir.dir() + "/folder.lua";
  std::filesystem::create_directories(folder);
  CHECK(contains(recipe_error_of([&] { load_recipe(folder); }), "is a directory"));
  CHECK(contains(recipe_error_of([&] { load_recipe(dir.dir()); }), "is a directory"));
}

TEST_CASE("loader bounds: overrides with 50,000 key parts or invalid UTF-8 are refused") {
  ConfigTree tree = load_recipe("gpt_tiny");
  std::string deep = "a";
  for (int i = 0; i < 50000; ++i) deep += ".a";
  CHECK(contains(recipe_error_of([&] { apply_override(tree, deep + "=1"); }), "more than 64 parts"));
  CHECK(contains(recipe_error_of([&] { apply_override(tree, "experiment.name=run\xff\xfe"); }), "not valid UTF-8"));
  apply_override(tree, "experiment.name=run-1");
  CHECK(tree.root["experiment"]["name"] == "run-1");
}

TEST_SUITE_END();
