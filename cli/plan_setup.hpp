// The steps every plan-taking verb shares: flags → overrides, load + override + resolve with the
// right executor facts, and turning dsl errors into exit codes and messages.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "dsl/dsl.hpp"
#include "kernels/ops.hpp"

namespace recipe::cli {

// Positional recipe spec, positional overrides and the convenience flags that map onto recipe keys.
struct PlanFlags {
  std::string spec;
  std::vector<std::string> overrides;  // positional key=value (also +=, -=, *=, /=)
  int max_steps = 0, tp = 0, pp = 0, micro_batch = 0, global_batch = 0, seq_len = 0;
  int nodes = 0, gpus_per_node = 0;
  std::string device, executor, name, experiments_dir, gpu_model, device_memory;

  struct FlagKey {
    CLI::Option* option;
    std::string key;  // recipe key it sets
  };
  std::vector<FlagKey> mapped;  // filled by add_plan_flags, in override order
  CLI::Option* nodes_opt = nullptr;
  CLI::Option* gpus_opt = nullptr;
};

void add_plan_flags(CLI::App& cmd, PlanFlags& flags);

// Positional overrides must look like key=value; returns the offending argument, if any.
std::optional<std::string> bad_override(const PlanFlags& flags);

// Overrides for the recipe keys of the flags given, e.g. "trainer.max_steps=5".
std::vector<std::string> flag_overrides(const PlanFlags& flags);

// The overrides and flags as given, one entry each (overrides.txt).
std::vector<std::string> command_line_record(const PlanFlags& flags);

// Executor facts. `planning` (validate, show, --dry-run): --gpus-per-node G > 0 stands for G GPUs
// per node on the target machines even when this host has none.
// make_facts also records this host's available memory (the local executor's CPU ranks run here);
// detected_facts does not, since a worker resolves while its peers are already allocating.
dsl::ExecutorFacts make_facts(const PlanFlags& flags, const kernels::GpuInfo& gpu, bool planning);
dsl::ExecutorFacts detected_facts(const kernels::GpuInfo& gpu);
double host_available_gib();  // /proc/meminfo MemAvailable (else MemTotal), in GiB; 0 when unreadable

struct LoadedPlan {
  dsl::ConfigTree tree;
  dsl::ResolveResult resolved;
  std::string requested_device;  // trainer.device as the recipe + overrides ask ("auto" if unset)
};

// load_recipe → positional overrides → flag overrides (→ mode) → resolve. Returns nullopt after
// printing the error to `err` when the recipe does not load, or when `mode` (the verb's: pretrain,
// finetune; empty for verbs without one) contradicts a mode the user set (exit 1). Violations are
// left in `resolved` for the caller to report.
std::optional<LoadedPlan> load_plan(const PlanFlags& flags, const std::string& mode, const dsl::ExecutorFacts& facts,
                                    std::ostream& err);

// The requested device of a config tree (trainer.device, "auto" if unset).
std::string requested_device(const dsl::ConfigTree& tree);

// Prints violations (and warnings) to err; returns true when the plan is valid.
bool report_resolution(const dsl::ResolveResult& r, std::ostream& err);

// The recipe source file to copy into a run dir: the spec itself when it is a file, else the
// preset's .lua on the recipe search path ("" if not found).
std::string recipe_source_file(const std::string& spec);

// Close preset names for an unknown spec (edit distance), best first.
std::vector<std::string> similar_presets(const std::string& spec);

// The `recipe` binary workers are started with: this executable when it is `recipe`, else
// $RECIPE_EXECUTABLE, else "recipe" from PATH.
std::string recipe_executable();

// experiment.name, or the spec's preset/file stem when the recipe leaves it empty.
std::string experiment_name(const plan::Plan& plan, const std::string& spec);

}  // namespace recipe::cli
