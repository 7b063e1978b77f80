#include "executors/mpi_executor.hpp"

#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <iostream>

#include "executors/launch.hpp"
#include "executors/launcher_failure.hpp"
#include "executors/local_executor.hpp"
#include "executors/process_group.hpp"
#include "executors/watchdog_reports.hpp"
#include "plan/exit_codes.hpp"
#include "runs/run_dir.hpp"
#include "runs/tensorboard_writer.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

std::vector<std::string> mpirun_argv(const plan::Plan& plan, const std::string& run_dir,
                                     const std::string& recipe_exe) {
  std::vector<std::string> argv = launch_command(plan, run_dir, recipe_exe).argv;
  // launch.sh keeps plain output for a person running it; the executor adds --tag-output.
  if (!argv.empty() && argv[0] == "mpirun") argv.insert(argv.begin() + 1, "--tag-output");
  return argv;
}

MultiRankResult run_mpirun(const plan::Plan& plan, const std::string& run_dir, const std::string& recipe_exe,
                           const MultiRankOptions& opts) {
  std::ostream& out = opts.out ? *opts.out : std::cout;
  std::ostream& err = opts.err ? *opts.err : std::cerr;
  MultiRankResult result;

  RunStatus status;
  try {
    status = read_status(run_dir);
  } catch (const std::exception&) {}
  status.state = "running";
  status.start_time = now_iso8601();
  set_launcher(status);
  status.message = "";
  status.steps = 0;
  status.end_time = "";
  status.exit_code.reset();
  write_status(run_dir, status);
  clear_watchdog_files(run_dir);

  ChildSpec spec;
  spec.argv = mpirun_argv(plan, run_dir, recipe_exe);
  spec.rank = -1;  // mpirun's own (untagged) messages
  if (::geteuid() == 0) {
    spec.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    spec.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  }
  for (const auto& [k, v] : plan.executor.env) spec.env[k] = v;  // what launch.sh exports

  ProcessGroupOptions pg;
  pg.terminal = &out;
  pg.log_dir = (fs::path(run_dir) / "logs").string();
  pg.parse_mpi_tags = true;
  pg.log_ranks = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  pg.kill_grace_ms = opts.kill_grace_ms;
  pg.forward_signals = opts.forward_signals;
  // One meaning per signal at any world size (docs/user-guide.md, "Signals"): SIGUSR1, SIGTERM and
  // SIGHUP ask the ranks to stop after the step with a checkpoint, as they do a single process.
  pg.graceful_signals = {SIGUSR1, SIGTERM, SIGHUP};
  LauncherFailureParser failure;
  pg.on_line = [&failure](int, const std::string& text) { failure.line(text); };

  ProcessGroupResult r;
  try {
    r = run_process_group({spec}, pg);
  } catch (const std::exception& e) {
    r.exit_code = kExitExecFailed;
    r.message = e.what();
  }
  result.exit_code = r.interrupted ? kExitInterrupted : r.exit_code;
  result.interrupted = r.interrupted;
  const std::string hang = r.exit_code != 0 && !r.interrupted ? first_watchdog_report(run_dir) : "";
  if (r.interrupted) {
    result.message = r.message;
  } else if (!hang.empty()) {
    // A rank's step watchdog ended the run (it exited kExitHung; mpirun stopped the others).
    result.exit_code = kExitHung;
    result.message = hang;
  } else if (r.exit_code != 0) {
    if (const auto& f = failure.failure()) {
      result.failed_rank = f->rank;
      result.message = describe_rank_failure(*f) + "; mpirun stopped the other ranks (see logs/rank-" +
                       std::to_string(f->rank) + ".log)";
    } else {
      result.message = "mpirun exited with status " + std::to_string(r.exit_code) +
                       (r.exit_code == kExitExecFailed && !r.message.empty()
                            ? ": " + r.message
                            : " (a rank failed or could not start; see logs/rank-*.log)");
    }
  }

  // The ranks ran under this process: its view is the run's final state. World rank 0 recorded the
  // steps and its summary meanwhile; keep those, and its message when the run succeeded.
  try {
    status = read_status(run_dir);
  } catch (const std::exception&) {}
  const std::string rank0_error = status.state == "failed" ? status.message : "";
  // Rank 0 recorded "stopped": the ranks agreed to stop on a signal and saved a checkpoint. Each
  // then exited 0 (a rank under a launcher does), so mpirun ended normally, without its abort
  // report; the run's code is kExitStopped, as for one process.
  const bool stopped =
      !r.interrupted && status.state == "stopped" && (result.exit_code == 0 || result.exit_code == kExitStopped);
  if (stopped) {
    result.exit_code = kExitStopped;
    result.message = status.message;
    result.failed_rank = -1;
  }
  set_launcher(status);
  status.end_time = now_iso8601();
  status.exit_code = result.exit_code;
  status.state = stopped ? "stopped" : r.interrupted ? "interrupted" : result.exit_code == 0 ? "completed" : "failed";
  if (stopped) {
    // rank 0's message: where the checkpoint is and how to resume
  } else if (result.exit_code != 0) {
    status.message = result.message;
    if (!r.interrupted && hang.empty() && !rank0_error.empty()) status.message += "; rank 0: " + rank0_error;
  } else if (status.message.empty()) {
    status.message = result.message;
  }
  try {
    write_status(run_dir, status);
    write_run_events(run_dir);
  } catch (const std::exception& e) {
    err << "warning: " << e.what() << "\n";
  }
  if (stopped)
    err << "recipe: stopped early: " << result.message << "\n";
  else if (result.exit_code != 0)
    err << "error: " << result.message << "\n  run dir: " << run_dir << "\n";
  return result;
}

}  // namespace recipe::exec
