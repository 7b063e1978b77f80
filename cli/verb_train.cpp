// pretrain / finetune / worker: resolve, report (--dry-run) or create the run dir and run.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "checkpoint/checkpoint.hpp"
#include "plan/exit_codes.hpp"
#include "cli/report.hpp"
#include "cli/verbs.hpp"
#include "core/parallel/parallel_bootstrap.hpp"
#include "executors/host_info.hpp"
#include "executors/launch.hpp"
#include "executors/local_executor.hpp"
#include "executors/mpi_executor.hpp"
#include "executors/rank_env.hpp"
#include "executors/slurm_executor.hpp"
#include "runs/run_dir.hpp"
#include "runs/run_dir_owner.hpp"

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

// True when `name` is an executable file in a folder of $PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
  return false;
}

// Exit 4 unless this build and host can run (or launch) the plan.
int check_runnable_here(const plan::Plan& plan, const kernels::GpuInfo& gpu, std::ostream& err) {
  // (executors) Slurm and mpi ranks run on other hosts: their GPUs are checked there, by the worker.
  const bool ranks_here = plan.executor.kind == plan::ExecutorKind::local;
  if (ranks_here && plan.trainer.device == plan::Device::cuda && !usable_gpu(gpu)) {
    err << "error: trainer.device=cuda but " << no_gpu_reason() << "\n"
        << "  fix: run with --device cpu (or --device auto to use a GPU only when one is found)\n";
    return kExitEnvironment;
  }
  // Every multi-rank world is an MPI world: the workers need a build with MPI, and local/mpi runs
  // need mpirun here (Slurm's batch script finds srun or mpirun on the compute node).
  const int world = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  if (world > 1 && !core::built_with_mpi()) {
    err << "error: this plan needs " << world << " ranks, but this recipe binary was built without MPI\n"
        << "  fix: install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild, or use one rank\n";
    return kExitEnvironment;
  }
  if (plan.executor.kind != plan::ExecutorKind::slurm && (world > 1 || plan.executor.kind == plan::ExecutorKind::mpi) &&
      !on_path("mpirun")) {
    err << "error: executor.kind=" << plan::to_string(plan.executor.kind) << " with " << world
        << " rank(s) starts them with mpirun, which is not on PATH\n"
        << "  fix: install Open MPI (apt-get install openmpi-bin) or add its bin folder to PATH\n";
    return kExitEnvironment;
  }
  return kExitOk;
}

// How this process takes part in a run: the launching driver, the single process of a
// one-rank run, or one rank started by mpirun/srun.
struct RankRole {
  bool is_worker = false;       // `recipe worker`: train here, never launch again
  bool under_launcher = false;  // started by mpirun/srun, which capture this process's output
  int rank = 0;                 // world rank
  int world = 1;
};

int run_in_dir(const plan::Plan& plan, const std::string& run_dir, std::ostream& out, std::ostream& err,
               const RankRole& role = {}) {
  // (executors) slurm: submit launch.sh; mpi, or local with several ranks: mpirun under a process
  // group (executors/mpi_executor); local world 1: in this process.
  int world = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  if (!role.is_worker && plan.executor.kind == plan::ExecutorKind::slurm) {
    exec::SlurmSubmitResult r = exec::submit_slurm(run_dir);
    if (!r.ok) {
      err << "error: " << r.message << "\n  run dir: " << run_dir << "\n";
      return r.exit_code;
    }
    out << "submitted slurm job " << r.job_id << "\n  follow: recipe runs logs -f " << run_dir
        << "\n  status: recipe runs status " << run_dir << "\n";
    return kExitOk;
  }
  if (!role.is_worker && (plan.executor.kind == plan::ExecutorKind::mpi || world > 1)) {
    exec::MultiRankOptions mopts;
    mopts.out = &out;
    mopts.err = &err;
    exec::MultiRankResult r = exec::run_mpirun(plan, run_dir, recipe_executable(), mopts);
    if (r.exit_code == kExitOk) return kExitOk;
    if (r.exit_code == kExitStopped || r.exit_code == kExitHung) return r.exit_code;
    return r.interrupted ? kExitInterrupted : kExitRuntime;
  }
  // This process is the whole world (the driver's one local rank), even inside a batch script.
  if (!role.is_worker) exec::forget_batch_shell_rank();
  exec::LocalRunOptions opts;
  opts.out = &out;
  opts.err = &err;
  opts.interactive = !role.under_launcher && interactive_terminal(out);
  opts.handle_signals = true;
  opts.tee_rank_log = !role.under_launcher;
  opts.rank = role.rank;
  // Under a launcher, the launching parent (mpirun's supervisor, the Slurm batch script) owns the
  // run's status; world rank 0 reports steps and its summary, the other ranks stay silent.
  opts.status_role = role.rank != 0        ? exec::StatusRole::none
                     : role.under_launcher ? exec::StatusRole::reporter
                                           : exec::StatusRole::owner;
  exec::LocalRunResult r = exec::run_local(plan, run_dir, opts);
  if (!r.ok && role.world > 1 && !r.train.diverged) {
    // A rank that failed on its own (an exception, not the divergence every rank sees alike) must
    // not leave its peers waiting in a collective, nor hang itself in MPI_Finalize.
    out.flush();
    err.flush();
    core::abort_world(kExitRuntime);
  }
  // A graceful stop is a normal end for a rank under a launcher (exit 0: mpirun prints no abort
  // report); rank 0's status.json says "stopped" and the launcher turns that into kExitStopped.
  if (r.stopped) return role.under_launcher ? kExitOk : kExitStopped;
  return r.ok ? kExitOk : kExitRuntime;
}

}  // namespace

int check_runnable(const plan::Plan& plan, const kernels::GpuInfo& gpu, std::ostream& err) {
  return check_runnable_here(plan, gpu, err);
}

int run_prepared(const plan::Plan& plan, const std::string& run_dir, std::ostream& out, std::ostream& err) {
  return run_in_dir(plan, run_dir, out, err);
}

void write_run_dir(const plan::Plan& plan, const std::string& spec, const std::vector<std::string>& command_line,
                   const std::string& run_dir, const kernels::GpuInfo& gpu) {
  exec::RunDirContents contents;
  contents.recipe_file = recipe_source_file(spec);
  contents.command_line = command_line;
  contents.resolved_toml = dsl::to_toml(plan);
  contents.launch_script = exec::launch_command(plan, run_dir, recipe_executable()).script;
  contents.host = exec::host_info_json(exec::collect_host_info(version_string()));
  contents.host["device"] =
      exec::resolved_device_json(plan.trainer.device, gpu, std::max(1, plan.parallelism.world_size));
  exec::populate_run_dir(run_dir, contents);
}

int run_train(const PlanFlags& flags, const std::string& mode, bool dry_run, std::ostream& out, std::ostream& err) {
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

  plan::Plan plan = loaded->resolved.plan;
  plan.experiment.name = experiment_name(plan, flags.spec);
  if (loaded->requested_device == "auto" && plan.trainer.device == plan::Device::cpu && !facts.has_gpu) {
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
    out << "\nLaunch (" << plan::to_string(plan.executor.kind) << " executor):\n  " << cmd.line << "\n";
    if (plan.executor.kind == plan::ExecutorKind::slurm)
      out << "with batch script " << run_path << "/launch.sh:\n" << indent(cmd.script, "  | ");
    out << "Run dir (dry run: nothing created): " << run_path << "\n";
    return kExitOk;
  }

  if (int code = check_runnable_here(plan, gpu, err); code != kExitOk) return code;

  std::string run_dir;
  try {
    run_dir = exec::allocate_run_dir(root);
    write_run_dir(plan, flags.spec, command_line_record(flags), run_dir, gpu);
  } catch (const std::exception& e) {
    err << "error: cannot set up the run directory: " << e.what() << "\n";
    return kExitEnvironment;
  }
  out << "run dir: " << run_dir << "\n";
  out << "plan: " << model_shape(plan) << ", " << plan.trainer.max_steps << " steps on "
      << plan::to_string(plan.trainer.device) << "\n";
  out.flush();
  return run_in_dir(plan, run_dir, out, err);
}

namespace {

// A run dir someone else owns or can write is not launched (runs/run_dir_owner.hpp).
bool refuse_foreign_run_dir(const std::string& run_dir, const std::string& who, std::ostream& err) {
  const auto problem = exec::launch_ownership_problem(run_dir, ::geteuid());
  if (!problem) return false;
  err << "error: " << who << problem->message << "\n  fix: " << problem->fix << "\n";
  return true;
}

}  // namespace

int run_resume(const std::string& run_dir, std::ostream& out, std::ostream& err) {
  if (refuse_foreign_run_dir(run_dir, "", err)) return kExitUsage;
  kernels::GpuInfo gpu = kernels::query_gpus();
  plan::Plan plan;
  try {
    dsl::ExecutorFacts facts = detected_facts(gpu);
    facts.host_memory_gib = host_available_gib();
    plan = dsl::load_resolved_plan((fs::path(run_dir) / "resolved.toml").string(), facts);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  if (int code = check_runnable_here(plan, gpu, err); code != kExitOk) return code;
  const std::string ckpts =
      plan.checkpoint.dir.empty() ? (fs::path(run_dir) / "checkpoints").string() : plan.checkpoint.dir;
  std::string latest;
  try {
    if (fs::exists(ckpts)) latest = ckpt::find_checkpoint(ckpts);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  out << "run dir: " << run_dir << "\n"
      << (latest.empty() ? "no checkpoint yet: the run starts again from step 0\n" : "resuming from " + latest + "\n");
  out.flush();
  return run_in_dir(plan, run_dir, out, err);
}

int run_worker(const std::string& run_dir, std::ostream& out, std::ostream& err) {
  // (executors) One GPU per local rank, chosen before anything initializes CUDA.
  exec::pin_local_rank_gpu();
  const exec::RankEnv launcher = exec::rank_env_from_environment();
  RankRole role;
  role.is_worker = true;
  // Under mpirun/srun the launcher writes logs/rank-<r>.log from this process's output.
  role.under_launcher = !launcher.source.empty() && launcher.source != "env";
  role.rank = launcher.rank;
  role.world = launcher.world;
  const std::string who = role.world > 1 ? "rank " + std::to_string(role.rank) + ": " : "";

  const fs::path resolved = fs::path(run_dir) / "resolved.toml";
  std::error_code ec;
  if (!fs::is_regular_file(resolved, ec)) {
    err << "error: " << who << resolved.string() << " not found: --run-dir must be a run directory made by "
        << "`recipe pretrain`/`finetune`\n";
    return kExitUsage;
  }
  if (refuse_foreign_run_dir(run_dir, who, err)) return kExitUsage;
  kernels::GpuInfo gpu = kernels::query_gpus();
  plan::Plan plan;
  try {
    // The launcher checked the GPUs per node before starting the ranks; here each rank sees only
    // its own GPU (pin_local_rank_gpu), so re-resolve as a plan for this node, not against it.
    dsl::ExecutorFacts facts = detected_facts(gpu);
    facts.planning = true;
    facts.visible_gpus = 0;  // unknown for the node: this rank sees one
    plan = dsl::load_resolved_plan(resolved.string(), facts);
  } catch (const dsl::RecipeError& e) {
    err << "error: " << who << e.what() << "\n";
    return kExitInvalidRecipe;
  }
  if (plan.trainer.device == plan::Device::cuda && !usable_gpu(gpu)) {
    err << "error: " << who << "this run's plan uses trainer.device=cuda but " << no_gpu_reason() << "\n";
    return kExitEnvironment;
  }
  const int world = plan.parallelism.world_size > 0 ? plan.parallelism.world_size : 1;
  if (world != role.world) {
    const std::string abs_dir = fs::absolute(run_dir).lexically_normal().string();
    err << "error: " << who << "this run needs " << world << " rank" << (world == 1 ? "" : "s") << " but "
        << (role.world > 1 || !launcher.source.empty() ? "its launcher started " + std::to_string(role.world)
                                                       : std::string("this worker was started alone"))
        << "\n  fix: start it with its launch script (sh " << abs_dir << "/launch.sh), or with `recipe pretrain`\n";
    return kExitEnvironment;
  }
  // (executors) CPU ranks sharing a host split its cores unless the recipe or the environment
  // chose a thread count; the resolved plan on disk stays as it was.
  if (plan.trainer.device == plan::Device::cpu && plan.trainer.cpu_threads == 0)
    if (auto threads = exec::cpu_threads_per_rank(exec::ranks_per_node(plan))) plan.trainer.cpu_threads = *threads;
  if (role.rank == 0) {
    out << "run dir: " << fs::absolute(run_dir).lexically_normal().string() << "\n";
    if (world > 1)
      out << "world: " << world << " ranks (tp " << plan.parallelism.tp << ", pp " << plan.parallelism.pp << ", cp "
          << plan.parallelism.cp << ", dp " << plan.parallelism.dp << ")"
          << (plan.trainer.device == plan::Device::cpu && plan.trainer.cpu_threads > 0
                  ? ", " + std::to_string(plan.trainer.cpu_threads) + " CPU thread(s) per rank"
                  : std::string())
          << "\n";
    out.flush();
  }
  return run_in_dir(plan, fs::absolute(run_dir).lexically_normal().string(), out, err, role);
}

}  // namespace recipe::cli
