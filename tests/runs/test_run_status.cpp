// status.json stays true (issue 18 D): a message with invalid UTF-8 cannot stop the status write, a
// run whose launcher is gone is shown as failed, and resuming a completed run leaves its record alone.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "dsl/dsl.hpp"
#include "runs/run_dir.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run;

namespace {

std::string plan_toml() {
  recipe::plan::Plan p;
  p.experiment.name = "exp";
  return recipe::dsl::to_toml(p);
}

}  // namespace

TEST_CASE("run status: a message with invalid UTF-8 is written with U+FFFD, never refused") {
  TempDir tmp;
  RunStatus st;
  st.state = "failed";
  st.exit_code = 1;
  st.message = "corrupt header in model.safetensors: \xff\xfe\x80 at byte 8";
  REQUIRE_NOTHROW(write_status(tmp.str(), st));
  const RunStatus back = read_status(tmp.str());
  CHECK(back.state == "failed");
  CHECK(back.message == "corrupt header in model.safetensors: \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD at byte 8");
  CHECK(*back.exit_code == 1);
}

TEST_CASE("run status: the launcher is this same process, not just a live pid") {
  RunStatus st;
  set_launcher(st);
  CHECK(st.pid == static_cast<long>(::getpid()));
  CHECK(st.launcher_start > 0);
  CHECK(launcher_alive(st));
  RunStatus reused = st;
  reused.launcher_start = st.launcher_start + 1;  // same pid, another process start: pid reuse
  CHECK_FALSE(launcher_alive(reused));

  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  RunStatus gone;
  gone.pid = child;
  CHECK_FALSE(launcher_alive(gone));
  CHECK_FALSE(launcher_alive(RunStatus{}));
}

TEST_CASE("run status: runs list and status show a run whose launcher is gone as failed") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer runs
  auto dir = make_run(exp, "exp", "run-1", plan_toml(), 2, 3.0, "running");
  write_text(dir / "status.json",
             "{\"state\": \"running\", \"steps\": 2, \"pid\": " + std::to_string(child) + ", \"launcher_start\": 1}\n");
  auto list = run({"runs", "list", "--experiments-dir", exp.string()});
  CHECK(list.code == 0);
  CHECK(list.out.find("failed") != std::string::npos);
  CHECK(list.out.find("running") == std::string::npos);
  auto status = run({"runs", "status", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(status.out.find("failed") != std::string::npos);
  CHECK(status.out.find("is gone") != std::string::npos);

  // A live launcher keeps its run running.
  RunStatus live;
  live.state = "running";
  set_launcher(live);
  write_status(dir.string(), live);
  list = run({"runs", "list", "--experiments-dir", exp.string()});
  CHECK(list.out.find("running") != std::string::npos);
}

TEST_CASE("run status: resuming a completed run says so and leaves status.json as it was") {
  TempDir tmp;
  auto exp = tmp.path() / "experiments";
  auto dir = make_run(exp, "exp", "run-1", plan_toml(), 5, 3.0, "completed");
  const std::string before = read_text(dir / "status.json");
  auto r = run({"runs", "resume", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(r.code == 0);
  CHECK(r.out.find("exp/run-1 completed") != std::string::npos);
  CHECK(r.out.find("nothing to resume") != std::string::npos);
  CHECK(read_text(dir / "status.json") == before);
}

TEST_SUITE_END();
