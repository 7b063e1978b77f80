// Exit statuses of the `recipe` command (also listed in `recipe --help`).
#pragma once

namespace recipe::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitInvalidRecipe = 1,  // the recipe does not load or does not resolve (violations printed)
  kExitUsage = 2,          // bad command line
  kExitRuntime = 3,        // training or data preparation failed (including divergence)
  kExitEnvironment = 4,    // this machine/build cannot run the plan (no GPU, no CUDA build, no MPI)
  kExitStopped = 5,        // stopped early by SIGUSR1/SIGTERM after saving a checkpoint (resumable)
  kExitInterrupted = 130,  // SIGINT/SIGTERM
};

inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 ok, 1 invalid recipe (does not load or resolve), 2 usage error,\n"
    "            3 runtime/training failure (incl. divergence), 4 environment problem\n"
    "            (no GPU / CUDA build for --device cuda, no MPI/mpirun for several ranks),\n"
    "            5 stopped by SIGUSR1/SIGTERM after saving a checkpoint (`recipe runs resume`),\n"
    "            130 interrupted.";

}  // namespace recipe::cli
