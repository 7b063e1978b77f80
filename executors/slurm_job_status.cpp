#include "executors/slurm_job_status.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "executors/launcher_failure.hpp"
#include "executors/local_executor.hpp"
#include "executors/watchdog_reports.hpp"
#include "plan/exit_codes.hpp"
#include "runs/tensorboard_writer.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

RunStatus current_status(const std::string& run_dir) {
  try {
    return read_status(run_dir);
  } catch (const std::exception&) {
    return RunStatus{};
  }
}

// The launcher's output of this job's latest start: logs/slurm-<job>.out after the last marker.
std::string latest_job_output(const std::string& run_dir, const std::string& job_id) {
  std::ifstream in(fs::path(run_dir) / "logs" / ("slurm-" + job_id + ".out"), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string all = s.str();
  auto at = all.rfind(job_start_marker(job_id));
  return at == std::string::npos ? all : all.substr(at);
}

}  // namespace

std::string job_start_marker(const std::string& job_id) {
  return "recipe: slurm job " + job_id + ": starting the ranks";
}

RunStatus record_job_start(const std::string& run_dir, const std::string& job_id, std::ostream& out) {
  RunStatus st = current_status(run_dir);
  st.state = "running";
  st.start_time = now_iso8601();
  st.end_time = "";
  st.exit_code.reset();
  st.steps = 0;
  st.pid = 0;  // the job is cancelled through Slurm (scancel), not by a local pid
  st.message = "slurm job " + job_id;
  write_status(run_dir, st);
  clear_watchdog_files(run_dir);
  out << job_start_marker(job_id) << " at " << st.start_time << "\n";
  out.flush();
  return st;
}

RunStatus record_job_end(const std::string& run_dir, const std::string& job_id, int step_exit, bool requeued) {
  RunStatus st = current_status(run_dir);
  const std::string rank0_error = st.state == "failed" ? st.message : "";
  st.end_time = now_iso8601();
  st.exit_code = step_exit;
  const bool checkpointed = st.state == "stopped";  // rank 0: the ranks saved a checkpoint and stopped
  if (requeued) {
    st.state = "queued";
    st.message =
        "slurm job " + job_id + " received its time-limit warning (SIGUSR1) and was requeued; " +
        (checkpointed ? "the ranks saved a checkpoint (" + st.message + ") and the requeued job resumes from it"
                      : "the ranks were stopped (exit status " + std::to_string(step_exit) +
                            ") before a checkpoint and the requeued job resumes from the newest one, if any");
  } else if (checkpointed && (step_exit == 0 || step_exit == kExitStopped)) {
    // The ranks stopped on a signal after a checkpoint; they exit 0 under srun/mpirun (a normal
    // end for the launcher), and the run's code is kExitStopped as for one process.
    st.exit_code = kExitStopped;
    st.message = "slurm job " + job_id + " stopped on a signal after saving a checkpoint: " + st.message;
  } else if (step_exit == 0) {
    st.state = "completed";
    if (st.message.empty() || st.message.rfind("slurm job ", 0) == 0) st.message = "slurm job " + job_id + " completed";
  } else {
    st.state = "failed";
    LauncherFailureParser parser;
    parser.text(latest_job_output(run_dir, job_id));
    if (std::string hang = first_watchdog_report(run_dir); !hang.empty()) {
      st.exit_code = kExitHung;  // a rank's step watchdog ended the job step
      st.message = hang + " (slurm job " + job_id + ")";
    } else if (const auto& f = parser.failure())
      st.message = describe_rank_failure(*f) + "; the job step stopped the other ranks (slurm job " + job_id +
                   ", see logs/rank-" + std::to_string(f->rank) + ".log)";
    else
      st.message = "the job step exited with status " + std::to_string(step_exit) + " (slurm job " + job_id +
                   ", see logs/slurm-" + job_id + ".out)";
    if (!rank0_error.empty()) st.message += "; rank 0: " + rank0_error;
  }
  write_status(run_dir, st);
  write_run_events(run_dir);
  return st;
}

}  // namespace recipe::exec
