#include "executors/sweep_array.hpp"

#include <sstream>
#include <stdexcept>

#include "executors/launch.hpp"
#include "executors/slurm_executor.hpp"
#include "runs/run_dir.hpp"
#include "runs/runs_index.hpp"

namespace recipe::exec {

namespace {

std::string last_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line, last;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

std::string different_resources(const std::vector<plan::Plan>& plans, const std::vector<std::string>& names) {
  if (plans.empty() || plans.size() != names.size()) return "";
  const std::string resources = sbatch_resource_lines(plans.front());
  for (size_t i = 1; i < plans.size(); ++i)
    if (sbatch_resource_lines(plans[i]) != resources)
      return "the points of a Slurm sweep must ask for the same resources (one array job has one request), but " +
             names[i] + " differs from " + names.front() +
             " in its #SBATCH lines (executor.nodes, executor.gpus_per_node, executor.time, ...); sweep those keys "
             "in separate sweeps";
  return "";
}

std::string sweep_array_script(const std::vector<plan::Plan>& plans, const std::vector<std::string>& run_dirs,
                               const std::string& log_dir) {
  if (plans.empty() || plans.size() != run_dirs.size())
    throw std::invalid_argument("a sweep array job needs one run dir per point and at least one point");
  if (const std::string why = different_resources(plans, run_dirs); !why.empty()) throw std::invalid_argument(why);
  const std::string resources = sbatch_resource_lines(plans.front());
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << resources;
  s << "#SBATCH --array=0-" << plans.size() - 1 << "\n";
  s << "#SBATCH " << shell_quote("--output=" + log_dir + "/slurm-%A_%a.out") << "\n";
  s << "#SBATCH --open-mode=append\n";
  s << "# Written by `recipe sweep`: array task i runs point i's launch.sh in its run dir.\n";
  s << "case \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (size_t i = 0; i < run_dirs.size(); ++i) s << "  " << i << ") run=" << shell_quote(run_dirs[i]) << " ;;\n";
  s << "  *) echo \"recipe: no sweep point for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\n";
  s << "esac\n";
  s << "exec bash \"$run/launch.sh\" >>\"$run/logs/slurm-$SLURM_JOB_ID.out\" 2>&1\n";
  return s.str();
}

SweepSubmitResult submit_sweep_array(const std::string& script_path, const std::vector<std::string>& run_dirs) {
  SweepSubmitResult res;
  CommandOutput out = run_command({"sbatch", "--parsable", script_path});
  if (out.status == 127 || out.status < 0) {
    res.message =
        "sbatch not found: this host is not a Slurm submit host\n"
        "  fix: run on a login node of the cluster, or use --executor local|mpi";
    return res;
  }
  if (out.status != 0) {
    res.message = "sbatch failed (status " + std::to_string(out.status) + "): " + last_line(out.output);
    return res;
  }
  const std::string last = last_line(out.output);
  res.job_id = last.substr(0, last.find(';'));
  if (res.job_id.empty() || res.job_id.find_first_not_of("0123456789") != std::string::npos) {
    res.message = "could not read a job id from sbatch's output: " + out.output;
    return res;
  }
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    const std::string task = res.job_id + "_" + std::to_string(i);
    record_slurm_job(run_dirs[i], task, script_path);
    RunStatus st;
    try {
      st = read_status(run_dirs[i]);
    } catch (const std::exception&) {}
    st.state = "queued";
    st.message = "slurm array task " + task;
    st.pid = 0;
    write_status(run_dirs[i], st);
  }
  res.ok = true;
  return res;
}

}  // namespace recipe::exec
