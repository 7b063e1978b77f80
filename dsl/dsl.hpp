// Public face of dsl/: recipes (Lua, TOML, presets) → one config tree → overrides → resolved plan::Plan.
//
// The config tree is a nlohmann::ordered_json object whose top-level keys are the plan::Plan sections
// (model, data, optimizer, ...) plus the optional top-level keys `preset` (TOML only) and `mode`.
// Beside it, `origins` maps a dotted key path ("parallelism.tp") to where its value was set, so
// resolver errors can cite file:line or the override that set it.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"

namespace recipe::dsl {

struct Origin {
  std::string file;         // recipe file, "preset:gpt3_345m", "override", "default"
  int line = 0;             // 0 = unknown
  std::string expr = {};    // file == "override": the override as typed, e.g. "parallelism.tp=2"
  std::string str() const;  // "file:line", "file", or "override `k=v`"
};

struct ConfigTree {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  std::map<std::string, Origin> origins;  // dotted path → origin of its current value
  std::string source;                     // preset name or file path the tree came from
  // A resolved plan read back (a resolved.toml, with its [derived] table): every key is written
  // out, so "you set X, which has no effect" warnings would only be noise.
  bool resolved_plan = false;
};

// A recipe that cannot be loaded: syntax error, runtime error in Lua, sandbox violation, unknown
// preset, bad override. `what()` is one human line starting with "file:line: " when known.
struct RecipeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where presets and `require`d Lua modules are looked up, first match wins: $RECIPE_PATH entries
// (colon-separated), then the recipe file's own folder, then the built-in presets ($RECIPE_HOME/recipes,
// else <exe dir>/../share/recipe/recipes, else the source tree's recipes/). Existing folders only.
std::vector<std::string> recipe_search_path(const std::string& recipe_file = "");

// Names of the presets found on the search path (recipes/*.lua), sorted.
std::vector<std::string> list_presets();

// `spec` is a preset name, a .lua file, a .toml file, or a directory `recipe ckpt import` wrote
// (its model.lua). Throws RecipeError.
ConfigTree load_recipe(const std::string& spec);

// Dotted overrides: "a.b=v", "a.b+=v", "-=", "*=", "/="; values parsed as int, float, bool, list
// ("[1,2]" or "a,b" for list-typed keys), else string. Throws RecipeError naming the override.
void apply_override(ConfigTree& tree, const std::string& override_expr);
void apply_overrides(ConfigTree& tree, const std::vector<std::string>& overrides);

// Facts about where the plan will run that the recipe does not decide.
struct ExecutorFacts {
  int nodes = 0;           // 0 = take executor.nodes from the recipe
  int gpus_per_node = -1;  // -1 = take from the recipe / detect; 0 = CPU
  bool has_gpu = false;    // a CUDA device is visible here
  int visible_gpus = 0;
  std::string gpu_name;        // e.g. "NVIDIA H100 80GB HBM3"
  double gpu_memory_gib = 0;   // of the visible GPU, 0 = unknown
  bool planning = false;       // validate / show / --dry-run: the plan may target other machines,
                               // so a GPU plan is not refused for lack of a GPU here
  double host_memory_gib = 0;  // memory available on the launching host (MemAvailable), where the local
                               // executor's CPU ranks run; 0 = unknown, not checked
  // Compute capability of the visible GPU, major·10 + minor (90 = sm_90); 0 = unknown.
  int gpu_compute_capability = 0;
  // `recipe eval`: only the validation split is read, so the checks that the train split can feed
  // training (a share in data.split, one sample of tokens) do not apply.
  bool evaluation = false;
};

struct Violation {
  std::string path;     // "parallelism.tp"
  std::string message;  // "parallelism.tp=3 does not divide model.num_attention_heads=16"
  std::string fix;      // "try tp=2 or tp=4"
  Origin origin;        // where the offending value was set
};

struct ResolveResult {
  plan::Plan plan;  // filled as far as possible even when invalid
  std::vector<Violation> violations;
  std::vector<std::string> warnings;
  bool ok() const { return violations.empty(); }
};

ResolveResult resolve(const ConfigTree& tree, const ExecutorFacts& facts);

// Human report of all violations, one block each: path, message, origin, fix.
std::string format_violations(const std::vector<Violation>& violations);

// Serialization of a resolved plan. TOML is the run-dir format (`resolved.toml`), and loading it
// back with load_recipe + resolve yields the identical Plan (derived values are recomputed and
// written as comments/`[derived]` tables that the loader ignores).
std::string to_toml(const plan::Plan& plan);
std::string to_json(const plan::Plan& plan);
std::string to_lua(const plan::Plan& plan);
nlohmann::ordered_json plan_to_tree(const plan::Plan& plan);  // recipe keys only (no derived values)

// Reads a run dir's resolved.toml back into a plan::Plan; throws RecipeError if it no longer resolves.
plan::Plan load_resolved_plan(const std::string& resolved_toml_path, const ExecutorFacts& facts);

}  // namespace recipe::dsl
