// Validation of the names and values that executors write into launch scripts (launch.sh, the
// sbatch script) or turn into folders: environment variable names, Slurm names, #SBATCH
// directives, MCA parameters, experiment.name. A value that a shell would read as code is an
// error here, with key, value and fix; the executors quote every value they write as well
// (executors/launch.cpp), and check the names again for plans built in code.
#include "dsl/resolve_internal.hpp"
#include "plan/loader_env.hpp"
#include "plan/script_values.hpp"

namespace recipe::dsl::detail {

namespace {

std::string quoted(const std::string& s) { return "\"" + plan::printable(s) + "\""; }

// A string that ends up on a script line: no line break, tab or other control byte.
void require_printable(ResolveContext& ctx, const std::string& path, const std::string& value) {
  if (plan::find_control_char(value) == std::string::npos) return;
  ctx.violation(path, path + "=" + quoted(value) + " has a control character (line break, tab, ...)",
                "remove it: the value is written into the run's launch script");
}

}  // namespace

void check_names(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ExecutorConfig& e = p.executor;

  for (const auto& [key, value] : e.env) {
    const std::string path = "executor.env." + key;
    if (!plan::is_env_name(key))
      ctx.violation("executor.env",
                    "executor.env has the key " + quoted(key) + ", which is not an environment variable name",
                    "use letters, digits and '_', not starting with a digit (e.g. NCCL_DEBUG)");
    else if (const char* why = plan::refused_env_reason(key))
      ctx.violation("executor.env",
                    "executor.env sets " + key + " (" + path + "=" + quoted(value) + "): a recipe may not set " + key +
                        ", because " + why,
                    "remove " + path +
                        "; if you need it, set it in the shell that starts `recipe` (or the job's environment: "
                        "module load, a Slurm prologue), where it is your choice and not the recipe's");
    else
      require_printable(ctx, path, value);
  }
  for (const auto& [key, value] : e.mca) {
    const std::string path = "executor.mca." + key;
    if (!plan::is_env_name(key))
      ctx.violation("executor.mca", "executor.mca has the key " + quoted(key) + ", which is not an MCA parameter name",
                    "use letters, digits and '_' (e.g. btl_tcp_if_include)");
    else
      require_printable(ctx, path, value);
  }

  struct SlurmName {
    const char* path;
    const std::string& value;
    bool list;
  };
  for (const SlurmName& n : {SlurmName{"executor.partition", e.partition, true},
                             SlurmName{"executor.account", e.account, false}, SlurmName{"executor.qos", e.qos, false}})
    if (!n.value.empty() && !plan::is_slurm_name(n.value, n.list))
      ctx.violation(n.path, std::string(n.path) + "=" + quoted(n.value) + " is not a Slurm name",
                    std::string("use letters, digits, '.', '_' and '-'") +
                        (n.list ? " (several partitions: a comma-separated list)" : ""));

  for (const auto& d : e.sbatch_directives) {
    if (plan::find_control_char(d) != std::string::npos)
      require_printable(ctx, "executor.sbatch_directives", d);
    else if (d.empty() || d.front() != '-')
      ctx.violation("executor.sbatch_directives",
                    "executor.sbatch_directives has " + quoted(d) + ", which is not an sbatch option",
                    "write the option as on the sbatch command line, e.g. \"--constraint=h100\"");
  }
  for (const auto& a : e.mpirun_args) require_printable(ctx, "executor.mpirun_args", a);
  require_printable(ctx, "executor.hostfile", e.hostfile);
  require_printable(ctx, "executor.time", e.time);
  require_printable(ctx, "executor.gpu_model", e.gpu_model);
  require_printable(ctx, "executor.device_memory", e.device_memory);

  const plan::ExperimentConfig& x = p.experiment;
  if (!x.name.empty() && !plan::is_folder_name(x.name))
    ctx.violation(
        "experiment.name",
        "experiment.name=" + quoted(x.name.size() > 120 ? x.name.substr(0, 120) + "..." : x.name) +
            " is not a folder name (" + std::to_string(x.name.size()) + " bytes)",
        "use 1 to " + std::to_string(plan::kMaxFolderName) + " letters, digits, '.', '_' and '-', not \".\" or \"..\"");
  if (x.dir.empty())
    ctx.violation("experiment.dir", "experiment.dir must not be empty", "e.g. dir=\"experiments\"");
  else
    require_printable(ctx, "experiment.dir", x.dir);
}

}  // namespace recipe::dsl::detail
