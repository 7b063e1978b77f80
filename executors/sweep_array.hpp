// A sweep on the Slurm executor: one array job, one array task per launched point. Task i runs
// point i's own launch.sh (the sbatch script `recipe pretrain --executor slurm` would submit), so
// each point keeps its run dir, its job-state bookkeeping, its logs and its requeue on the
// time-limit signal; `recipe runs status|cancel` address a point as the array task <job>_<i>.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::exec {

// The array job's batch script: the points' shared #SBATCH resource lines, --array=0-(n-1), the
// array's own output in `log_dir`, and a `case` from $SLURM_ARRAY_TASK_ID to the point's run dir,
// whose launch.sh replaces the batch shell (so the time-limit signal reaches that script's trap)
// with its output in <run dir>/logs/slurm-<task job id>.out. Throws std::invalid_argument when the
// points ask for different resources (one array job has one resource request) or none is given.
std::string sweep_array_script(const std::vector<plan::Plan>& plans, const std::vector<std::string>& run_dirs,
                               const std::string& log_dir);

// Why the points cannot share one array job ("" when they can): the first point whose #SBATCH
// resource lines differ from the first's, named by `names` (run dirs or point names). The sweep
// asks this before it creates anything, --dry-run included.
std::string different_resources(const std::vector<plan::Plan>& plans, const std::vector<std::string>& names);

struct SweepSubmitResult {
  bool ok = false;
  std::string job_id;   // the array job's id
  std::string message;  // why not, when !ok
};

// `sbatch --parsable script`; then every run dir i records job "<id>_<i>" (slurm_job.json) and
// status "queued". A missing sbatch is reported with a fix, never thrown.
SweepSubmitResult submit_sweep_array(const std::string& script_path, const std::vector<std::string>& run_dirs);

}  // namespace recipe::exec
