// git_info on a repository whose config names commands (issue 35 item 13): a recipe's folder is
// data, and recording its git state must run none of what its .git/config says.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "runs/run_dir.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("runs");

using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;
namespace fs = std::filesystem;

TEST_CASE("git info runs no fsmonitor, filter, external diff, textconv or pager of the repository") {
  if (std::system("git --version >/dev/null 2>&1") != 0) return;  // no git here: nothing is recorded
  TempDir tmp;
  const std::string repo = tmp / "repo", hook = tmp / "hook.sh", marker = tmp / "ran";
  fs::create_directories(repo);
  // Each configured command leaves a file named after itself, then passes its input through.
  write_file(hook, "#!/bin/sh\ntouch '" + marker + "-'\"$1\"\ncat\n");
  fs::permissions(hook, fs::perms::owner_all);
  write_file(repo + "/recipe.lua", "return {}\n");
  write_file(repo + "/.gitattributes", "*.lua filter=evil diff=evil\n");
  const std::string git = "git -C '" + repo + "' ";
  const std::string setup =
      git + "init -q && " + git + "-c user.email=t@t -c user.name=t commit -q --allow-empty -m init && " + git +
      "add -A && " + git + "-c user.email=t@t -c user.name=t commit -q -m files && " + git + "config core.fsmonitor '" +
      hook + " fsmonitor' && " + git + "config filter.evil.clean '" + hook + " clean' && " + git +
      "config filter.evil.required true && " + git + "config diff.external '" + hook + " external' && " + git +
      "config diff.evil.textconv '" + hook + " textconv' && " + git + "config core.pager '" + hook + " pager'";
  REQUIRE(std::system(setup.c_str()) == 0);
  write_file(repo + "/recipe.lua", "return { trainer = { max_steps = 2 } }\n");  // dirty: status and diff run

  const recipe::exec::GitInfo info = recipe::exec::git_info(repo);
  for (const char* what : {"fsmonitor", "clean", "external", "textconv", "pager"}) {
    CAPTURE(what);
    CHECK_FALSE(fs::exists(marker + "-" + what));
  }
  CHECK(info.json["dirty"] == true);
  CHECK(info.patch.find("+return { trainer = { max_steps = 2 } }") != std::string::npos);
}
