// `recipe eval <checkpoint | run dir> [key=value ...]`: the validation loss of a checkpoint on its
// plan's validation split, as training reports it (core::Trainer::evaluate: the mean loss over the
// first trainer.eval_samples sequences). It runs as one process on the chosen device, whatever
// layout the checkpoint was saved with (loading reshards); the samples do not depend on the layout,
// so the result equals the run's logged val_loss to rounding. Overrides change the plan before it
// is resolved: another dataset (data.path=..., data.split=...; all of it may be held out, since the
// train split is not read) or trainer.eval_samples=N.
#include <algorithm>
#include <cstdio>

#include "cli/checkpoint_verb.hpp"
#include "cli/verbs.hpp"
#include "core/data/sample_source.hpp"
#include "core/parallel/parallel_bootstrap.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "plan/exit_codes.hpp"

namespace recipe::cli {

namespace {

// The checkpoint's plan.toml as one local process that validates (TP, PP and DP of 1; validation
// on), with the user's overrides last; nullopt after printing why. Violations of keys evaluation
// does not read (the executor's cluster, checkpoint.load of the run) are left out.
std::optional<plan::Plan> eval_plan(const std::string& dir, const EvalArgs& a, std::ostream& err) {
  // One local process; validation on (an override that turns it off is refused below).
  std::vector<std::string> overrides = {"parallelism.tp=1",
                                        "parallelism.pp=1",
                                        "parallelism.dp=1",
                                        "parallelism.zero1=false",
                                        "parallelism.layers_per_stage=[]",
                                        "executor.kind=local",
                                        "executor.nodes=1",
                                        "executor.cpu_ranks=1",
                                        "executor.gpus_per_node=1",
                                        "trainer.eval_interval=1"};
  if (a.device != "auto") overrides.push_back("trainer.device=" + a.device);
  overrides.insert(overrides.end(), a.overrides.begin(), a.overrides.end());
  auto plan = checkpoint_plan(
      dir, overrides,
      [](const std::string& key) { return key.rfind("executor.", 0) != 0 && key.rfind("checkpoint.", 0) != 0; },
      "the model and its data are unknown (a checkpoint written by `recipe pretrain`/`finetune` has it)", err,
      /*evaluation=*/true);
  if (plan && plan->trainer.eval_interval <= 0) {
    // The resolver's own advice for a plan without validation data may be to turn validation off,
    // which is not a way out here: say what is.
    err << "error: trainer.eval_interval=" << plan->trainer.eval_interval
        << ": evaluation needs validation on\n  fix: leave trainer.eval_interval out of the overrides; if the "
           "validation split holds no sample, give it a share of the data (e.g. data.split=\"90,10,0\") or name "
           "other data (data.path=...)\n";
    return std::nullopt;
  }
  return plan;
}

}  // namespace

CLI::App* add_eval_verb(CLI::App& app, EvalArgs& a) {
  a.cmd = app.add_subcommand("eval", "Validation loss of a checkpoint on its plan's validation split");
  a.cmd->add_option("checkpoint", a.path, "A checkpoint step-<N>/, a checkpoints directory or a run directory")
      ->required();
  a.cmd->add_option("overrides", a.overrides,
                    "key=value on the checkpoint's plan, e.g. trainer.eval_samples=256 or data.path=data/other");
  a.cmd->add_option("--device", a.device, "auto (a GPU when one is usable), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  a.cmd->footer(kExitCodeHelp);
  return a.cmd;
}

int run_eval(const EvalArgs& a, std::ostream& out, std::ostream& err) {
  int code = kExitOk;
  const std::string dir = checkpoint_for_verb(a.path, a.overrides, err, code);
  if (dir.empty()) return code;
  const auto plan = eval_plan(dir, a, err);
  if (!plan) return kExitInvalidRecipe;
  const std::optional<bool> gpu = usable_gpu(a.device, err);
  if (!gpu) return kExitEnvironment;
  const kernels::Device device =
      plan->trainer.device == plan::Device::cpu || !*gpu ? kernels::Device::cpu : kernels::Device::cuda;
  kernels::BackendOptions bo;
  bo.deterministic = plan->trainer.deterministic;
  bo.cpu_threads = plan->trainer.cpu_threads;
  bo.workspace_bytes = size_t(plan->kernels.workspace_bytes);
  bo.attention_fallback = plan->kernels.attention == plan::Attention::fallback;
  double loss = 0;
  int64_t step = 0, sequences = 0;
  try {
    std::unique_ptr<kernels::Backend> backend = kernels::make_backend(device, bo);
    std::unique_ptr<core::ParallelState> parallel = core::bootstrap_parallel(core::parallel_sizes(*plan), *backend);
    // Evaluation never steps, so the trainer's training stream is a second reader of the validation
    // split: a plan that holds out all of another dataset (data.split="0,100,0") has no train split.
    std::unique_ptr<data::SampleSource> valid = data::make_valid_source(*plan);
    if (!valid) {
      err << "error: the plan's data has no validation split (data.split=\"" << plan->data.split << "\")\n"
          << "  fix: give validation a share, e.g. data.split=\"90,10,0\", or name other data with data.path=...\n";
      return kExitInvalidRecipe;
    }
    core::Trainer trainer(*plan, *backend, parallel.get(), data::make_valid_source(*plan), std::move(valid));
    for (const std::string& line : backend->take_notices()) err << line << "\n";
    step = core::load_checkpoint(trainer, dir, core::LoadMode::weights_only).step;
    loss = trainer.evaluate();
    sequences = trainer.validation_sequences();
  } catch (const std::invalid_argument& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", loss);
  out << "val_loss " << text << "\n";
  err << "eval: checkpoint " << dir << " (step " << step << "), " << plan->trainer.eval_samples
      << " samples of the validation split";
  if (sequences > 0 && plan->trainer.eval_samples > sequences)
    err << " (it holds " << sequences << " sequences: some are read more than once; trainer.eval_samples=N sets "
        << "how many)";
  err << ", on " << (device == kernels::Device::cuda ? "cuda" : "cpu") << "\n";
  return kExitOk;
}

}  // namespace recipe::cli
