// job-state: the Slurm batch script's status bookkeeping (hidden; written into launch.sh).
#include <filesystem>

#include "plan/exit_codes.hpp"
#include "cli/verbs.hpp"
#include "executors/slurm_job_status.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

int run_job_state(const std::string& run_dir, const std::string& job_id, bool begin, std::optional<int> end_exit,
                  bool requeued, std::ostream& out, std::ostream& err) {
  if (begin == end_exit.has_value()) {
    err << "error: job-state needs exactly one of --begin and --end <status>\n";
    return kExitUsage;
  }
  if (job_id.empty()) {
    err << "error: job-state --job is empty: run it inside a Slurm batch job ($SLURM_JOB_ID)\n";
    return kExitUsage;
  }
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(run_dir) / "resolved.toml", ec)) {
    err << "error: " << run_dir << " is not a run directory (no resolved.toml)\n";
    return kExitUsage;
  }
  try {
    if (begin) {
      exec::record_job_start(run_dir, job_id, out);
    } else {
      exec::RunStatus st = exec::record_job_end(run_dir, job_id, *end_exit, requeued);
      out << "recipe: slurm job " << job_id << ": " << st.state << (st.message.empty() ? "" : ": " + st.message)
          << "\n";
    }
  } catch (const std::exception& e) {
    err << "error: cannot record the job state in " << run_dir << ": " << e.what() << "\n";
    return kExitEnvironment;
  }
  return kExitOk;
}

}  // namespace recipe::cli
