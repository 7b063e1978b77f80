// Rank placement and launch-command rendering for the local, MPI and Slurm executors.
#include "executors/launch.hpp"

#include "core/parallel/parallel_state.hpp"
#include "plan/loader_env.hpp"
#include "plan/script_values.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <sstream>
#include <stdexcept>

namespace recipe::exec {

namespace {

bool is_gpu_plan(const plan::Plan& plan) { return plan.trainer.device == plan::Device::cuda; }

// The resolver's world size (tp·pp·cp·dp); executors never re-derive it.
int world_of(const plan::Plan& plan) { return plan.parallelism.world_size; }

std::vector<std::string> worker_argv(const std::string& exe, const std::string& run_dir) {
  return {exe, "worker", "--run-dir", run_dir};
}

// Options every mpirun line shares: environment forwarding, MCA parameters, user extras.
void append_mpirun_common(std::vector<std::string>& argv, const plan::Plan& plan) {
  for (const auto& [key, value] : plan.executor.env) {
    argv.push_back("-x");
    argv.push_back(key);
  }
  for (const auto& [key, value] : plan.executor.mca) {
    argv.push_back("--mca");
    argv.push_back(key);
    argv.push_back(value);
  }
  for (const auto& extra : plan.executor.mpirun_args) argv.push_back(extra);
}

// The resolver admits only valid names (dsl/resolve_names.cpp); a plan built in code is checked
// here again, because a name cannot be quoted: `export A=1; touch x; B=2` would run `touch`.
std::string env_exports(const plan::Plan& plan) {
  std::string out;
  for (const auto& [key, value] : plan.executor.env) {
    if (!plan::is_env_name(key))
      throw std::invalid_argument("executor.env has \"" + plan::printable(key) +
                                  "\", which is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
    if (const char* why = plan::refused_env_reason(key))
      throw std::invalid_argument("executor.env sets " + key + ", which a recipe may not set: " + why);
    out += "export " + key + "=" + shell_quote(value) + "\n";
  }
  return out;
}

// One `#SBATCH <option>` line. sbatch splits directive lines into words with shell-like quoting,
// so the option is quoted as a shell word; a control byte (a line break above all) would end the
// comment and make the rest a shell command, so it is refused rather than written.
std::string sbatch_line(const std::string& key, const std::string& option) {
  if (plan::find_control_char(option) != std::string::npos)
    throw std::invalid_argument(key + "=\"" + plan::printable(option) +
                                "\" has a control character (line break, tab, ...), which an #SBATCH line cannot hold");
  return "#SBATCH " + shell_quote(option) + "\n";
}

std::string shell_script(const plan::Plan& plan, const std::vector<std::string>& argv) {
  std::string s = "#!/bin/sh\n";
  s += "# Starts the workers of this run; written by `recipe`. Running it again repeats the run\n";
  s += "# in this directory from its resolved.toml.\n";
  s += "set -e\n";
  s += env_exports(plan);
  s += "exec " + shell_join(argv) + "\n";
  return s;
}

std::string sbatch_script(const plan::Plan& plan, const std::string& run_dir, const std::string& exe, int nodes,
                          int per_node) {
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << sbatch_resource_lines(plan);
  s << sbatch_line("run dir", "--output=" + run_dir + "/logs/slurm-%j.out");
  s << "#SBATCH --open-mode=append\n";
  s << "# Written by `recipe`: starts one worker per task from this run's resolved.toml.\n";
  s << env_exports(plan);
  // srun options as its input environment variables, so the srun line itself stays minimal:
  // one log per task, appended across requeues; a failing rank ends the whole step.
  s << "export SLURM_KILL_BAD_EXIT=1 SLURM_OPEN_MODE=append\n";
  s << "export SLURM_STDOUTMODE=" << shell_quote(run_dir + "/logs/rank-%t.log") << "\n";
  s << "requeue=0\nstep=\n";
  s << "on_usr1() { requeue=1; [ -n \"$step\" ] && kill -USR1 \"$step\"; }\n";
  s << "trap on_usr1 USR1\n";
  // The ranks run in the background (exec keeps $! = the launcher's pid) so the trap can fire
  // while they run. srun starts them through PMIx; where this Slurm lacks the pmix plugin, Open
  // MPI's mpirun reads the allocation itself.
  std::vector<std::string> srun = {"srun", "--mpi=pmix"};
  std::vector<std::string> mpirun = {"mpirun",
                                     "-np",
                                     std::to_string(nodes * per_node),
                                     "--map-by",
                                     "ppr:" + std::to_string(per_node) + ":node",
                                     "--bind-to",
                                     "none",
                                     "--tag-output"};
  append_mpirun_common(mpirun, plan);
  for (const auto& w : worker_argv(exe, run_dir)) {
    srun.push_back(w);
    mpirun.push_back(w);
  }
  s << "start_ranks() {\n";
  s << "  if srun --mpi=list 2>&1 | grep -q pmix; then\n";
  s << "    exec " << shell_join(srun) << "\n";
  s << "  else\n";
  s << "    exec " << shell_join(mpirun) << "\n";
  s << "  fi\n";
  s << "}\n";
  // The batch script owns status.json while the job runs (executors/slurm_job_status.hpp).
  const std::string job_state = shell_join({exe, "job-state", "--run-dir", run_dir}) + " --job \"$SLURM_JOB_ID\"";
  s << job_state << " --begin\n";
  s << "start_ranks &\n";
  s << "step=$!\n";
  // `wait` returns early (status > 128) when the trapped signal arrives; wait until the step ends.
  s << "wait \"$step\"; rc=$?\n";
  s << "while kill -0 \"$step\" 2>/dev/null; do wait \"$step\"; rc=$?; done\n";
  // Record the outcome first: `scontrol requeue` ends this script.
  s << "if [ \"$requeue\" = 1 ]; then\n";
  s << "  " << job_state << " --end \"$rc\" --requeued\n";
  s << "  scontrol requeue \"$SLURM_JOB_ID\"\n";
  s << "else\n";
  s << "  " << job_state << " --end \"$rc\"\n";
  s << "fi\n";
  s << "exit $rc\n";
  return s.str();
}

}  // namespace

int ranks_per_node(const plan::Plan& plan) {
  int world = world_of(plan);
  int nodes = std::max(1, plan.executor.nodes);
  int per_node = is_gpu_plan(plan) ? plan.executor.gpus_per_node : plan.executor.cpu_ranks;
  int needed = (world + nodes - 1) / nodes;
  if (per_node <= 0 || per_node * nodes < world) per_node = needed;
  return std::max(1, per_node);
}

std::string sbatch_resource_lines(const plan::Plan& plan) {
  const auto& ex = plan.executor;
  const int world = world_of(plan);
  const int per_node = ranks_per_node(plan);
  const int nodes = std::max(1, (world + per_node - 1) / per_node);
  std::string name = plan.experiment.name.empty() ? "recipe" : plan.experiment.name;
  std::ostringstream s;
  s << sbatch_line("experiment.name", "--job-name=" + name);
  s << sbatch_line("executor.nodes", "--nodes=" + std::to_string(nodes));
  s << sbatch_line("executor.gpus_per_node", "--ntasks-per-node=" + std::to_string(per_node));
  if (is_gpu_plan(plan)) s << sbatch_line("executor.gpus_per_node", "--gpus-per-node=" + std::to_string(per_node));
  if (!ex.time.empty()) s << sbatch_line("executor.time", "--time=" + ex.time);
  if (!ex.partition.empty()) s << sbatch_line("executor.partition", "--partition=" + ex.partition);
  if (!ex.account.empty()) s << sbatch_line("executor.account", "--account=" + ex.account);
  if (!ex.qos.empty()) s << sbatch_line("executor.qos", "--qos=" + ex.qos);
  if (ex.exclusive) s << "#SBATCH --exclusive\n";
  // (slurm executor) USR1 120 s before the time limit, to the batch shell (B:), which forwards it
  // to the ranks (they stop; saving a checkpoint first arrives with checkpoint support) and
  // requeues the job, which then runs the plan again in the same run dir.
  s << "#SBATCH --signal=B:USR1@120\n";
  s << "#SBATCH --requeue\n";
  for (const auto& d : ex.sbatch_directives) s << sbatch_line("executor.sbatch_directives", d);
  return s.str();
}

RankPlacement place_rank(int rank, const plan::ParallelismConfig& par, int per_node, bool gpu) {
  // The layout core/parallel builds (plan::kRankOrder), from the one function that defines it.
  const core::RankCoords c = core::rank_coords(core::ParallelSizes{par.tp, par.cp, par.dp, par.pp}, rank);
  RankPlacement r;
  r.rank = rank;
  r.tp = c.tp;
  r.cp = c.cp;
  r.dp = c.dp;
  r.pp = c.pp;
  r.node = rank / per_node;
  r.local_rank = rank % per_node;
  r.gpu = gpu ? r.local_rank : -1;
  return r;
}

std::vector<RankPlacement> rank_map(const plan::Plan& plan) {
  const int world = world_of(plan);
  const int per_node = ranks_per_node(plan);
  std::vector<RankPlacement> out;
  out.reserve(world);
  for (int r = 0; r < world; ++r) out.push_back(place_rank(r, plan.parallelism, per_node, is_gpu_plan(plan)));
  return out;
}

LaunchCommand launch_command(const plan::Plan& plan, const std::string& run_dir, const std::string& recipe_exe) {
  LaunchCommand cmd;
  const std::string script_path = run_dir + "/launch.sh";
  int world = world_of(plan);
  int per_node = ranks_per_node(plan);
  int nodes = std::max(1, (world + per_node - 1) / per_node);
  const plan::ExecutorKind kind = plan.executor.kind;

  if (kind == plan::ExecutorKind::slurm) {
    cmd.script = sbatch_script(plan, run_dir, recipe_exe, nodes, per_node);
    cmd.argv = {"sbatch", script_path};
    cmd.submit = "sbatch " + shell_quote(script_path);
  } else {
    if (kind == plan::ExecutorKind::local && world == 1) {
      cmd.argv = worker_argv(recipe_exe, run_dir);
    } else {
      cmd.argv = {"mpirun", "-np", std::to_string(world)};
      if (kind == plan::ExecutorKind::mpi) {
        if (!plan.executor.hostfile.empty()) {
          cmd.argv.push_back("--hostfile");
          cmd.argv.push_back(plan.executor.hostfile);
        }
        cmd.argv.push_back("--map-by");
        cmd.argv.push_back("ppr:" + std::to_string(per_node) + ":node");
      } else if (!is_gpu_plan(plan)) {
        // CPU ranks on one host: more ranks than cores is allowed (tests, small machines).
        cmd.argv.push_back("--oversubscribe");
      }
      cmd.argv.push_back("--bind-to");
      cmd.argv.push_back("none");
      append_mpirun_common(cmd.argv, plan);
      for (const auto& w : worker_argv(recipe_exe, run_dir)) cmd.argv.push_back(w);
    }
    cmd.script = shell_script(plan, cmd.argv);
    cmd.submit = "sh " + shell_quote(script_path);
  }
  cmd.line = shell_join(cmd.argv);
  return cmd;
}

std::string shell_quote(const std::string& s) {
  if (s.empty()) return "''";
  bool plain = std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_./=:,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) out += ' ';
    out += shell_quote(argv[i]);
  }
  return out;
}

}  // namespace recipe::exec
