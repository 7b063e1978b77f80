// The single-process local executor: runs a world-size-1 plan's worker in this process.
// Multi-rank local worlds (mpirun on this host) belong to the multi-rank executor.
#pragma once

#include <ostream>
#include <string>

#include "core/trainer.hpp"
#include "dsl/plan.hpp"

namespace recipe::exec {

struct LocalRunOptions {
  std::ostream* out = nullptr;  // progress and summary (nullptr = std::cout); also teed to logs/rank-0.log
  std::ostream* err = nullptr;  // failure messages (nullptr = std::cerr)
  bool interactive = false;     // redraw the progress line in place (a terminal)
  // Install SIGINT/SIGTERM handlers that mark status.json "interrupted" and exit with 130.
  bool handle_signals = true;
  // (executors) false when a launcher (mpirun, srun) already captures this process's output
  // into logs/rank-<r>.log: writing it here too would duplicate every line.
  bool tee_rank_log = true;
};

struct LocalRunResult {
  bool ok = false;              // training completed without divergence or error
  core::TrainResult train;
  std::string error;            // why it failed ("" when ok)
};

// Runs core::train for `plan` in `run_dir` (which must exist, with logs/), keeping status.json
// current (running → completed | failed) and printing a final summary line.
LocalRunResult run_local(const dsl::Plan& plan, const std::string& run_dir, const LocalRunOptions& opts);

// Exit status of a process killed by an interrupt, as shells report it (128 + SIGINT).
inline constexpr int kInterruptedExitCode = 130;

}  // namespace recipe::exec
