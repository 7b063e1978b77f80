// Multi-rank execution on this host (local executor, world > 1) and across a hostfile (mpi
// executor): runs the run dir's `mpirun` command under a process group, streams rank-prefixed
// logs into the terminal and logs/rank-<r>.log, owns status.json (running → completed | failed,
// naming the failing rank and its exit status | interrupted), stops everything when one rank dies
// or on Ctrl-C/SIGTERM. launch.sh (written before the run) holds the same command.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::exec {

struct MultiRankOptions {
  std::ostream* out = nullptr;  // rank-prefixed worker output (nullptr = std::cout)
  std::ostream* err = nullptr;  // launcher messages (nullptr = std::cerr)
  int kill_grace_ms = 5000;     // SIGTERM → SIGKILL when stopping the ranks
  bool forward_signals = true;
};

struct MultiRankResult {
  int exit_code = 0;  // 0 ok, the failing rank's status, or 128+signal when interrupted
  bool interrupted = false;
  int failed_rank = -1;  // the rank mpirun reported as failing first; -1 = unknown / none
  std::string message;   // "rank 1 exited with status 3; mpirun stopped the other ranks (...)"
};

// The argv actually run: launch_command's mpirun argv plus --tag-output (so lines can be routed
// to their rank). Open MPI refuses to run as root without OMPI_ALLOW_RUN_AS_ROOT*; those are
// set in the environment rather than the argv so launch.sh stays the same for every user.
std::vector<std::string> mpirun_argv(const plan::Plan& plan, const std::string& run_dir, const std::string& recipe_exe);

MultiRankResult run_mpirun(const plan::Plan& plan, const std::string& run_dir, const std::string& recipe_exe,
                           const MultiRankOptions& opts);

}  // namespace recipe::exec
