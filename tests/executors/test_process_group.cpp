// Process group supervision: failure propagation, reaping, signal forwarding, log routing.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "executors/process_group.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

using namespace recipe::exec;
using namespace recipe::exec::testing;

namespace {

ChildSpec sh(const std::string& script, int rank) { return ChildSpec{{"sh", "-c", script}, {}, rank}; }

long read_pid(const std::filesystem::path& p) {
  for (int i = 0; i < 50; ++i) {
    std::string t = read_text(p);
    if (!t.empty() && t.back() == '\n') return std::stol(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

}  // namespace

TEST_CASE("a failing child stops its siblings and nothing is left running") {
  TempDir tmp;
  auto pidfile = tmp.path() / "grandchild.pid";
  std::ostringstream term;
  ProcessGroupOptions opts;
  opts.terminal = &term;
  opts.log_dir = (tmp.path() / "logs").string();
  opts.forward_signals = false;
  opts.kill_grace_ms = 1000;
  auto t0 = std::chrono::steady_clock::now();
  // rank 1 also starts a grandchild (sleep in the background) that must not survive.
  ProcessGroupResult r =
      run_process_group({sh("sleep 0.3; echo failing; exit 1", 0),
                         sh("sleep 30 & echo $! > " + pidfile.string() + "; wait", 1), sh("exec sleep 30", 2)},
                        opts);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 5.0);
  CHECK(r.exit_code == 1);
  CHECK(r.first_failed_child == 0);
  CHECK(r.message.find("rank 0 exited with status 1") != std::string::npos);
  REQUIRE(r.child_status.size() == 3);
  CHECK(r.child_status[2] == 128 + SIGTERM);
  long grandchild = read_pid(pidfile);
  REQUIRE(grandchild > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(process_running(grandchild));
  CHECK(term.str().find("[rank 0] failing\n") != std::string::npos);
}

TEST_CASE("a child ignoring SIGTERM is killed after the grace period") {
  ProcessGroupOptions opts;
  opts.forward_signals = false;
  opts.kill_grace_ms = 300;
  auto t0 = std::chrono::steady_clock::now();
  // The failing child waits until the other one has installed its trap (a marker file), otherwise
  // SIGTERM could land before the trap and the shell would die of it.
  TempDir tmp;
  const std::string marker = (tmp.path() / "trapped").string();
  ProcessGroupResult r = run_process_group({sh("while [ ! -f " + marker + " ]; do sleep 0.02; done; exit 3", 0),
                                            sh("trap '' TERM; touch " + marker + "; sleep 30 & wait; sleep 30", 1)},
                                           opts);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
  CHECK(r.exit_code == 3);
  CHECK(r.child_status[1] == 128 + SIGKILL);
}

TEST_CASE("all children succeeding gives exit 0; output is prefixed and logged per rank") {
  TempDir tmp;
  std::ostringstream term;
  ProcessGroupOptions opts;
  opts.terminal = &term;
  opts.log_dir = (tmp.path() / "logs").string();
  opts.forward_signals = false;
  ProcessGroupResult r = run_process_group(
      {sh("echo hello from zero; echo to stderr >&2", 0), sh("printf 'one\\rtwo\\nno newline'", 1)}, opts);
  CHECK(r.exit_code == 0);
  CHECK(r.first_failed_child == -1);
  std::string t = term.str();
  CHECK(t.find("[rank 0] hello from zero\n") != std::string::npos);
  CHECK(t.find("[rank 0] to stderr\n") != std::string::npos);
  CHECK(t.find("[rank 1] one\n[rank 1] two\n") != std::string::npos);
  CHECK(t.find("[rank 1] no newline\n") != std::string::npos);
  CHECK(read_text(tmp.path() / "logs" / "rank-0.log") == "hello from zero\nto stderr\n");
  CHECK(read_text(tmp.path() / "logs" / "rank-1.log") == "one\ntwo\nno newline\n");
}

TEST_CASE("mpirun --tag-output lines are routed to their rank") {
  auto tag = parse_mpi_tag("[1,12]<stdout>:step 3 loss 2.5");
  REQUIRE(tag);
  CHECK(tag->first == 12);
  CHECK(tag->second == "step 3 loss 2.5");
  CHECK(parse_mpi_tag("[1,0]<stderr>:oops")->second == "oops");
  CHECK_FALSE(parse_mpi_tag("plain line"));
  CHECK_FALSE(parse_mpi_tag("[1,x]<stdout>:a"));
  CHECK_FALSE(parse_mpi_tag("[warn] something"));

  TempDir tmp;
  std::ostringstream term;
  ProcessGroupOptions opts;
  opts.terminal = &term;
  opts.log_dir = (tmp.path() / "logs").string();
  opts.parse_mpi_tags = true;
  opts.forward_signals = false;
  run_process_group({sh("printf '[1,3]<stdout>:from three\\n[1,0]<stderr>:from zero\\nuntagged\\n'", 0)}, opts);
  CHECK(term.str().find("[rank 3] from three\n") != std::string::npos);
  CHECK(term.str().find("[rank 0] from zero\n") != std::string::npos);
  CHECK(term.str().find("[rank 0] untagged\n") != std::string::npos);
  CHECK(read_text(tmp.path() / "logs" / "rank-3.log") == "from three\n");
}

TEST_CASE("mpirun's per-chunk tags: a line written in pieces, and two ranks' chunks on one line") {
  // A rank writing "step 9" and then "\n" reaches mpirun's stdout as
  // "[1,0]<stdout>:step 9[1,0]<stdout>:\n"; a chunk of rank 1 can land in between.
  TempDir tmp;
  std::ostringstream term;
  std::vector<std::string> seen;
  ProcessGroupOptions opts;
  opts.terminal = &term;
  opts.log_dir = (tmp.path() / "logs").string();
  opts.parse_mpi_tags = true;
  opts.forward_signals = false;
  opts.log_ranks = 3;
  opts.on_line = [&seen](int rank, const std::string& text) { seen.push_back(std::to_string(rank) + ":" + text); };
  run_process_group({sh("printf '[1,0]<stdout>:step 9[1,0]<stdout>:\\n"
                        "[1,0]<stdout>:loss [1,1]<stdout>:from one\\n[1,0]<stdout>:5.2\\n'",
                        0)},
                    opts);
  CHECK(term.str() == "[rank 0] step 9\n[rank 1] from one\n[rank 0] loss 5.2\n");
  CHECK(read_text(tmp.path() / "logs" / "rank-0.log") == "step 9\nloss 5.2\n");
  CHECK(read_text(tmp.path() / "logs" / "rank-1.log") == "from one\n");
  CHECK(std::filesystem::exists(tmp.path() / "logs" / "rank-2.log"));  // created for a quiet rank
  CHECK(read_text(tmp.path() / "logs" / "rank-2.log").empty());
  CHECK(seen == std::vector<std::string>{"0:step 9", "1:from one", "0:loss 5.2"});
}

TEST_CASE("SIGTERM and SIGINT to the launcher are forwarded to every child") {
  for (int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    std::ostringstream term;
    ProcessGroupOptions opts;
    opts.terminal = &term;
    opts.kill_grace_ms = 3000;
    std::thread sender([sig] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      ::kill(::getpid(), sig);
    });
    auto t0 = std::chrono::steady_clock::now();
    const char* trap = sig == SIGTERM ? "TERM" : "INT";
    ProcessGroupResult r =
        run_process_group({sh(std::string("trap 'echo got ") + trap + "; exit 0' " + trap + "; sleep 30 & wait", 0),
                           sh(std::string("trap 'echo got ") + trap + "; exit 0' " + trap + "; sleep 30 & wait", 1)},
                          opts);
    sender.join();
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
    CHECK(r.interrupted);
    CHECK(r.exit_code == 128 + sig);
    CHECK(term.str().find(std::string("[rank 0] got ") + trap) != std::string::npos);
    CHECK(term.str().find(std::string("[rank 1] got ") + trap) != std::string::npos);
  }
}

TEST_CASE("a real mpirun world: a dying rank ends the run with a non-zero exit") {
  if (::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: mpirun not installed");
    return;
  }
  ChildSpec mpirun{
      {"mpirun", "--tag-output", "--oversubscribe", "-np", "2", "sh", "-c",
       "echo hello from $OMPI_COMM_WORLD_RANK; if [ $OMPI_COMM_WORLD_RANK = 1 ]; then exit 3; fi; exec sleep 30"},
      {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}},
      0};
  TempDir tmp;
  std::ostringstream term;
  ProcessGroupOptions opts;
  opts.terminal = &term;
  opts.log_dir = (tmp.path() / "logs").string();
  opts.parse_mpi_tags = true;
  opts.forward_signals = false;
  auto t0 = std::chrono::steady_clock::now();
  ProcessGroupResult r = run_process_group({mpirun}, opts);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 15.0);
  CHECK(r.exit_code != 0);
  CHECK(term.str().find("[rank 1] hello from 1") != std::string::npos);
  CHECK(read_text(tmp.path() / "logs" / "rank-0.log").find("hello from 0") != std::string::npos);
}

TEST_SUITE_END();
