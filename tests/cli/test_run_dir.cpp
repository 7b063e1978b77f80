// Run directory creation, status files, git facts, log teeing (runs/run_dir, executors/tee_stream).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdlib>

#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "runs/run_dir.hpp"
#include "executors/tee_stream.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using recipe::cli::testing::read_text;
using recipe::cli::testing::TempDir;
namespace fs = std::filesystem;

TEST_CASE("run ids are the next free integer and never collide") {
  TempDir tmp;
  std::string root = exec::experiment_root(tmp.str(), "exp");
  CHECK(root == (tmp.path() / "exp").string());
  CHECK(exec::next_run_path(root) == (fs::path(root) / "run-1").string());
  CHECK(exec::allocate_run_dir(root) == (fs::path(root) / "run-1").string());
  CHECK(fs::is_directory(fs::path(root) / "run-1" / "logs"));
  fs::create_directories(fs::path(root) / "run-7");
  fs::create_directories(fs::path(root) / "run-x9");  // not a run id
  CHECK(exec::next_run_path(root) == (fs::path(root) / "run-8").string());
  CHECK(exec::allocate_run_dir(root) == (fs::path(root) / "run-8").string());

  // Concurrent launches: each gets its own folder.
  std::mutex m;
  std::set<std::string> got;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      std::string d = exec::allocate_run_dir(root);
      std::lock_guard<std::mutex> lock(m);
      got.insert(d);
    });
  for (auto& t : threads) t.join();
  CHECK(got.size() == 8);
  CHECK(got.count((fs::path(root) / "run-9").string()) == 1);
  CHECK(got.count((fs::path(root) / "run-16").string()) == 1);
}

TEST_CASE("populate_run_dir writes every file; git info of a folder outside a repository is null") {
  TempDir tmp;
  fs::path recipe_file = tmp.path() / "my.toml";
  { std::ofstream(recipe_file) << "preset = \"gpt_tiny\"\n"; }
  std::string dir = exec::allocate_run_dir(exec::experiment_root(tmp.str(), "e"));
  exec::RunDirContents c;
  c.recipe_file = recipe_file.string();
  c.command_line = {"trainer.max_steps=5", "--device cpu"};
  c.resolved_toml = "[model]\nnum_layers = 2\n";
  c.launch_script = "#!/bin/sh\nexec true\n";
  c.host = {{"hostname", "h"}};
  exec::populate_run_dir(dir, c);
  fs::path d(dir);
  CHECK(read_text(d / "recipe.toml") == "preset = \"gpt_tiny\"\n");
  CHECK(read_text(d / "overrides.txt") == "trainer.max_steps=5\n--device cpu\n");
  CHECK(read_text(d / "resolved.toml") == c.resolved_toml);
  CHECK(nlohmann::json::parse(read_text(d / "host.json"))["hostname"] == "h");
  auto git = nlohmann::json::parse(read_text(d / "git.json"));
  // /tmp is not inside a git repository (unless the machine is odd; then a commit is recorded).
  CHECK((git["repo"].is_null() || git.contains("commit")));
  struct stat st {};
  REQUIRE(::stat((d / "launch.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & S_IXUSR) != 0);
  auto status = exec::read_status(dir);
  CHECK(status.state == "created");
  CHECK(!status.exit_code.has_value());
}

TEST_CASE("git info of the source tree records the commit") {
  auto info = exec::git_info(RECIPE_SOURCE_DIR);
  if (info.json["repo"].is_null()) return;  // a source tarball without .git
  if (info.json["commit"].is_null()) {      // a repository with no commit yet (a copied work tree)
    CHECK(::system(("git -C " RECIPE_SOURCE_DIR " rev-parse --verify -q HEAD >/dev/null 2>&1")) != 0);
    return;
  }
  CHECK(info.json["commit"].get<std::string>().size() == 40);
  CHECK(info.json.contains("dirty"));
  CHECK(info.json["dirty"].get<bool>() == !info.patch.empty());
}

TEST_CASE("status.json round-trips") {
  TempDir tmp;
  exec::RunStatus s;
  s.state = "failed";
  s.start_time = exec::now_iso8601();
  s.end_time = s.start_time;
  s.exit_code = 3;
  s.steps = 42;
  s.message = "loss is NaN at step 42";
  exec::write_status(tmp.str(), s);
  auto back = exec::read_status(tmp.str());
  CHECK(back.state == "failed");
  CHECK(back.exit_code == 3);
  CHECK(back.steps == 42);
  CHECK(back.message == s.message);
  CHECK(back.start_time.size() == 20);  // 2024-01-02T03:04:05Z
  CHECK_THROWS_AS(exec::read_status((tmp.path() / "missing").string()), std::runtime_error);
}

TEST_CASE("capture_output runs without a shell and reports failures") {
  auto echo = exec::capture_output({"echo", "a b;c"});
  REQUIRE(echo.has_value());
  CHECK(*echo == "a b;c\n");
  CHECK(!exec::capture_output({"false"}).has_value());
  CHECK(!exec::capture_output({"/nonexistent/program"}).has_value());
}

TEST_CASE("the log tee writes redrawn progress lines as plain lines") {
  TempDir tmp;
  fs::path log = tmp.path() / "rank-0.log";
  std::ostringstream terminal;
  {
    exec::TeeStream tee(terminal, log.string());
    REQUIRE(tee.log_ok());
    tee << "\rstep 1 loss 5.0\x1b[K"
        << "\rstep 2 loss 4.0\x1b[K"
        << "\n"
        << "done\n";
  }
  CHECK(terminal.str() == "\rstep 1 loss 5.0\x1b[K\rstep 2 loss 4.0\x1b[K\ndone\n");
  CHECK(read_text(log) == "step 1 loss 5.0\nstep 2 loss 4.0\ndone\n");
}

TEST_SUITE_END();
