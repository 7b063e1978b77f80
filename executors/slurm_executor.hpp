// The Slurm executor: submits the run dir's sbatch script (launch.sh, written by launch_command),
// records the job id in slurm_job.json, and answers `recipe runs status|cancel` from Slurm
// (squeue while the job is known to the controller, then sacct, then `scontrol show job`).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace recipe::exec {

struct SlurmSubmitResult {
  bool ok = false;
  std::string job_id;
  std::string message;  // sbatch's error output when !ok
  int exit_code = 0;    // when !ok: kExitEnvironment (no sbatch, or it failed), kExitRuntime (no job id)
};

// Runs `sbatch --parsable <run_dir>/launch.sh`, records the job id and marks status.json
// "queued"; a failed submission marks it "failed" with the message. Never throws for a missing
// sbatch: the result says so, with a fix.
SlurmSubmitResult submit_slurm(const std::string& run_dir);
// A submission that failed leaves the run "failed" with sbatch's words, not "created" (which
// `runs status` would take for a launcher that was killed). Never throws.
void mark_submit_failed(const std::string& run_dir, const std::string& message, int exit_code);

struct SlurmJobState {
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... ; "" unknown
  std::string exit_code;  // "0:0" style when known
  std::string source;     // "squeue" | "sacct" | "scontrol" | ""
};
SlurmJobState query_slurm_job(const std::string& job_id);

// The run state a Slurm job state means: queued | running | completed | failed | interrupted.
std::string run_state_of(const std::string& slurm_state);

// Runs `scancel <job_id>`; returns "" on success or the reason it failed.
std::string cancel_slurm_job(const std::string& job_id);

// Runs argv and captures stdout+stderr and the exit status (-1 when it cannot start).
struct CommandOutput {
  int status = -1;
  std::string output;
};
CommandOutput run_command(const std::vector<std::string>& argv);

}  // namespace recipe::exec
