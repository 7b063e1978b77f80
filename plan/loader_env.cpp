// The environment variables a recipe may not set (see loader_env.hpp).
#include "plan/loader_env.hpp"

namespace recipe::plan {

const char* refused_env_reason(std::string_view name) {
  // glibc's loader reads every LD_* variable: LD_PRELOAD and LD_AUDIT load a library into each
  // process, LD_LIBRARY_PATH picks the libraries, LD_DEBUG_OUTPUT/LD_PROFILE write files.
  if (name.starts_with("LD_"))
    return "the dynamic loader reads it: it can load a library of the recipe's choosing into every rank";
  // Code loaded by glibc itself (iconv modules) or tunables with a history of loader exploits.
  if (name == "GCONV_PATH" || name == "GLIBC_TUNABLES")
    return "glibc reads it at start: it can load code or change the loader of every rank";
  // A non-interactive bash sources $BASH_ENV, a POSIX sh started as sh may source $ENV; the
  // others change how the launch script itself is parsed or traced.
  if (name == "BASH_ENV" || name == "ENV")
    return "a shell runs the file it names at start (the launch script runs under a shell)";
  if (name == "SHELLOPTS" || name == "BASHOPTS" || name == "PS4" || name == "PROMPT_COMMAND" || name == "IFS" ||
      name.starts_with("BASH_FUNC_"))
    return "it changes how a shell reads and runs the launch script";
  if (name == "PATH") return "it chooses which programs run (mpirun, srun, the workers)";
  return nullptr;
}

}  // namespace recipe::plan
