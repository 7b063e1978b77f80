// Workers die with their launcher (issue 18 D): `kill -9` of the launching `recipe` process must not
// leave its children running with nobody to stop them or record how the run ended.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "executors/process_group.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

using namespace recipe::exec;
using namespace recipe::exec::testing;

namespace {

// Waits (up to a generous deadline, for loaded CI machines) until `done` holds.
template <class Pred>
bool eventually(Pred done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

}  // namespace

TEST_CASE("process group: a child dies when its launcher is killed with SIGKILL") {
  // A sleep no other process runs, so /proc finds exactly ours.
  const std::string seconds = "977." + std::to_string(::getpid());
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    ProcessGroupOptions opts;
    opts.forward_signals = false;
    try {
      run_process_group({ChildSpec{{"sleep", seconds}, {}, 0}}, opts);
    } catch (...) {}
    ::_exit(0);
  }
  REQUIRE(launcher > 0);
  std::vector<long> sleepers;
  const bool started = eventually([&] { return !(sleepers = pids_with_cmdline("sleep " + seconds)).empty(); });
  REQUIRE(started);
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  const bool died = eventually([&] { return pids_with_cmdline("sleep " + seconds).empty(); });
  CHECK(died);
  for (long pid : pids_with_cmdline("sleep " + seconds)) ::kill(static_cast<pid_t>(pid), SIGKILL);  // no leftovers
}

TEST_SUITE_END();
