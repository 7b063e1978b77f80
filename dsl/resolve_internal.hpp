// Shared state of one resolve() call, split over resolve_fields.cpp (tree → plan::Plan), resolve_derive.cpp
// (derived values) and resolve_checks.cpp (validation). Internal to dsl/.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dsl/dsl.hpp"
#include "dsl/shown_text.hpp"

namespace recipe::dsl::detail {

struct ResolveContext {
  ResolveContext(const ConfigTree& t, const ExecutorFacts& f, ResolveResult& r) : tree(t), facts(f), out(r) {}
  const ConfigTree& tree;
  const ExecutorFacts& facts;
  ResolveResult& out;

  std::set<std::string> set_paths;             // keys the tree set with a value of the right type
  std::set<std::string> bad_paths;             // keys whose value was rejected (checks on them are skipped)
  std::map<std::string, Origin> fact_origins;  // values taken from ExecutorFacts
  bool shape_ok = true;                        // sizes are positive, so derived values and estimates are meaningful
  bool auto_device = false;                    // trainer.device was "auto" and the resolver chose
  bool world_ok = true;                        // tp·pp·cp·dp = world
  bool dp_auto = false;                        // parallelism.dp was 0 and the resolver derived it
  bool eval_auto = false;                      // trainer.eval_interval was not set: on where there is validation data
  int world = 1;                               // ranks the executor will start
  int unknown_keys = 0;                        // keys of the tree that are no recipe key

  plan::Plan& plan() { return out.plan; }
  const plan::Plan& plan() const { return out.plan; }
  bool was_set(const std::string& path) const { return set_paths.count(path) > 0; }

  // Where the value at `path` came from: executor facts, the tree's origins (the path itself or
  // its closest parent), else "default".
  Origin origin(const std::string& path) const;
  // `origin_path` names the key whose origin to cite when `path` is not a recipe key itself
  // ("parallelism.world_size" cites executor.gpus_per_node).
  void violation(const std::string& path, std::string message, std::string fix = "",
                 const std::string& origin_path = "");
  void warn(const std::string& message) { out.warnings.push_back(bounded_message(message)); }
};

void read_tree(ResolveContext& ctx);                // types, unknown and derived keys, enum choices
void derive_family(ResolveContext& ctx);            // model.arch's family: flag defaults, contradictions
void check_ranges(ResolveContext& ctx);             // each value on its own (positive sizes, lr > 0, ...)
void check_names(ResolveContext& ctx);              // what executors write into scripts and folder names
void check_executable(ResolveContext& ctx);         // values this version cannot run (cp > 1, LoRA, ...)
void check_fp8(ResolveContext& ctx);                // trainer.precision = fp8: the fp8 section, GPU, shapes
void derive_execution(ResolveContext& ctx);         // device, world size, dp, gpus_per_node
void derive_model(ResolveContext& ctx);             // head_dim, ffn, padded vocab, params, FLOPs, batches
void check_relations(ResolveContext& ctx);          // rules across keys (tp | heads, world = tp·pp·cp·dp, ...)
void derive_and_check_memory(ResolveContext& ctx);  // device memory, per-rank estimate, fit
void check_files(ResolveContext& ctx);              // data, tokenizer and checkpoint files; paths made absolute
// checkpoint.load's tensors (the checkpoint directory `ckpt` it names) against the plan's model
// (dsl/resolve_checkpoint_shapes.cpp); called by check_files.
void check_checkpoint_shapes(ResolveContext& ctx, const std::filesystem::path& ckpt, const std::string& load);
void check_host_memory(ResolveContext& ctx);        // local CPU ranks × per-rank estimate fit this host
void check_gpu_capability(ResolveContext& ctx);     // the target GPU can run the bf16 CUDA kernels

// Helpers shared by the check files.
std::string fmt_double(double v);  // shortest text that reads back as v: 0.0003, 1e-08
int gcd_int(int a, int b);

}  // namespace recipe::dsl::detail
