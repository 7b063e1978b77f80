// Launching a run dir that is not yours (issue 35 item 13): `runs resume` of another user's run dir
// ran its resolved.toml (an LD_PRELOAD in executor.env) as root. Such run dirs are refused.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "dsl/dsl.hpp"
#include "runs/run_dir_owner.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run;
namespace fs = std::filesystem;

namespace {

// A stopped run whose resolved.toml sets LD_PRELOAD, as in the issue. (This version's resolver
// refuses that too; the ownership check comes first and runs nothing of the run dir.)
fs::path failed_run(const fs::path& exp) {
  recipe::plan::Plan p;
  p.experiment.name = "exp";
  p.executor.env = {{"LD_PRELOAD", "/tmp/recipe_injected.so"}};
  const fs::path dir = make_run(exp, "exp", "run-1", recipe::dsl::to_toml(p), 2, 3.0, "failed");
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir / "resolved.toml").c_str(), 0644);
  return dir;
}

}  // namespace

TEST_CASE("run dir ownership: only your own run dir, writable by you alone, is launched") {
  TempDir tmp;
  const fs::path dir = failed_run(tmp.path() / "experiments");
  CHECK_FALSE(launch_ownership_problem(dir.string(), ::geteuid()).has_value());

  const auto other = launch_ownership_problem(dir.string(), ::geteuid() + 1);  // as seen by another user
  REQUIRE(other.has_value());
  CHECK(other->message.find("is owned by") != std::string::npos);
  CHECK(other->message.find("uid " + std::to_string(::geteuid())) != std::string::npos);
  CHECK(other->fix.find("copy the run dir") != std::string::npos);

  ::chmod((dir / "resolved.toml").c_str(), 0666);
  const auto writable = launch_ownership_problem(dir.string(), ::geteuid());
  REQUIRE(writable.has_value());
  CHECK(writable->message.find("writable by group or others (mode 0666)") != std::string::npos);
  CHECK(writable->fix.find("chmod go-w") != std::string::npos);

  fs::rename(dir / "resolved.toml", tmp.path() / "theirs.toml");
  fs::create_symlink(tmp.path() / "theirs.toml", dir / "resolved.toml");
  REQUIRE(launch_ownership_problem(dir.string(), ::geteuid()).has_value());
  CHECK(launch_ownership_problem(dir.string(), ::geteuid())->message.find("not a regular file") != std::string::npos);
}

TEST_CASE("run dir ownership: runs resume refuses a run dir others can write, or another user's") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "experiments";
  const fs::path dir = failed_run(exp);
  ::chmod(dir.c_str(), 0777);
  auto r = run({"runs", "resume", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("writable by group or others") != std::string::npos);
  CHECK(r.err.find("fix: chmod go-w") != std::string::npos);

  if (::geteuid() == 0) {  // only root can give a file away; elsewhere the case above covers ownership
    ::chmod(dir.c_str(), 0755);
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    r = run({"runs", "resume", "exp/run-1", "--experiments-dir", exp.string()});
    CHECK(r.code == 2);
    CHECK(r.err.find("is owned by") != std::string::npos);
    CHECK(::chown(dir.c_str(), 0, 0) == 0);
  }
}
