// Presets as functions: deep-merge semantics, search path order, and origins (file:line).
#include <fstream>
#include <sstream>

#include "temp_recipes.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using Json = nlohmann::ordered_json;
using recipe::dsl::test::recipe_error_of;
using recipe::dsl::test::ScopedEnv;
using recipe::dsl::test::source_dir;
using recipe::dsl::test::TempRecipes;

namespace {

const char* kBase = R"(return {
  model = { a = 1, b = 2, list = { 1, 2, 3 }, nested = { x = 1, y = 2 } },
  trainer = { steps = 10 },
}
)";

// 1-based line of the first line in `path` that contains `needle`.
int line_of(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  return 0;
}

}  // namespace

TEST_CASE("calling a preset deep-merges: tables merge, lists and scalars replace") {
  TempRecipes dir;
  dir.write("base.lua", kBase);
  const std::string file = dir.write("r.lua", R"(
return preset "base" {
  model = { b = 3, list = { 9 }, nested = { y = 5 } },
  extra = { flag = true },
}
)");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["model"] == Json::parse(R"({"a": 1, "b": 3, "list": [9], "nested": {"x": 1, "y": 5}})"));
  CHECK(t.root["trainer"]["steps"] == 10);
  CHECK(t.root["extra"]["flag"] == true);
}

TEST_CASE("preset objects are values: calling one leaves it unchanged, calls chain") {
  TempRecipes dir;
  dir.write("base.lua", kBase);
  const std::string file = dir.write("r.lua", R"(
local base = preset "base"
local changed = base { model = { a = 5 } }
local chained = preset "base" { model = { a = 7 } } { model = { b = 8 } }
local fresh = preset "base"
fresh.model.a = 100   -- editing one object does not leak into another
return {
  results = {
    base_a = base.model.a, changed_a = changed.model.a, changed_b = changed.model.b,
    chained_a = chained.model.a, chained_b = chained.model.b, again_a = preset("base").model.a,
  },
}
)");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["results"] == Json::parse(R"({"again_a": 1, "base_a": 1, "chained_a": 7, "chained_b": 8,
                                             "changed_a": 5, "changed_b": 2})"));
}

TEST_CASE("empty tables: an empty table adds nothing to a table but empties a list") {
  TempRecipes dir;
  dir.write("base.lua", kBase);
  const std::string file = dir.write("r.lua", "return preset 'base' { model = { list = {}, nested = {} } }");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["model"]["list"] == Json::array());
  CHECK(t.root["model"]["nested"] == Json::parse(R"({"x": 1, "y": 2})"));
  // An empty section stays a table; an empty value elsewhere is an empty list.
  const std::string empty = dir.write("e.lua", "return { peft = {}, executor = { env = {} }, model = { l = {} } }");
  ConfigTree e = load_recipe(empty);
  CHECK(e.root["peft"] == Json::object());
  CHECK(e.root["executor"]["env"] == Json::object());
  CHECK(e.root["model"]["l"] == Json::array());
}

TEST_CASE("Lua numbers keep their kind; blends stay flat lists") {
  TempRecipes dir;
  const std::string file = dir.write("r.lua", R"(return {
  model = { num_layers = 2, rope_theta = 10000.0, norm_eps = 1e-5 },
  data = { blend = { 0.7, "data/wiki", 0.3, "data/code" } },
  mode = "finetune",
})");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["model"]["num_layers"].is_number_integer());
  CHECK(t.root["model"]["rope_theta"].is_number_float());
  CHECK(t.root["data"]["blend"] == Json({0.7, "data/wiki", 0.3, "data/code"}));
  CHECK(t.root["mode"] == "finetune");
  CHECK(t.root.begin().key() == "mode");  // canonical order: mode first
}

TEST_CASE("search path: RECIPE_PATH, then the recipe's folder, then the built-in presets") {
  TempRecipes user, project;
  user.write("gpt_tiny.lua", "return { model = { from = 'RECIPE_PATH' } }");
  project.write("gpt_tiny.lua", "return { model = { from = 'recipe folder' } }");
  project.write("mine.lua", "return { model = { from = 'mine' } }");
  const std::string file = project.write("r.lua", "return preset 'gpt_tiny' { }");
  {
    ScopedEnv path("RECIPE_PATH", "/nonexistent/folder:" + user.dir());
    auto sp = recipe_search_path(file);
    REQUIRE(sp.size() == 3);
    CHECK(sp[0] == user.dir());
    CHECK(sp[1] == project.dir());
    CHECK(load_recipe(file).root["model"]["from"] == "RECIPE_PATH");
    auto presets = list_presets();
    CHECK(std::count(presets.begin(), presets.end(), "gpt3_345m") == 1);
  }
  {
    ScopedEnv path("RECIPE_PATH", std::nullopt);
    CHECK(load_recipe(file).root["model"]["from"] == "recipe folder");
    auto presets = list_presets();  // the recipe's folder is not a preset folder
    CHECK(std::count(presets.begin(), presets.end(), "mine") == 0);
    CHECK(recipe_search_path().back() == source_dir() + "/recipes");
  }
  {
    ScopedEnv path("RECIPE_PATH", project.dir());
    auto presets = list_presets();
    CHECK(std::count(presets.begin(), presets.end(), "mine") == 1);
    CHECK(std::count(presets.begin(), presets.end(), "r") == 1);
    CHECK(load_recipe("mine").root["model"]["from"] == "mine");
  }
  {
    ScopedEnv home("RECIPE_HOME", user.dir() + "/nowhere");
    ScopedEnv path("RECIPE_PATH", std::nullopt);
    CHECK(list_presets().empty());
  }
}

TEST_CASE("origins: TOML lines are exact") {
  TempRecipes dir;
  const std::string file = dir.write("r.toml", R"(# a comment
mode = "finetune"

[model]
num_layers = 4
hidden_size = 128

[trainer]
max_steps = 50
  [trainer.nested]
  deep = [1, 2]

[derived]
num_params = 123
)");
  ConfigTree t = load_recipe(file);
  CHECK(t.origins.at("mode").line == 2);
  CHECK(t.origins.at("model.num_layers").str() == file + ":5");
  CHECK(t.origins.at("model.hidden_size").line == 6);
  CHECK(t.origins.at("trainer.max_steps").line == 9);
  CHECK(t.origins.at("trainer.nested.deep").line == 11);
  CHECK_FALSE(t.root.contains("derived"));
  CHECK(t.origins.count("derived.num_params") == 0);
  CHECK(t.source == file);
}

TEST_CASE("origins: a TOML recipe over a preset mixes both") {
  TempRecipes dir;
  const std::string file = dir.write("r.toml", "preset = \"gpt_tiny\"\n\n[trainer]\nmax_steps = 7\n");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["trainer"]["max_steps"] == 7);
  CHECK(t.root["model"]["hidden_size"] == 64);
  CHECK(t.origins.at("trainer.max_steps").str() == file + ":4");
  const std::string tiny = source_dir() + "/recipes/gpt_tiny.lua";
  CHECK(t.origins.at("model.hidden_size").str() == "preset:gpt_tiny:" + std::to_string(line_of(tiny, "hidden_size =")));
  CHECK(t.origins.at("trainer.micro_batch_size").file == "preset:gpt_tiny");
}

TEST_CASE("origins: Lua recipes and presets point at the line that set the value") {
  TempRecipes dir;
  const std::string file = dir.write("r.lua", R"(local base = preset "gpt3_345m"
-- trainer = { max_steps = 1 } (a comment, not the setting)
local r = base {
  model = {
    num_layers = 12,
  },
  trainer = { max_steps = 5,
              micro_batch_size = 2 },
}
return r
)");
  ConfigTree t = load_recipe(file);
  CHECK(t.origins.at("model.num_layers").str() == file + ":5");
  CHECK(t.origins.at("trainer.max_steps").str() == file + ":7");
  CHECK(t.origins.at("trainer.micro_batch_size").str() == file + ":8");

  const std::string preset_file = source_dir() + "/recipes/gpt3_345m.lua";
  const std::string base_file = source_dir() + "/recipes/_gpt_base.lua";
  CHECK(t.origins.at("model.hidden_size").str() ==
        "preset:gpt3_345m:" + std::to_string(line_of(preset_file, "hidden_size =")));
  CHECK(t.origins.at("optimizer.beta1").str() == "preset:_gpt_base:" + std::to_string(line_of(base_file, "beta1 =")));

  // Loading the preset by name: every value is the preset's (or its base's).
  ConfigTree p = load_recipe("gpt3_345m");
  CHECK(p.origins.at("trainer.max_steps").str() ==
        "preset:gpt3_345m:" + std::to_string(line_of(preset_file, "max_steps =")));
  CHECK(p.origins.at("model.vocab_size").file == "preset:_gpt_base");
  for (const auto& [path, origin] : p.origins) {
    CAPTURE(path);
    CHECK(origin.line > 0);
  }

  // A value edited after the preset call belongs to the recipe, not the preset.
  const std::string edited = dir.write("e.lua", "local p = preset 'gpt3_345m'\np.model.num_layers = 6\nreturn p\n");
  ConfigTree e = load_recipe(edited);
  CHECK(e.root["model"]["num_layers"] == 6);
  CHECK(e.origins.at("model.num_layers").file == edited);
  CHECK(e.origins.at("model.hidden_size").file == "preset:gpt3_345m");
}

TEST_CASE("Origin::str") {
  CHECK(Origin{"a.lua", 3}.str() == "a.lua:3");
  CHECK(Origin{"preset:gpt3_345m", 0}.str() == "preset:gpt3_345m");
  Origin o;
  o.file = "override";
  o.expr = "parallelism.tp=2";
  CHECK(o.str() == "override `parallelism.tp=2`");
}

TEST_SUITE_END();
