// pretrain / finetune / worker: resolve, report (--dry-run) or create the run dir and run.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/exit_codes.hpp"
#include "cli/report.hpp"
#include "cli/verbs.hpp"
#include "executors/host_info.hpp"
#include "executors/launch.hpp"
#include "executors/local_executor.hpp"
#include "executors/mpi_executor.hpp"
#include "executors/rank_env.hpp"
#include "executors/slurm_executor.hpp"
#include "executors/run_dir.hpp"

namespace fs = std::filesystem;

namespace recipe::cli {

namespace {

bool usable_gpu(const kernels::GpuInfo& gpu) { return kernels::built_with_cuda() && gpu.count > 0; }

std::string no_gpu_reason() {
  return kernels::built_with_cuda() ? "no CUDA GPU is visible on this host"
                                    : "this recipe binary was built without CUDA";
}

bool interactive_terminal(const std::ostream& out) { return &out == &std::cout && ::isatty(STDOUT_FILENO); }

std::string indent(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line, result;
  while (std::getline(in, line)) result += prefix + line + "\n";
  return result;
}

// Exit 4 unless this build and host can run the plan in this process.
int check_runnable_here(const dsl::Plan& plan, const kernels::GpuInfo& gpu, std::ostream& err) {
  // (executors) Slurm and mpi ranks run on other hosts: their GPUs are checked there, by the worker.
  bool ranks_here = plan.executor.kind == "local";
  if (ranks_here && plan.trainer.device == "cuda" && !usable_gpu(gpu)) {
    err << "error: trainer.device=cuda but " << no_gpu_reason() << "\n"
        << "  fix: run with --device cpu (or --device auto to use a GPU only when one is found)\n";
    return kExitEnvironment;
  }
  if (plan.executor.kind != "local" && plan.executor.kind != "mpi" && plan.executor.kind != "slurm") {
    err << "error: executor.kind=" << plan.executor.kind << " is not an executor (local, mpi or slurm)\n";
    return kExitEnvironment;
  }
  // The launchers can start several ranks, but the training core is single-process until
  // tensor/pipeline/data parallelism lands; refuse before creating a run dir or starting mpirun.
  if (plan.parallelism.world_size > 1) {
    err << "error: this plan needs " << plan.parallelism.world_size
        << " ranks; multi-rank training (tp/pp/dp > 1) is not available yet in this build\n"
        << "  fix: use one rank (executor.cpu_ranks=1, --gpus-per-node 1) or inspect the layout with --dry-run\n";
    return kExitEnvironment;
  }
  return kExitOk;
}

// `is_worker`: this process is one rank (`recipe worker`): train here, never launch again.
int run_in_dir(const dsl::Plan& plan, const std::string& run_dir, std::ostream& out, std::ostream& err,
               bool is_worker = false, bool under_launcher = false) {
  // (executors) slurm: submit launch.sh; mpi, or local with several ranks: mpirun under a process
  // group (executors/mpi_executor); local world 1: in this process.
  int world = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  if (!is_worker && plan.executor.kind == "slurm") {
    exec::SlurmSubmitResult r = exec::submit_slurm(run_dir);
    if (!r.ok) {
      err << "error: " << r.message << "\n  run dir: " << run_dir << "\n";
      return r.message.rfind("sbatch not found", 0) == 0 ? kExitEnvironment : kExitRuntime;
    }
    out << "submitted slurm job " << r.job_id << "\n  follow: recipe runs logs -f " << run_dir
        << "\n  status: recipe runs status " << run_dir << "\n";
    return kExitOk;
  }
  if (!is_worker && (plan.executor.kind == "mpi" || world > 1)) {
    exec::MultiRankOptions mopts;
    mopts.out = &out;
    mopts.err = &err;
    exec::MultiRankResult r = exec::run_mpirun(plan, run_dir, recipe_executable(), mopts);
    if (r.exit_code == 0) return kExitOk;
    return r.interrupted ? kExitInterrupted : kExitRuntime;
  }
  exec::LocalRunOptions opts;
  opts.out = &out;
  opts.err = &err;
  opts.interactive = interactive_terminal(out);
  opts.handle_signals = true;
  opts.tee_rank_log = !under_launcher;
  exec::LocalRunResult r = exec::run_local(plan, run_dir, opts);
  return r.ok ? kExitOk : kExitRuntime;
}

}  // namespace

int run_train(const PlanFlags& flags, const std::string& mode, bool dry_run, std::ostream& out,
              std::ostream& err) {
  kernels::GpuInfo gpu = kernels::query_gpus();
  dsl::ExecutorFacts facts = make_facts(flags, gpu, dry_run);
  auto loaded = load_plan(flags, mode, facts, err);
  if (!loaded) return kExitInvalidRecipe;
  if (!dry_run && loaded->requested_device == "cuda" && !usable_gpu(gpu)) {
    err << "error: --device cuda (trainer.device=cuda) but " << no_gpu_reason() << "\n"
        << "  fix: run with --device cpu, or --device auto to use a GPU only when one is found\n";
    return kExitEnvironment;
  }
  if (!report_resolution(loaded->resolved, err)) return kExitInvalidRecipe;

  dsl::Plan plan = loaded->resolved.plan;
  plan.experiment.name = experiment_name(plan, flags.spec);
  if (loaded->requested_device == "auto" && plan.trainer.device == "cpu" && !facts.has_gpu) {
    err << "note: no CUDA GPU found: running on CPU"
        << (kernels::built_with_cuda() ? "" : " (this binary was built without CUDA)") << "\n";
    constexpr int64_t kGpuSized = int64_t(8) << 30;
    if (plan.memory.total > kGpuSized)
      err << "note: this plan is sized for a GPU (" << gib(plan.memory.total)
          << " per rank); on CPU it will be very slow. A small preset (gpt_tiny) suits a CPU.\n";
  }

  const std::string root = exec::experiment_root(plan.experiment.dir, plan.experiment.name);
  if (dry_run) {
    const std::string run_path = exec::next_run_path(root);
    exec::LaunchCommand cmd = exec::launch_command(plan, run_path, recipe_executable());
    print_plan_summary(out, plan);
    out << "\n";
    print_rank_map(out, plan);
    out << "\n";
    print_memory(out, plan);
    out << "\nLaunch (" << plan.executor.kind << " executor):\n  " << cmd.line << "\n";
    if (plan.executor.kind == "slurm") out << "with batch script " << run_path << "/launch.sh:\n" << indent(cmd.script, "  | ");
    out << "Run dir (dry run: nothing created): " << run_path << "\n";
    return kExitOk;
  }

  if (int code = check_runnable_here(plan, gpu, err); code != kExitOk) return code;

  std::string run_dir;
  try {
    run_dir = exec::allocate_run_dir(root);
    exec::RunDirContents contents;
    contents.recipe_file = recipe_source_file(flags.spec);
    contents.command_line = command_line_record(flags);
    contents.resolved_toml = dsl::to_toml(plan);
    contents.launch_script = exec::launch_command(plan, run_dir, recipe_executable()).script;
    contents.host = exec::host_info_json(exec::collect_host_info(version_string()));
    exec::populate_run_dir(run_dir, contents);
  } catch (const std::exception& e) {
    err << "error: cannot set up the run directory: " << e.what() << "\n";
    return kExitEnvironment;
  }
  out << "run dir: " << run_dir << "\n";
  out << "plan: " << model_shape(plan) << ", " << plan.trainer.max_steps << " steps on " << plan.trainer.device
      << "\n";
  out.flush();
  return run_in_dir(plan, run_dir, out, err);
}

int run_worker(const std::string& run_dir, std::ostream& out, std::ostream& err) {
  // (executors) One GPU per local rank, chosen before anything initializes CUDA.
  exec::pin_local_rank_gpu();
  const fs::path resolved = fs::path(run_dir) / "resolved.toml";
  std::error_code ec;
  if (!fs::is_regular_file(resolved, ec)) {
    err << "error: " << resolved.string() << " not found: --run-dir must be a run directory made by "
        << "`recipe pretrain`/`finetune`\n";
    return kExitUsage;
  }
  kernels::GpuInfo gpu = kernels::query_gpus();
  dsl::Plan plan;
  try {
    plan = dsl::load_resolved_plan(resolved.string(), detected_facts(gpu));
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  if (plan.trainer.device == "cuda" && !usable_gpu(gpu)) {
    err << "error: this run's plan uses trainer.device=cuda but " << no_gpu_reason() << "\n";
    return kExitEnvironment;
  }
  int world = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  if (world > 1) {
    err << "error: this run needs " << world << " ranks; multi-rank execution is not available yet in this build\n";
    return kExitEnvironment;
  }
  out << "run dir: " << fs::absolute(run_dir).lexically_normal().string() << "\n";
  out.flush();
  // (executors) Under mpirun/srun the launcher writes logs/rank-<r>.log from this process's output.
  bool under_launcher = !exec::rank_env_from_environment().source.empty() &&
                        exec::rank_env_from_environment().source != "env";
  return run_in_dir(plan, fs::absolute(run_dir).lexically_normal().string(), out, err, /*is_worker=*/true, under_launcher);
}

}  // namespace recipe::cli
