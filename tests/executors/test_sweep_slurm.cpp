// A sweep on the Slurm executor is one array job: the script maps each array task to its point's
// run dir and runs that point's launch.sh; points that ask for different resources are refused; on
// a real single-node Slurm (tests/executors/slurm_cluster.sh) every task completes its point.
#include <doctest/doctest.h>

#include "executors/sweep_array.hpp"
#include "runs/run_dir.hpp"
#include "runs/runs_index.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("executors");

namespace fs = std::filesystem;
using namespace recipe::exec;
using namespace recipe::exec::testing;
using recipe::cli::testing::run_binary;

TEST_CASE("the sweep array script: shared resources, one task per point, each point's own launch.sh") {
  recipe::plan::Plan plan;
  plan.trainer.device = recipe::plan::Device::cuda;
  plan.parallelism.world_size = 1;
  plan.executor.kind = recipe::plan::ExecutorKind::slurm;
  plan.executor.gpus_per_node = 1;
  plan.executor.partition = "gpu";
  plan.experiment.name = "sweep1";
  const std::string s =
      sweep_array_script({plan, plan, plan}, {"/e/sweep1/mb2", "/e/sweep1/mb4", "/e/sweep1/mb 8"}, "/e/sweep1/logs");
  for (const char* line :
       {"#!/bin/bash\n", "#SBATCH --job-name=sweep1\n", "#SBATCH --partition=gpu\n", "#SBATCH --gpus-per-node=1\n",
        "#SBATCH --array=0-2\n", "#SBATCH --output=/e/sweep1/logs/slurm-%A_%a.out\n", "  0) run=/e/sweep1/mb2 ;;\n",
        "  1) run=/e/sweep1/mb4 ;;\n", "  2) run='/e/sweep1/mb 8' ;;\n",
        "exec bash \"$run/launch.sh\" >>\"$run/logs/slurm-$SLURM_JOB_ID.out\" 2>&1\n"}) {
    CAPTURE(line);
    CHECK(s.find(line) != std::string::npos);
  }
  CHECK(s.rfind("#SBATCH") < s.find("case "));  // directives before the first command
  recipe::plan::Plan other = plan;
  other.executor.time = "02:00:00";
  CHECK_THROWS_AS(sweep_array_script({plan, other}, {"/a", "/b"}, "/l"), std::invalid_argument);
  CHECK_THROWS_AS(sweep_array_script({}, {}, "/l"), std::invalid_argument);
  CHECK(different_resources({plan, other}, {"point a", "point b"}).find("point b differs from point a") !=
        std::string::npos);
  CHECK(different_resources({plan, plan}, {"a", "b"}).empty());
}

TEST_CASE("a Slurm sweep whose points ask for different resources is refused before anything is created") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "exp";
  for (const char* dry : {" --dry-run", ""}) {
    CAPTURE(dry);
    const auto r = run_binary(
        "sweep gpt3_345m trainer.micro_batch_size=2,4 executor.gpus_per_node=1,2 --executor slurm --gpu-model "
        "H100-80GB --name res --experiments-dir " +
        exp.string() + dry);
    CHECK(r.code == 1);
    CHECK(r.out.find("must ask for the same resources") != std::string::npos);
    CHECK(r.out.find("nothing was created") != std::string::npos);
    CHECK_FALSE(fs::exists(exp));
  }
}

TEST_CASE("a real single-node Slurm: a 2-point sweep is one array job whose tasks complete their points") {
  TempDir tmp;
  SlurmCluster cluster((tmp.path() / "slurm").string());
  if (!cluster.up) {
    MESSAGE("skipped: no local Slurm (slurm_cluster.sh: " << cluster.why_down() << ")");
    return;
  }
  const fs::path exp = tmp.path() / "exp";
  const auto sub = run_binary(
      "sweep gpt_tiny trainer.micro_batch_size=1,2 trainer.global_batch_size=2 --device cpu "
      "--max-steps 3 --warmup 1 --executor slurm executor.time=00:05:00 "
      "executor.exclusive=false --experiments-dir " +
      exp.string());
  REQUIRE_MESSAGE(sub.code == 0, sub.out);
  CHECK(sub.out.find("submitted slurm array job") != std::string::npos);
  const fs::path root = exp / "gpt_tiny";
  CHECK(read_text(root / "sweep_array.sh").find("#SBATCH --array=0-1") != std::string::npos);
  const std::string job0 = recorded_slurm_job((root / "mb1").string());
  const std::string job1 = recorded_slurm_job((root / "mb2").string());
  REQUIRE(job0.size() > 2);
  CHECK(job0.substr(job0.size() - 2) == "_0");
  CHECK(job1 == job0.substr(0, job0.size() - 2) + "_1");
  CHECK(wait_slurm_final(job0, 120) == "COMPLETED");
  CHECK(wait_slurm_final(job1, 120) == "COMPLETED");
  for (const char* point : {"mb1", "mb2"}) {
    CAPTURE(point);
    CHECK_MESSAGE(read_status((root / point).string()).state == "completed",
                  read_text(root / point / "logs" / "rank-0.log"));
  }
  // A re-run finds both finished and submits nothing; the envelope reads them.
  const auto again = run_binary(
      "sweep gpt_tiny trainer.micro_batch_size=1,2 trainer.global_batch_size=2 --device cpu "
      "--max-steps 3 --warmup 1 --executor slurm executor.time=00:05:00 "
      "executor.exclusive=false --experiments-dir " +
      exp.string());
  CHECK(again.code == 0);
  CHECK(again.out.find("nothing to run") != std::string::npos);
  const auto env = run_binary("runs envelope gpt_tiny --warmup 1 --experiments-dir " + exp.string());
  CHECK(env.code == 0);
  CHECK(env.out.find("mb2") != std::string::npos);
}

TEST_SUITE_END();
