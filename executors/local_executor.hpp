// One rank's training in this process: the whole run for a world-size-1 local plan, or one rank
// of a multi-rank world started by mpirun/srun (the launching parent, executors/mpi_executor or
// the Slurm batch script, then owns the run's overall status).
#pragma once

#include <ostream>
#include <string>

#include "core/train/trainer.hpp"
#include "plan/plan.hpp"

namespace recipe::exec {

// Who writes status.json from this process.
enum class StatusRole {
  owner,     // the single process of a run: running → completed | failed | interrupted, with its pid
  reporter,  // world rank 0 under a launcher: records steps, summary and its own outcome, keeping
             // the launcher's pid and start time; the launcher writes the final state after it
  none,      // the other ranks: never touch status.json, print no summary
};

struct LocalRunOptions {
  std::ostream* out = nullptr;  // progress and summary (nullptr = std::cout); also teed to logs/rank-<rank>.log
  std::ostream* err = nullptr;  // failure messages (nullptr = std::cerr)
  bool interactive = false;     // redraw the progress line in place (a terminal)
  // Install signal handlers. SIGUSR1, SIGTERM and SIGHUP ask training to stop after the current
  // step with a checkpoint (core/train/stop_request.hpp): the run ends "stopped" and resumes when rerun
  // (exit 5 for the owner; a rank under a launcher exits 0, so mpirun/srun see a normal end, and
  // the launcher reports 5 from rank 0's "stopped"). SIGINT, or a second such signal, stops at
  // once: status.json "interrupted" (owner, reporter) and exit 130 for the owner, 128 + signal for
  // a rank under a launcher, so the launcher sees which signal stopped it.
  bool handle_signals = true;
  StatusRole status_role = StatusRole::owner;
  int rank = 0;  // world rank, for messages
  // (executors) false when a launcher (mpirun, srun) already captures this process's output
  // into logs/rank-<r>.log: writing it here too would duplicate every line.
  bool tee_rank_log = true;
};

struct LocalRunResult {
  bool ok = false;  // training completed without divergence or error
  core::TrainResult train;
  std::string error;     // why it failed ("" when ok)
  bool stopped = false;  // ok, but stopped early on a signal after a checkpoint (exit 5)
};

// Runs core::train for `plan` in `run_dir` (which must exist, with logs/), keeping status.json
// current (running → completed | failed) and printing a final summary line.
LocalRunResult run_local(const plan::Plan& plan, const std::string& run_dir, const LocalRunOptions& opts);

}  // namespace recipe::exec
