// The Lua sandbox: what a recipe may not do, runaway recipes, and errors that point at file:line.
#include <random>

#include "temp_recipes.hpp"

#include "dsl/lua_loader.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using recipe::dsl::test::recipe_error_of;
using recipe::dsl::test::TempRecipes;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string error_of_recipe(TempRecipes& dir, const std::string& text) {
  const std::string file = dir.write("r.lua", text);
  return recipe_error_of([&] { load_recipe(file); });
}

}  // namespace

TEST_CASE("sandbox: no os, io, debug, package, dofile, loadfile") {
  TempRecipes dir;
  const std::string file = dir.dir() + "/r.lua";
  struct Case {
    const char* code;
    const char* expect;
  };
  const Case cases[] = {
      {"local x = 1\nos.execute('touch /tmp/recipe_pwned')\nreturn {}", "global 'os'"},
      {"local f = io.open('/etc/passwd')\nreturn {}", "global 'io'"},
      {"return { x = debug.getinfo(1) }", "global 'debug'"},
      {"return { x = package.loadlib('libc.so.6', 'system') }", "global 'package'"},
      {"dofile('/etc/passwd')\nreturn {}", "global 'dofile'"},
      {"loadfile('/etc/passwd')\nreturn {}", "global 'loadfile'"},
      {"local f = string.dump(function() end)\nreturn {}", "field 'dump'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.code);
    std::string msg = error_of_recipe(dir, c.code);
    CHECK(contains(msg, c.expect));
    CHECK(msg.rfind(file + ":", 0) == 0);  // starts with the recipe path and a line
  }
  CHECK_FALSE(std::filesystem::exists("/tmp/recipe_pwned"));
  CHECK(contains(error_of_recipe(dir, "local x = 1\nos.execute('x')\nreturn {}"), file + ":2:"));
}

TEST_CASE("sandbox: require only finds modules on the search path") {
  TempRecipes dir;
  const std::string file = dir.dir() + "/r.lua";
  std::string msg = error_of_recipe(dir, "local os = require 'os'\nreturn {}");
  CHECK(contains(msg, "module 'os' is not available in recipes"));
  CHECK(contains(msg, file + ":1:"));
  CHECK(contains(error_of_recipe(dir, "require '../secret'\nreturn {}"), "'..'"));
  CHECK(contains(error_of_recipe(dir, "require '/etc/passwd'\nreturn {}"), "absolute paths are not allowed"));
  CHECK(contains(error_of_recipe(dir, "require 'no_such_module'\nreturn {}"), "module 'no_such_module' not found"));

  // A module beside the recipe (the recipe's folder is on the search path), also in a subfolder.
  dir.write("sizes.lua", "return { layers = 6 }");
  dir.write("common/lr.lua", "return 2e-4");
  const std::string ok = dir.write("ok.lua",
                                   "local sizes = require 'sizes'\n"
                                   "local again = require 'sizes'\n"
                                   "return { model = { num_layers = sizes.layers, same = (sizes == again) },\n"
                                   "         optimizer = { lr = require 'common.lr' } }");
  ConfigTree t = load_recipe(ok);
  CHECK(t.root["model"]["num_layers"] == 6);
  CHECK(t.root["model"]["same"] == true);
  CHECK(t.root["optimizer"]["lr"].get<double>() == doctest::Approx(2e-4));
}

TEST_CASE("sandbox: load takes text only") {
  TempRecipes dir;
  CHECK(contains(error_of_recipe(dir, "local f = load('return 1', 'x', 'b')\nreturn {}"), "text chunks"));
  const std::string file = dir.write("bytes.lua",
                                     "local f, err = load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n')\n"
                                     "return { result = { loaded = f ~= nil, err = err } }");
  ConfigTree t = load_recipe(file);
  CHECK(t.root["result"]["loaded"] == false);
  CHECK(contains(t.root["result"]["err"].get<std::string>(), "binary"));
  // Text chunks are fine, and collectgarbage is allowed.
  const std::string text = dir.write("text.lua",
                                     "collectgarbage()\n"
                                     "local f = load('return 40 + 2')\n"
                                     "return { trainer = { max_steps = f() } }");
  CHECK(load_recipe(text).root["trainer"]["max_steps"] == 42);
}

TEST_CASE("sandbox: an endless loop is stopped by the instruction limit, even under pcall") {
  TempRecipes dir;
  const std::string file = dir.dir() + "/r.lua";
  std::string msg = error_of_recipe(dir, "local n = 0\nwhile true do n = n + 1 end\nreturn {}");
  CHECK(contains(msg, "recipe exceeded the instruction limit"));
  CHECK(contains(msg, file + ":2:"));
  msg = error_of_recipe(dir, "while true do\n  pcall(function() while true do end end)\nend\nreturn {}");
  CHECK(contains(msg, "recipe exceeded the instruction limit"));
  msg = error_of_recipe(dir, "local function f() return f() end\nreturn f()");  // endless tail calls
  CHECK(contains(msg, "recipe exceeded the instruction limit"));
}

TEST_CASE("sandbox: a memory bomb is stopped by the memory limit, even under pcall") {
  TempRecipes dir;
  std::string msg = error_of_recipe(dir, "local s = 'x'\nfor i = 1, 40 do s = s .. s end\nreturn {}");
  CHECK(contains(msg, "recipe exceeded the memory limit"));
  msg = error_of_recipe(dir, "local ok = pcall(string.rep, 'x', 1 << 30)\nreturn { ok = ok }");
  CHECK(contains(msg, "recipe exceeded the memory limit"));
  msg = error_of_recipe(dir, "local t = {}\nfor i = 1, 1e9 do t[i] = {i} end\nreturn {}");
  CHECK((contains(msg, "memory limit") || contains(msg, "instruction limit")));
}

TEST_CASE("Lua errors carry file:line and never crash") {
  TempRecipes dir;
  const std::string file = dir.dir() + "/r.lua";
  CHECK(contains(error_of_recipe(dir, "return {\n  model = { num_layers = 2,\n  trainer = }\n"), file + ":3:"));
  CHECK(contains(error_of_recipe(dir, "local x = nil\nreturn { a = x.y }"), file + ":2:"));
  CHECK(error_of_recipe(dir, "error('custom failure')\nreturn {}") == file + ":1: custom failure");
  CHECK(contains(error_of_recipe(dir, "error({})"), file + ": error object is a table value"));

  std::string msg = error_of_recipe(dir, "local x = 1\n\nreturn 5\n");
  CHECK(msg == file + ":3: a recipe must return a table, got number");
  CHECK(error_of_recipe(dir, "local x = 1\n") == file + ":1: a recipe must return a table, got nothing");

  msg = error_of_recipe(dir, "return {\n  data = { blend = { 0.5, 'a', x = 1 } },\n}");
  CHECK(contains(msg, "data.blend mixes list items and named keys"));
  CHECK(contains(msg, file + ":2:"));
  CHECK(contains(error_of_recipe(dir, "return { model = { list = { [1] = 1, [3] = 3 } } }"),
                 "model.list is a list with gaps"));
  CHECK(contains(error_of_recipe(dir, "return { model = { f = print } }"), "model.f is a function"));
  CHECK(contains(error_of_recipe(dir, "return { model = { x = 0/0 } }"), "model.x is not a finite number"));
  CHECK(contains(error_of_recipe(dir, "return { model = { [true] = 1 } }"), "has a key of type boolean"));
  CHECK(contains(error_of_recipe(dir, "local t = {}\nt.self = t\nreturn { model = t }"), "nested"));
  CHECK(contains(error_of_recipe(dir, "return { 1, 2 }"), "not a list"));

  // Arbitrary bytes: an error, not a crash.
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::string junk(64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() & 0xff);
    CHECK(error_of_recipe(dir, junk).rfind(file, 0) == 0);
  }
}

TEST_CASE("errors inside a preset name the preset file") {
  TempRecipes dir;
  dir.write("broken.lua", "local x = 1\nreturn { model = { n = x + nil } }");
  const std::string file = dir.write("r.lua", "return preset 'broken' { }");
  std::string msg = recipe_error_of([&] { load_recipe(file); });
  CHECK(contains(msg, dir.dir() + "/broken.lua:2:"));

  const std::string unknown = dir.write("u.lua", "local x = 1\nlocal p = preset 'gpt3_354m'\nreturn p");
  msg = recipe_error_of([&] { load_recipe(unknown); });
  CHECK(msg == unknown + ":2: unknown preset 'gpt3_354m'; did you mean 'gpt3_345m'? (recipe list shows all)");

  dir.write("loop_a.lua", "return preset 'loop_b' { }");
  dir.write("loop_b.lua", "return preset 'loop_a' { }");
  const std::string loop = dir.write("loop.lua", "return preset 'loop_a'");
  CHECK(contains(recipe_error_of([&] { load_recipe(loop); }), "builds on itself"));

  const std::string bad_call = dir.write("call.lua", "local p = preset 'gpt_tiny'\nreturn p(5)");
  CHECK(contains(recipe_error_of([&] { load_recipe(bad_call); }), "a preset takes a table of overrides"));
}

TEST_CASE("TOML errors carry file:line:col and never crash") {
  TempRecipes dir;
  const std::string file = dir.write("bad.toml", "[model]\nnum_layers = 2\nhidden_size = = 3\n");
  std::string msg = recipe_error_of([&] { load_recipe(file); });
  CHECK(msg.rfind(file + ":3:", 0) == 0);

  const std::string dup = dir.write("dup.toml", "[model]\nnum_layers = 2\nnum_layers = 3\n");
  CHECK(recipe_error_of([&] { load_recipe(dup); }).rfind(dup + ":3:", 0) == 0);

  const std::string date = dir.write("date.toml", "[experiment]\nname = 1979-05-27\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(date); }), date + ":2:"));

  const std::string unknown = dir.write("unknown.toml", "\npreset = \"gpt3_354m\"\n");
  std::string msg_unknown = recipe_error_of([&] { load_recipe(unknown); });
  CHECK(msg_unknown.rfind(unknown + ":2:", 0) == 0);
  CHECK(contains(msg_unknown, ": unknown preset 'gpt3_354m'; did you mean 'gpt3_345m'? (recipe list shows all)"));

  const std::string not_name = dir.write("notname.toml", "preset = 3\n");
  CHECK(contains(recipe_error_of([&] { load_recipe(not_name); }), "preset must be a preset name"));

  std::mt19937 rng(11);
  for (int i = 0; i < 20; ++i) {
    std::string junk(64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() & 0xff);
    const std::string path = dir.write("junk.toml", junk);
    CHECK(recipe_error_of([&] { load_recipe(path); }).rfind(path, 0) == 0);
  }
}

TEST_CASE("sandbox: code outside the instruction hook is stopped by the process bound") {
  using recipe::dsl::load_detail::LuaLimits;
  TempRecipes dir;
  LuaLimits limits;
  limits.process.wall_seconds = 2;
  const auto search = recipe_search_path();
  struct Case {
    const char* what;
    const char* code;
  };
  const Case cases[] = {
      // One C call that backtracks for ever: the hook counts Lua instructions only.
      {"pattern", "local s = string.rep('a', 20000)\nlocal i = string.find(s, string.rep('a*', 20) .. 'b')\nreturn {}"},
      // Finalizers run with hooks off, during collection and in lua_close.
      {"finalizer", "setmetatable({}, { __gc = function() while true do end end })\nreturn { trainer = {} }"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const std::string file = dir.write(std::string(c.what) + ".lua", c.code);
    const std::string msg = recipe_error_of([&] { recipe::dsl::load_detail::load_lua_file(file, search, limits); });
    CHECK(msg.rfind(file + ": recipe evaluation exceeded 2 s", 0) == 0);
  }
  // Errors keep their file:line through the child process.
  const std::string bad = dir.write("bad.lua", "local x = 1\nerror('stop here')\n");
  CHECK(recipe_error_of([&] { recipe::dsl::load_detail::load_lua_file(bad, search, limits); }) ==
        bad + ":2: stop here");
}

TEST_CASE("sandbox: the process memory bound is reported as the memory limit") {
  using recipe::dsl::load_detail::LuaLimits;
  TempRecipes dir;
  LuaLimits limits;
  limits.memory_bytes = std::size_t{8} << 30;            // the sandbox's own cap out of the way
  limits.process.memory_bytes = std::size_t{128} << 20;  // the process bound is the one that holds
  const std::string file = dir.write("big.lua", "local s = string.rep('x', 1 << 30)\nreturn { n = #s }");
  const std::string msg =
      recipe_error_of([&] { recipe::dsl::load_detail::load_lua_file(file, recipe_search_path(), limits); });
  CHECK(contains(msg, file));
  CHECK((contains(msg, "memory limit (128 MiB)") || contains(msg, "exceeded 128 MiB")));
}

TEST_SUITE_END();
