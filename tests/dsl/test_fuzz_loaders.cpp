// A deterministic fuzz of the recipe loaders (issue 18 G): mutated Lua and TOML recipes, seeded
// from the presets and the examples, go through load_recipe and resolve. Any outcome is fine except
// a crash, an abort or a hang: a RecipeError is the expected answer to garbage, and the child
// process bound (dsl/isolated_eval.hpp) turns a hanging Lua evaluation into one.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "temp_recipes.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using recipe::dsl::test::source_dir;
using recipe::dsl::test::TempRecipes;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Recipe texts to mutate: every preset and example of the given extension.
std::vector<std::string> corpus(const std::string& ext) {
  std::vector<std::string> texts;
  for (const char* folder : {"recipes", "examples", "examples/toml"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/" + folder, ec))
      if (e.path().extension() == ext) texts.push_back(read_file(e.path()));
  }
  std::sort(texts.begin(), texts.end());  // directory order is not deterministic
  return texts;
}

// Fragments that stress the loaders where fuzzing found problems: depth, size, bytes, syntax.
const std::vector<std::string>& tokens(bool lua) {
  static const std::vector<std::string> lua_tokens = {"{",
                                                      "}",
                                                      "=",
                                                      ",",
                                                      "\"",
                                                      "'",
                                                      "[[",
                                                      "]]",
                                                      "\\xff\\xfe",
                                                      "\xff",
                                                      std::string(1, '\0'),
                                                      "\n",
                                                      "--",
                                                      "..",
                                                      "nil",
                                                      "true",
                                                      "1e309",
                                                      "-0",
                                                      "0x7fffffffffffffff",
                                                      "preset",
                                                      "preset 'gpt_tiny'",
                                                      "return",
                                                      "function",
                                                      "end",
                                                      "local",
                                                      "setmetatable({}, {__gc = error})",
                                                      "string.rep('x', 100)",
                                                      "{{{{{{{{",
                                                      "}}}}}}}}",
                                                      "math.huge",
                                                      "0/0",
                                                      "a.b.c.d.e",
                                                      "[\"k\"]",
                                                      "#",
                                                      "::",
                                                      "goto",
                                                      "require 'x'",
                                                      "os",
                                                      "error()",
                                                      "coroutine"};
  static const std::vector<std::string> toml_tokens = {"[",
                                                       "]",
                                                       "[[",
                                                       "]]",
                                                       "=",
                                                       ".",
                                                       "\"",
                                                       "'",
                                                       "\"\"\"",
                                                       "\xff",
                                                       std::string(1, '\0'),
                                                       "\n",
                                                       "#",
                                                       "inf",
                                                       "nan",
                                                       "-0",
                                                       "1979-05-27",
                                                       "true",
                                                       "{",
                                                       "}",
                                                       ",",
                                                       "preset = \"gpt_tiny\"",
                                                       "preset = \"no_such\"",
                                                       "a.a.a.a.a.a.a.a.a",
                                                       "[model]",
                                                       "[derived]",
                                                       "9223372036854775808",
                                                       "0x",
                                                       "\\u0000",
                                                       "key = "};
  return lua ? lua_tokens : toml_tokens;
}

std::string mutate(std::string text, std::mt19937_64& rng, bool lua) {
  const auto& toks = tokens(lua);
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
    switch (rng() % 6) {
      case 0:  // insert a token
        text.insert(at, toks[rng() % toks.size()]);
        break;
      case 1:  // delete a span
        if (!text.empty()) text.erase(at, 1 + rng() % 16);
        break;
      case 2:  // flip a byte
        if (at < text.size()) text[at] = static_cast<char>(rng() & 0xff);
        break;
      case 3:  // duplicate a span (repeats keys and tables)
        if (at < text.size()) text.insert(at, text.substr(at, 1 + rng() % 64));
        break;
      case 4:  // repeat a token many times (depth and size)
        for (int i = 0, n = 1 + static_cast<int>(rng() % 200); i < n; ++i) text.insert(at, toks[rng() % toks.size()]);
        break;
      default:  // truncate
        text.resize(at);
        break;
    }
  }
  return text;
}

// Loads and, when that works, resolves: both must answer with a value or a RecipeError.
void load_and_resolve(const std::string& file) {
  try {
    const ConfigTree tree = load_recipe(file);
    const ResolveResult r = resolve(tree, ExecutorFacts{});
    (void)format_violations(r.violations);
    if (r.ok()) (void)to_toml(r.plan);
  } catch (const RecipeError&) {}
}

}  // namespace

TEST_CASE("fuzz: mutated Lua and TOML recipes never crash or hang the loaders") {
  TempRecipes dir;
  std::mt19937_64 rng(0x5eed18);  // fixed: a failure reproduces
  int cases = 0;
  for (const bool lua : {false, true}) {
    const auto seeds = corpus(lua ? ".lua" : ".toml");
    REQUIRE_FALSE(seeds.empty());
    // TOML loads in this process; each Lua load forks a child, so fewer Lua cases fit the time.
    const int n = lua ? 600 : 2500;
    for (int i = 0; i < n; ++i) {
      const std::string text = mutate(seeds[rng() % seeds.size()], rng, lua);
      const std::string file = dir.write(lua ? "fuzz.lua" : "fuzz.toml", text);
      CAPTURE(i);
      load_and_resolve(file);
      ++cases;
    }
  }
  CHECK(cases == 3100);
}

TEST_SUITE_END();
