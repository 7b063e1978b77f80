// `recipe pretrain` through the executors with the built binary: a local world of 2 CPU ranks
// (refused until multi-rank training exists), and gpt_tiny trained by a job on a real single-node
// Slurm.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "executors/run_dir.hpp"
#include "executors/runs_index.hpp"
#include "executors/slurm_executor.hpp"
#include "tests/executors/exec_test_util.hpp"

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run_binary;

TEST_CASE("local executor, 2 CPU ranks: refused before anything starts while training is single-process") {
  // The mpirun path itself (rank logs, teardown) is covered by the process-group tests; a multi-rank
  // *training* world needs the parallelism work, so the CLI refuses it up front: exit 4, nothing
  // created, and --dry-run still shows the mpirun line it would run.
  TempDir tmp;
  auto exp = tmp.path() / "exp";
  const std::string args = "pretrain gpt_tiny --device cpu --max-steps 12 --experiments-dir " + exp.string() +
                           " parallelism.dp=2 executor.cpu_ranks=2 trainer.global_batch_size=16";
  auto r = run_binary(args);
  CHECK(r.code == 4);
  CHECK(r.out.find("multi-rank training") != std::string::npos);
  CHECK(!std::filesystem::exists(exp / "gpt_tiny" / "run-1"));
  auto dry = run_binary(args + " --dry-run");
  CHECK(dry.code == 0);
  CHECK(dry.out.find("mpirun -np 2 --oversubscribe") != std::string::npos);
}

TEST_CASE("slurm executor on a real single-node Slurm: gpt_tiny trains in the job") {
  TempDir tmp;
  std::string cluster_dir = (tmp.path() / "slurm").string();
  std::string script = RECIPE_SOURCE_DIR "/tests/executors/slurm_cluster.sh";
  int rc = std::system((script + " start " + cluster_dir + " >/dev/null 2>&1").c_str());
  if (!(WIFEXITED(rc) && WEXITSTATUS(rc) == 0)) {
    MESSAGE("skipped: no local Slurm");
    return;
  }
  ::setenv("SLURM_CONF", (cluster_dir + "/slurm.conf").c_str(), 1);
  auto exp = tmp.path() / "exp";
  auto r = run_binary("pretrain gpt_tiny --device cpu --executor slurm --max-steps 12 --experiments-dir " + exp.string());
  CHECK(r.code == 0);
  CHECK(r.out.find("submitted slurm job") != std::string::npos);
  auto run = exp / "gpt_tiny" / "run-1";
  std::string job = recorded_slurm_job(run.string());
  REQUIRE_FALSE(job.empty());
  std::string state;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (std::chrono::steady_clock::now() < end) {
    state = query_slurm_job(job).state;
    if (state == "COMPLETED" || state == "FAILED" || state == "CANCELLED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(state == "COMPLETED");
  CHECK(recipe::cli::testing::count_lines(read_text(run / "metrics.jsonl")) == 12);
  CHECK(read_status(run.string()).state == "completed");
  std::string log = read_text(run / "logs" / "rank-0.log");
  CHECK(log.find("finished: 12 steps") != std::string::npos);
  // The srun capture is the only writer of the rank log: the summary line appears once.
  CHECK(log.find("finished: 12 steps") == log.rfind("finished: 12 steps"));
  auto st = run_binary("runs status gpt_tiny/run-1 --experiments-dir " + exp.string());
  CHECK(st.out.find("gpt_tiny/run-1: completed") != std::string::npos);
  std::system((script + " stop " + cluster_dir + " >/dev/null 2>&1").c_str());
  ::unsetenv("SLURM_CONF");
}
