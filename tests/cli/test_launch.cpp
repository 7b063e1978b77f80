// Rank placement and launch commands (executors/launch).
#include <doctest/doctest.h>

#include <set>

#include "executors/launch.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;

namespace {

plan::Plan plan_with(int tp, int cp, int dp, int pp, int nodes, int gpus_per_node,
                     plan::Device device = plan::Device::cuda) {
  plan::Plan p;
  p.parallelism.tp = tp;
  p.parallelism.cp = cp;
  p.parallelism.dp = dp;
  p.parallelism.pp = pp;
  p.parallelism.world_size = tp * cp * dp * pp;
  p.executor.nodes = nodes;
  p.executor.gpus_per_node = gpus_per_node;
  p.trainer.device = device;
  p.experiment.name = "exp";
  return p;
}

}  // namespace

TEST_CASE("rank placement follows Megatron order: tp fastest, then cp, dp, pp") {
  auto plan = plan_with(2, 2, 2, 2, 2, 8);
  auto ranks = exec::rank_map(plan);
  REQUIRE(ranks.size() == 16);
  // Enumerate the layout independently: the innermost loop is the fastest-varying coordinate.
  int rank = 0;
  for (int pp = 0; pp < 2; ++pp)
    for (int dp = 0; dp < 2; ++dp)
      for (int cp = 0; cp < 2; ++cp)
        for (int tp = 0; tp < 2; ++tp, ++rank) {
          CAPTURE(rank);
          CHECK(ranks[rank].rank == rank);
          CHECK(ranks[rank].tp == tp);
          CHECK(ranks[rank].cp == cp);
          CHECK(ranks[rank].dp == dp);
          CHECK(ranks[rank].pp == pp);
        }
  CHECK(ranks[13].node == 1);
  CHECK(ranks[13].local_rank == 5);
  CHECK(ranks[13].gpu == 5);
}

TEST_CASE("CPU ranks have no GPU and use executor.cpu_ranks per node") {
  auto plan = plan_with(2, 1, 2, 1, 1, 0, plan::Device::cpu);
  plan.executor.cpu_ranks = 4;
  CHECK(exec::ranks_per_node(plan) == 4);
  auto ranks = exec::rank_map(plan);
  REQUIRE(ranks.size() == 4);
  for (const auto& r : ranks) {
    CHECK(r.gpu == -1);
    CHECK(r.node == 0);
  }
  // Too few ranks per node for the world: spread over the nodes instead of overflowing one.
  plan.executor.cpu_ranks = 1;
  CHECK(exec::ranks_per_node(plan) == 4);
}

TEST_CASE("launch command: one local rank runs the worker directly") {
  auto plan = plan_with(1, 1, 1, 1, 1, 1);
  plan.executor.kind = plan::ExecutorKind::local;
  auto cmd = exec::launch_command(plan, "/runs/exp/run-1", "/opt/recipe/bin/recipe");
  CHECK(cmd.line == "/opt/recipe/bin/recipe worker --run-dir /runs/exp/run-1");
  CHECK(cmd.script.rfind("#!/bin/sh\n", 0) == 0);
  CHECK(cmd.script.find("exec /opt/recipe/bin/recipe worker --run-dir /runs/exp/run-1\n") != std::string::npos);
}

TEST_CASE("launch command: local multi-rank uses mpirun on this host") {
  auto plan = plan_with(2, 1, 2, 1, 1, 0, plan::Device::cpu);
  plan.executor.kind = plan::ExecutorKind::local;
  plan.executor.cpu_ranks = 4;
  plan.executor.env["OMP_NUM_THREADS"] = "1";
  auto cmd = exec::launch_command(plan, "/r/run 1", "recipe");
  CHECK(cmd.line.rfind("mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS ", 0) == 0);
  CHECK(cmd.line.find("recipe worker --run-dir '/r/run 1'") != std::string::npos);
  CHECK(cmd.script.find("export OMP_NUM_THREADS=1\n") != std::string::npos);
}

TEST_CASE("launch command: mpi uses the hostfile and ranks per node; slurm writes an sbatch script") {
  auto plan = plan_with(8, 1, 1, 4, 4, 8);
  plan.executor.kind = plan::ExecutorKind::mpi;
  plan.executor.hostfile = "hosts.txt";
  plan.executor.mca["btl"] = "^openib";
  auto mpi = exec::launch_command(plan, "/r", "recipe");
  CHECK(mpi.line ==
        "mpirun -np 32 --hostfile hosts.txt --map-by ppr:8:node --bind-to none --mca btl '^openib' "
        "recipe worker --run-dir /r");

  plan.executor.kind = plan::ExecutorKind::slurm;
  plan.executor.partition = "gpu";
  auto slurm = exec::launch_command(plan, "/r", "recipe");
  CHECK(slurm.line == "sbatch /r/launch.sh");
  CHECK(slurm.script.find("#SBATCH --nodes=4\n") != std::string::npos);
  CHECK(slurm.script.find("#SBATCH --ntasks-per-node=8\n") != std::string::npos);
  CHECK(slurm.script.find("#SBATCH --gpus-per-node=8\n") != std::string::npos);
  CHECK(slurm.script.find("#SBATCH --partition=gpu\n") != std::string::npos);
  CHECK(slurm.script.find("srun --mpi=pmix recipe worker --run-dir /r\n") != std::string::npos);
}

TEST_CASE("shell quoting") {
  CHECK(exec::shell_quote("plain/path-1.lua") == "plain/path-1.lua");
  CHECK(exec::shell_quote("") == "''");
  CHECK(exec::shell_quote("a b") == "'a b'");
  CHECK(exec::shell_quote("it's") == "'it'\\''s'");
}

TEST_SUITE_END();
