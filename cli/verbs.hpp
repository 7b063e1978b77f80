// One function per verb; cli.cpp parses the command line and calls them.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/plan_setup.hpp"
#include "core/data/prepare.hpp"

namespace recipe::cli {

// pretrain / finetune (mode "pretrain" | "finetune"): resolve, then --dry-run report or run.
int run_train(const PlanFlags& flags, const std::string& mode, bool dry_run, std::ostream& out, std::ostream& err);
// The steps of `pretrain` that `sweep` repeats per point (cli/verb_train.cpp):
// exit 4 (with the reason on err) unless this build and host can run or launch the plan;
int check_runnable(const plan::Plan& plan, const kernels::GpuInfo& gpu, std::ostream& err);
// fills an allocated run dir (recipe, overrides, resolved.toml, git, host with the resolved device
// from `gpu`, launch.sh, status "created"); throws std::runtime_error;
void write_run_dir(const plan::Plan& plan, const std::string& spec, const std::vector<std::string>& command_line,
                   const std::string& run_dir, const kernels::GpuInfo& gpu);
// runs a filled run dir with the plan's executor (Slurm: submits its launch.sh). Exit code as pretrain's.
int run_prepared(const plan::Plan& plan, const std::string& run_dir, std::ostream& out, std::ostream& err);

// `recipe sweep` (cli/verb_sweep.cpp): the grid of `key=v1,v2` arguments as one experiment.
struct SweepCommand {
  PlanFlags flags;  // the recipe, the axes and plain overrides (positional), the pretrain flags
  int warmup = 5;   // steps left out of the envelope's means
  bool dry_run = false;
};
int run_sweep(const SweepCommand& args, std::ostream& out, std::ostream& err);
// `recipe runs envelope EXPERIMENT [-o chart.svg|png] [--warmup N]`.
int run_envelope(const std::string& experiment_root, int warmup, const std::string& output, std::ostream& out,
                 std::ostream& err);

// `runs resume`: runs a run dir's resolved.toml again with its executor (a Slurm run is
// resubmitted); training continues from the run's newest checkpoint.
int run_resume(const std::string& run_dir, std::ostream& out, std::ostream& err);
// The hidden worker: runs the plan in a run dir's resolved.toml.
int run_worker(const std::string& run_dir, std::ostream& out, std::ostream& err);
// The hidden job-state verb: a Slurm batch script records its job's start (`begin`) or end
// (`end_exit`: the job step's exit status) in the run dir's status.json.
int run_job_state(const std::string& run_dir, const std::string& job_id, bool begin, std::optional<int> end_exit,
                  bool requeued, std::ostream& out, std::ostream& err);

int run_list(std::ostream& out, std::ostream& err);
int run_show(const PlanFlags& flags, const std::string& format, std::ostream& out, std::ostream& err);
int run_validate(const PlanFlags& flags, std::ostream& out, std::ostream& err);
int run_version(std::ostream& out);
int run_data_prepare(const data::PrepareOptions& opts, std::ostream& out, std::ostream& err);

// `recipe ckpt info|verify|export|import|merge` (cli/verb_ckpt.cpp).
struct CkptArgs {
  std::string path;                    // info/export/merge: checkpoint, checkpoints dir or run dir; import: HF dir
  std::string output;                  // export: HF directory; import, merge: checkpoints directory
  std::string format = "hf";           // export: hf | hf-peft; import: hf
  bool merge = false;                  // export --format hf of a LoRA checkpoint: W + s·B·A
  std::string dtype = "f32";           // export: f32 | bf16
  std::string recipe;                  // import (optional) / export, merge (when plan.toml does not describe the model)
  std::vector<std::string> overrides;  // key=value, applied to --recipe
  CLI::App* cmd = nullptr;
  CLI::App *info = nullptr, *verify = nullptr, *export_cmd = nullptr, *import_cmd = nullptr, *merge_cmd = nullptr;
};

// Adds the `ckpt` verb and its subcommands to `app`, bound to `args`.
CLI::App* add_ckpt_verb(CLI::App& app, CkptArgs& args);

// Runs the parsed `ckpt` subcommand. Exit codes: 0 ok, 1 the recipe does not load or does not
// describe the model (config.json mismatch, no HF equivalent), 2 usage (no such path), 3 the
// conversion failed (broken or mismatched checkpoint / HF files, I/O).
int run_ckpt(const CkptArgs& args, std::ostream& out, std::ostream& err);

// What the user named (a checkpoint step-<N>/, a checkpoints directory or a run directory) → one
// complete checkpoint directory; "" after printing why not, with `code` set to the exit code.
// Throws ckpt::CheckpointError for a broken one.
std::string resolve_checkpoint(const std::string& path, std::ostream& err, int& code);

// `recipe generate` (cli/verb_generate.cpp).
struct GenerateArgs {
  std::string path;                    // checkpoint, checkpoints dir or run dir
  std::vector<std::string> overrides;  // key=value on the checkpoint's plan (e.g. data.tokenizer=byte)
  std::string prompt, messages_file;
  bool prompt_given = false;
  int max_new_tokens = -1;  // -1: 128, or fewer when the model's positions end sooner
  double temperature = 0.0, top_p = 1.0;
  int top_k = 0;
  uint64_t seed = 0;
  std::string device = "auto";
  std::string tokenizer, tokenizer_model, vocab_file, merges_file, eod_token, chat_template;
  CLI::App* cmd = nullptr;
  CLI::Option* prompt_opt = nullptr;
};
CLI::App* add_generate_verb(CLI::App& app, GenerateArgs& args);
// Exit codes: 0 ok, 1 the checkpoint's plan (with the overrides) does not describe a model and
// tokenizer, 2 usage (no checkpoint there, bad flags, prompt too long), 3 loading or generating
// failed, 4 --device cuda without a usable GPU.
int run_generate(const GenerateArgs& args, std::ostream& out, std::ostream& err);

// `recipe eval` (cli/verb_eval.cpp).
struct EvalArgs {
  std::string path;                    // checkpoint, checkpoints dir or run dir
  std::vector<std::string> overrides;  // key=value on the checkpoint's plan (e.g. trainer.eval_samples=256)
  std::string device = "auto";
  CLI::App* cmd = nullptr;
};
CLI::App* add_eval_verb(CLI::App& app, EvalArgs& args);
// Prints "val_loss <x>" on stdout (what it read on stderr). Exit codes: 0 ok, 1 the checkpoint's
// plan (with the overrides) does not resolve or has no validation split, 2 usage (no checkpoint
// there, bad arguments), 3 loading or evaluating failed, 4 --device cuda without a usable GPU.
int run_eval(const EvalArgs& args, std::ostream& out, std::ostream& err);

// "0.1.0" (the CMake project version).
std::string version_string();

}  // namespace recipe::cli
