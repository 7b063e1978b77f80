// A Slurm run's status while its job runs. The batch script (launch.sh) is the launching parent
// of the ranks, so it owns status.json, through the hidden `recipe job-state` verb:
//
//   recipe job-state --run-dir D --job $SLURM_JOB_ID --begin      before srun: "running"
//   recipe job-state --run-dir D --job $SLURM_JOB_ID --end $rc    after the step: completed | failed
//   ... --end $rc --requeued                                       before `scontrol requeue`: queued
//
// World rank 0 records steps and its summary in between. A failed step's message names the rank
// that failed first, read from srun's (or mpirun's) report in logs/slurm-<job>.out after the last
// start marker (the file is appended across requeues).
#pragma once

#include <ostream>
#include <string>

#include "runs/run_dir.hpp"

namespace recipe::exec {

// The line --begin prints into the job's output file; --end reads the launcher's report after it.
std::string job_start_marker(const std::string& job_id);

RunStatus record_job_start(const std::string& run_dir, const std::string& job_id, std::ostream& out);

// `step_exit` is the job step's exit status (srun's or mpirun's); `requeued`: the job is being
// requeued after its time-limit warning (SIGUSR1). Also refreshes the TensorBoard events.
RunStatus record_job_end(const std::string& run_dir, const std::string& job_id, int step_exit, bool requeued);

}  // namespace recipe::exec
