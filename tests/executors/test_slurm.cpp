// The sbatch script, and a real single-node Slurm (tests/executors/slurm_cluster.sh): submit,
// observe a failing job through `recipe runs status`, cancel a running one.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "executors/launch.hpp"
#include "runs/runs_index.hpp"
#include "executors/slurm_executor.hpp"
#include "plan/exit_codes.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run;

TEST_CASE("the sbatch script carries the executor section") {
  recipe::plan::Plan plan;
  plan.trainer.device = recipe::plan::Device::cuda;
  plan.parallelism.tp = 2;
  plan.parallelism.dp = 8;
  plan.parallelism.world_size = 16;
  plan.executor.kind = recipe::plan::ExecutorKind::slurm;
  plan.executor.nodes = 2;
  plan.executor.gpus_per_node = 8;
  plan.executor.partition = "gpu";
  plan.executor.account = "proj1";
  plan.executor.qos = "high";
  plan.executor.time = "04:00:00";
  plan.executor.exclusive = true;
  plan.executor.sbatch_directives = {"--constraint=h100", "--mail-type=END"};
  plan.executor.env = {{"NCCL_DEBUG", "WARN"}};
  plan.experiment.name = "wiki";
  std::string s = launch_command(plan, "/runs/wiki/run-1", "/opt/recipe").script;
  for (const char* line :
       {"#!/bin/bash\n",
        "#SBATCH --job-name=wiki\n",
        "#SBATCH --nodes=2\n",
        "#SBATCH --ntasks-per-node=8\n",
        "#SBATCH --gpus-per-node=8\n",
        "#SBATCH --partition=gpu\n",
        "#SBATCH --account=proj1\n",
        "#SBATCH --qos=high\n",
        "#SBATCH --time=04:00:00\n",
        "#SBATCH --exclusive\n",
        "#SBATCH --signal=B:USR1@120\n",
        "#SBATCH --requeue\n",
        "#SBATCH --constraint=h100\n",
        "#SBATCH --mail-type=END\n",
        "#SBATCH --output=/runs/wiki/run-1/logs/slurm-%j.out\n",
        "export NCCL_DEBUG=WARN\n",
        "export SLURM_KILL_BAD_EXIT=1",
        "export SLURM_STDOUTMODE=/runs/wiki/run-1/logs/rank-%t.log\n",
        "trap on_usr1 USR1\n",
        "if srun --mpi=list 2>&1 | grep -q pmix; then\n",
        "    exec srun --mpi=pmix /opt/recipe worker --run-dir /runs/wiki/run-1\n",
        "    exec mpirun -np 16 --map-by ppr:8:node --bind-to none --tag-output -x NCCL_DEBUG /opt/recipe worker",
        "/opt/recipe job-state --run-dir /runs/wiki/run-1 --job \"$SLURM_JOB_ID\" --begin\n",
        "/opt/recipe job-state --run-dir /runs/wiki/run-1 --job \"$SLURM_JOB_ID\" --end \"$rc\"\n",
        "scontrol requeue \"$SLURM_JOB_ID\"",
        "exit $rc\n"}) {
    CAPTURE(line);
    CHECK(s.find(line) != std::string::npos);
  }
  // Directives must precede the first command, or sbatch ignores them.
  CHECK(s.rfind("#SBATCH") < s.find("\nexport "));
  // The ranks start after --begin; a requeue is recorded before `scontrol requeue` ends the script.
  CHECK(s.find("--begin") < s.find("start_ranks &"));
  CHECK(s.find("--requeued") < s.find("scontrol requeue"));
}

namespace {

std::string wait_state(const std::string& job, const std::string& want, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string st;
  while (std::chrono::steady_clock::now() < end && (st = query_slurm_job(job).state) != want)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return st;
}

}  // namespace

TEST_CASE("a submission sbatch refuses leaves the run failed with sbatch's words and exit code 4") {
  TempDir tmp;
  // A stand-in sbatch first on PATH: the controller cannot be reached.
  const auto bin = tmp.path() / "bin";
  std::filesystem::create_directories(bin);
  write_text(bin / "sbatch",
             "#!/bin/sh\necho 'sbatch: error: Could not establish a configuration source' >&2\nexit 1\n");
  std::filesystem::permissions(bin / "sbatch", std::filesystem::perms::owner_all);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin.string() + ":" + old_path).c_str(), 1);
  auto dir = make_run(tmp.path() / "experiments", "exp", "run-1", "[executor]\nkind = \"slurm\"\n", 0, 0, "created");
  write_text(dir / "launch.sh", "#!/bin/bash\nexit 0\n");
  const SlurmSubmitResult sub = submit_slurm(dir.string());
  ::setenv("PATH", old_path.c_str(), 1);
  CHECK_FALSE(sub.ok);
  CHECK(sub.exit_code == recipe::kExitEnvironment);
  CHECK(sub.message.find("Could not establish a configuration source") != std::string::npos);
  const RunStatus st = read_status(dir.string());
  CHECK(st.state == "failed");
  CHECK(st.exit_code == recipe::kExitEnvironment);
  CHECK(st.message.find("sbatch failed (status 1)") != std::string::npos);
  CHECK_FALSE(st.end_time.empty());
}

TEST_CASE("a real single-node Slurm: submit, observe a failing rank, cancel") {
  TempDir tmp;
  SlurmCluster cluster((tmp.path() / "slurm").string());
  if (!cluster.up) {
    MESSAGE("skipped: no local Slurm (slurm_cluster.sh: " << cluster.why_down() << ")");
    return;
  }
  auto exp = tmp.path() / "experiments";
  // A two-task job whose rank 1 fails: the step is killed, the job FAILED, runs status says so.
  auto failing = make_run(exp, "exp", "run-1", "[executor]\nkind = \"slurm\"\n", 0, 0, "created");
  write_text(failing / "launch.sh",
             "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --output=" + (failing / "logs" / "slurm-%j.out").string() +
                 "\n"
                 "export SLURM_KILL_BAD_EXIT=1 SLURM_STDOUTMODE=" +
                 (failing / "logs" / "rank-%t.log").string() +
                 "\n"
                 "srun --mpi=pmix sh -c 'echo rank $SLURM_PROCID; if [ $SLURM_PROCID = 1 ]; then exit 3; fi; exec "
                 "sleep 60'\n");
  SlurmSubmitResult sub = submit_slurm(failing.string());
  REQUIRE_MESSAGE(sub.ok, sub.message);
  CHECK(recorded_slurm_job(failing.string()) == sub.job_id);
  CHECK(read_status(failing.string()).state == "queued");
  CHECK(wait_slurm_final(sub.job_id, 20) == "FAILED");
  auto st = run({"runs", "status", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(st.out.find("exp/run-1: failed") != std::string::npos);
  CHECK(st.out.find("slurm job " + sub.job_id + ": FAILED") != std::string::npos);
  CHECK(read_status(failing.string()).state == "failed");
  auto logs = run({"runs", "logs", "exp/run-1", "--experiments-dir", exp.string()});
  CHECK(logs.out.find("rank 1") != std::string::npos);

  // A running job is cancelled through `recipe runs cancel`.
  auto running = make_run(exp, "exp", "run-2", "[executor]\nkind = \"slurm\"\n", 0, 0, "created");
  write_text(running / "launch.sh", "#!/bin/bash\n#SBATCH --output=/dev/null\nexec sleep 60\n");
  SlurmSubmitResult sub2 = submit_slurm(running.string());
  REQUIRE_MESSAGE(sub2.ok, sub2.message);
  CHECK(wait_state(sub2.job_id, "RUNNING", 20) == "RUNNING");
  auto st2 = run({"runs", "status", "exp/run-2", "--experiments-dir", exp.string()});
  CHECK(st2.out.find("exp/run-2: running") != std::string::npos);
  auto cancel = run({"runs", "cancel", "exp/run-2", "--experiments-dir", exp.string()});
  CHECK(cancel.code == 0);
  CHECK(wait_slurm_final(sub2.job_id, 20) == "CANCELLED");
  auto st3 = run({"runs", "status", "exp/run-2", "--experiments-dir", exp.string()});
  CHECK(st3.out.find("exp/run-2: interrupted") != std::string::npos);
}

TEST_SUITE_END();
