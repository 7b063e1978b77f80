// Exit statuses of the `recipe` command and of the processes it starts (workers, forked helpers),
// in one header with no dependencies so every layer names them the same way: the CLI returns them,
// executors map a worker's status to a run state, the worker exits with them. Lives in plan/ (the
// dependency-free library every layer above kernels/ already links) rather than in cli/, which the
// lower layers must not include. Listed in `recipe --help` (kExitCodeHelp).
#pragma once

namespace recipe {

enum ExitCode : int {
  kExitOk = 0,
  kExitInvalidRecipe = 1,  // the recipe does not load or does not resolve (violations printed)
  kExitUsage = 2,          // bad command line
  kExitRuntime = 3,        // training or data preparation failed (including divergence)
  kExitEnvironment = 4,    // this machine/build cannot run the plan (no GPU, no CUDA build, no MPI)
  kExitStopped = 5,        // stopped early by SIGUSR1/SIGTERM/SIGHUP after saving a checkpoint (resumable)
  kExitHung = 6,           // the step watchdog ended the run: no progress for trainer.step_timeout_s
  kExitExecFailed = 127,   // a forked child could not exec its program (the shells' "not found")
  kExitInterrupted = 130,  // SIGINT, or a second stop signal (128 + SIGINT, as shells report it)
};

// A process killed by (or exiting on behalf of) signal `sig` reports 128 + sig, as shells do.
inline constexpr int kExitSignalBase = 128;
constexpr int exit_code_for_signal(int sig) { return kExitSignalBase + sig; }

inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 ok, 1 invalid recipe (does not load or resolve), 2 usage error,\n"
    "            3 runtime/training failure (incl. divergence), 4 environment problem\n"
    "            (no GPU / CUDA build for --device cuda, no MPI/mpirun for several ranks),\n"
    "            5 stopped by SIGUSR1/SIGTERM/SIGHUP after saving a checkpoint (`recipe runs resume`),\n"
    "            6 a rank made no progress for trainer.step_timeout_s (step watchdog),\n"
    "            130 interrupted (Ctrl-C/SIGINT, or a second stop signal).";

}  // namespace recipe
