// What a recipe can make the engine write (issue 35 item 13): `print` wrote 1 GB in 30 s, and a
// 10 MB key or value was echoed whole in messages. Both are bounded.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "helpers.hpp"
#include "temp_recipes.hpp"

#include "dsl/lua_loader.hpp"
#include "dsl/shown_text.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

namespace {

// Loads `file` with stdout sent to `out` (the evaluation may run in a child process, which
// inherits the descriptor), and returns what was written there.
std::string stdout_of_load(const std::string& file, const std::string& out) {
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
  try {
    load_recipe(file);
  } catch (const RecipeError&) {}
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::ifstream in(out, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("echo bounds: a recipe's print writes at most 64 KiB, then one notice") {
  TempRecipes dir;
  const std::string file = dir.write("loud.lua",
                                     "print('hello', 42)\n"
                                     "for i = 1, 20000 do print(string.rep('x', 100)) end\n"
                                     "return preset 'gpt_tiny' {}\n");
  const std::string printed = stdout_of_load(file, dir.dir() + "/stdout.txt");
  CHECK(printed.starts_with("hello\t42\n"));
  CHECK(printed.size() < 64 * 1024 + 200);  // 2 MB without the bound
  CHECK(printed.find("print output is cut at 65536 bytes") != std::string::npos);
  CHECK(printed.find("cut at", printed.find("cut at") + 1) == std::string::npos);  // one notice
}

TEST_CASE("echo bounds: a 10 MB key or value is shown by its start and size") {
  const std::string huge(10'000'000, 'k');
  ResolveResult r = resolve_json(with(tiny_gpt(), json{{"trainer", {{huge, 1}}}}));
  REQUIRE_FALSE(r.ok());
  CHECK(report(r).size() < 4000);
  CHECK(report(r).find("(10000008 bytes)") != std::string::npos);  // the path trainer.<key>

  r = resolve_json(with(tiny_gpt(), json{{"data", {{"eod_token", std::string(10'000'000, 'v')}}}}));
  const Violation* v = find_violation(r, "data.eod_token");
  REQUIRE(v != nullptr);
  CHECK(v->message.size() < 1000);
  CHECK(v->message.find("(10000017 bytes)") != std::string::npos);  // data.eod_token="<value>"

  TempRecipes dir;
  const std::string file = dir.write("err.lua", "error(string.rep('e', 10000000))\n");
  const std::string msg = recipe_error_of([&] { load_recipe(file); });
  CHECK(msg.size() < kMaxShownMessage + 100);
  CHECK(msg.find("(1000") != std::string::npos);
}

TEST_CASE("echo bounds: shown_value keeps short text and never splits a UTF-8 character") {
  CHECK(shown_value("short") == "short");
  const std::string s = std::string(9, 'a') + "é" + "zzz";  // é is 2 bytes at offsets 9 and 10
  CHECK(shown_value(s, 10) == std::string(9, 'a') + "… (14 bytes)");
  CHECK(bounded_message("a b c") == "a b c");
}
