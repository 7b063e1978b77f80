// Where each rank of a plan runs and which command starts it. Pure functions of the plan (no
// processes, no files): `recipe pretrain --dry-run` prints them, executors use them to launch.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::exec {

// One rank's place. Megatron order: global rank = tp + TP·(cp + CP·(dp + DP·pp)), i.e. tp varies
// fastest, then cp, then dp, then pp (pipeline stages are the outermost, so one stage's TP group
// stays inside a node whenever TP ≤ ranks per node).
struct RankPlacement {
  int rank = 0;
  int node = 0;
  int local_rank = 0;
  int gpu = -1;  // CUDA device index on its node; -1 for a CPU rank
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

// Ranks started on each node: GPUs per node for CUDA plans, executor.cpu_ranks for CPU plans
// (never fewer than needed to fit world_size on executor.nodes nodes).
int ranks_per_node(const plan::Plan& plan);

// Coordinates of `rank` in a world laid out as tp × cp × dp × pp.
RankPlacement place_rank(int rank, const plan::ParallelismConfig& par, int ranks_per_node, bool gpu);

// Every rank of the plan's world, in rank order.
std::vector<RankPlacement> rank_map(const plan::Plan& plan);

// The command an executor runs to start the plan's workers, as argv and as a shell line.
// `script` is the full text of the run dir's launch.sh (a POSIX shell script for local/mpi, an
// sbatch batch script for slurm); `submit` is how that script is started ("sh launch.sh" or
// "sbatch launch.sh").
struct LaunchCommand {
  std::vector<std::string> argv;  // what runs on the launching host
  std::string line;               // argv, shell-quoted
  std::string script;             // launch.sh content
  std::string submit;             // how launch.sh is submitted
};
LaunchCommand launch_command(const plan::Plan& plan, const std::string& run_dir, const std::string& recipe_exe);

// The #SBATCH lines of a plan's resources and Slurm behaviour: job name, nodes, tasks and GPUs per
// node, time, partition, account, qos, exclusive, the time-limit signal, requeue and the recipe's
// extra directives (everything but --output). The run's launch.sh and a sweep's array script share them.
std::string sbatch_resource_lines(const plan::Plan& plan);

// Single-quotes `s` for a POSIX shell when it contains anything but [A-Za-z0-9_./=:,+@%-].
std::string shell_quote(const std::string& s);
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace recipe::exec
