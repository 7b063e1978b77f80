// Reading the failing rank from mpirun's and srun's reports (texts as Open MPI 4.1 and Slurm
// print them), and the Slurm job's end record built from them.
#include <doctest/doctest.h>

#include "executors/launcher_failure.hpp"
#include "runs/run_dir.hpp"
#include "executors/slurm_job_status.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

using namespace recipe::exec;
using namespace recipe::exec::testing;

TEST_CASE("mpirun's report of a rank that exited non-zero") {
  LauncherFailureParser p;
  p.text(
      "[1,0]<stdout>:step 1\n"
      "--------------------------------------------------------------------------\n"
      "Primary job  terminated normally, but 1 process returned\n"
      "a non-zero exit code. Per user-direction, the job has been aborted.\n"
      "--------------------------------------------------------------------------\n"
      "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
      "the job to be terminated. The first process to do so was:\n"
      "\n"
      "  Process name: [[13031,1],1]\n"
      "  Exit code:    3\n");
  REQUIRE(p.failure());
  CHECK(p.failure()->rank == 1);
  CHECK(p.failure()->exit_code == 3);
  CHECK(describe_rank_failure(*p.failure()) == "rank 1 exited with status 3");
}

TEST_CASE("mpirun's report of a killed rank, and of MPI_Abort") {
  LauncherFailureParser killed;
  killed.line("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).");
  REQUIRE(killed.failure());
  CHECK(killed.failure()->rank == 1);
  CHECK(killed.failure()->signal == 9);
  CHECK(describe_rank_failure(*killed.failure()) == "rank 1 was killed by signal 9 (Killed)");

  LauncherFailureParser aborted;
  aborted.text(
      "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 3.\n\n"
      "srun: error: vm: task 1: Killed\n");
  REQUIRE(aborted.failure());
  CHECK(aborted.failure()->rank == 0);  // the first report wins: rank 1 was killed because of it
  CHECK(describe_rank_failure(*aborted.failure()) == "rank 0 called MPI_Abort with code 3");
}

TEST_CASE("srun's report: the first failing task") {
  LauncherFailureParser p;
  p.text(
      "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
      "srun: error: vm: task 1: Exited with exit code 3\n"
      "srun: error: vm: task 0: Terminated\n");
  REQUIRE(p.failure());
  CHECK(p.failure()->rank == 1);
  CHECK(p.failure()->exit_code == 3);
  LauncherFailureParser sig;
  sig.line("srun: error: node7: task 4: Killed");
  REQUIRE(sig.failure());
  CHECK(sig.failure()->rank == 4);
  CHECK(describe_rank_failure(*sig.failure()) == "rank 4 was killed (Killed)");
  LauncherFailureParser none;
  none.text("[1,0]<stdout>:Exit code: 3 is what a rank might print\nsrun: error: Unable to create step\n");
  CHECK_FALSE(none.failure());
}

TEST_CASE("the Slurm job's start and end records own status.json") {
  TempDir tmp;
  auto run = make_run(tmp.path(), "exp", "run-1", "[executor]\nkind = \"slurm\"\n", 0, 3.0, "queued");
  std::ostringstream out;
  RunStatus st = record_job_start(run.string(), "42", out);
  CHECK(st.state == "running");
  CHECK(read_status(run.string()).state == "running");
  CHECK(out.str().rfind(job_start_marker("42"), 0) == 0);

  // An earlier start of the same job (before a requeue) failed differently: only the output after
  // the latest marker counts.
  write_text(run / "logs" / "slurm-42.out", job_start_marker("42") +
                                                " at t0\nsrun: error: vm: task 0: Exited with exit code 9\n" +
                                                out.str() + "srun: error: vm: task 1: Exited with exit code 3\n");
  // World rank 0 had recorded its own failure meanwhile.
  RunStatus rank0 = read_status(run.string());
  rank0.state = "failed";
  rank0.message = "data file /nowhere.bin not found";
  write_status(run.string(), rank0);
  st = record_job_end(run.string(), "42", 143, false);
  CHECK(st.state == "failed");
  CHECK(st.exit_code == 143);
  CHECK(st.message.find("rank 1 exited with status 3") == 0);
  CHECK(st.message.find("logs/rank-1.log") != std::string::npos);
  CHECK(st.message.find("rank 0: data file /nowhere.bin not found") != std::string::npos);
  CHECK(read_status(run.string()).state == "failed");

  record_job_start(run.string(), "43", out);
  st = record_job_end(run.string(), "43", 138, true);
  CHECK(st.state == "queued");
  CHECK(st.message.find("requeued") != std::string::npos);

  record_job_start(run.string(), "44", out);
  rank0 = read_status(run.string());
  rank0.state = "completed";
  rank0.steps = 5;
  rank0.message = "done: 5 steps";
  write_status(run.string(), rank0);
  st = record_job_end(run.string(), "44", 0, false);
  CHECK(st.state == "completed");
  CHECK(st.steps == 5);
  CHECK(st.message == "done: 5 steps");
}

TEST_SUITE_END();
