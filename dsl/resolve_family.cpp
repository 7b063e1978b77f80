// model.arch → the architecture flags. The family model.arch names (family/registry.hpp) gives each
// flag a default and may compute only that value: a flag the recipe leaves unset takes the
// default, one it sets to a value the family does not compute is a violation naming the key, both
// values and the fix. Runs right after read_tree, so every derivation after it (the FFN size from
// the activation, the parameter count) sees the family's flags.
#include <string>

#include "dsl/resolve_internal.hpp"
#include "family/registry.hpp"
#include "plan/model_family.hpp"

namespace recipe::dsl::detail {

namespace {

// A flag's recipe key, how the plan holds it, and its value as a recipe writes it.
struct FlagKey {
  core::ArchFlag flag;
  const char* path;
  bool (*get)(const plan::ModelConfig&);
  void (*set)(plan::ModelConfig&, bool);
  std::string (*word)(bool);
};

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }
std::string boolean(bool v) { return v ? "true" : "false"; }

const FlagKey kFlagKeys[] = {
    {core::flag_norm, "model.norm", [](const plan::ModelConfig& m) { return m.norm == plan::Norm::layernorm; },
     [](plan::ModelConfig& m, bool v) { m.norm = v ? plan::Norm::layernorm : plan::Norm::rmsnorm; },
     [](bool v) { return quoted(plan::to_string(v ? plan::Norm::layernorm : plan::Norm::rmsnorm)); }},
    {core::flag_activation, "model.activation",
     [](const plan::ModelConfig& m) { return m.activation == plan::Activation::gelu; },
     [](plan::ModelConfig& m, bool v) { m.activation = v ? plan::Activation::gelu : plan::Activation::swiglu; },
     [](bool v) { return quoted(plan::to_string(v ? plan::Activation::gelu : plan::Activation::swiglu)); }},
    {core::flag_positions, "model.position_embedding",
     [](const plan::ModelConfig& m) { return m.position_embedding == plan::PositionEmbedding::learned; },
     [](plan::ModelConfig& m, bool v) {
       m.position_embedding = v ? plan::PositionEmbedding::learned : plan::PositionEmbedding::rope;
     },
     [](bool v) {
       return quoted(plan::to_string(v ? plan::PositionEmbedding::learned : plan::PositionEmbedding::rope));
     }},
    {core::flag_bias, "model.bias", [](const plan::ModelConfig& m) { return m.bias; },
     [](plan::ModelConfig& m, bool v) { m.bias = v; }, boolean},
    {core::flag_tied, "model.tie_embeddings", [](const plan::ModelConfig& m) { return m.tie_embeddings; },
     [](plan::ModelConfig& m, bool v) { m.tie_embeddings = v; }, boolean},
    {core::flag_qk_norm, "model.qk_norm", [](const plan::ModelConfig& m) { return m.qk_norm; },
     [](plan::ModelConfig& m, bool v) { m.qk_norm = v; }, boolean},
};

}  // namespace

void derive_family(ResolveContext& ctx) {
  plan::ModelConfig& m = ctx.plan().model;
  const core::Family& family = plan::model_family(m);
  for (const FlagKey& k : kFlagKeys) {
    const bool fallback = core::flag_value(family.defaults, k.flag);
    if (!ctx.was_set(k.path)) {
      k.set(m, fallback);
      continue;
    }
    if (ctx.bad_paths.count(k.path) || !(family.fixed & k.flag) || k.get(m) == fallback) continue;
    std::string others;
    for (const core::Family* f : core::families())
      if (!(f->fixed & k.flag) || core::flag_value(f->defaults, k.flag) == k.get(m))
        others += (others.empty() ? "" : " or ") + quoted(f->arch);
    ctx.violation(k.path,
                  std::string(k.path) + "=" + k.word(k.get(m)) + ": model.arch=" + quoted(family.arch) + " computes " +
                      k.path + "=" + k.word(fallback) + " only (" + family.summary + ")",
                  std::string("drop ") + k.path + " (model.arch=" + quoted(family.arch) + " sets " + k.word(fallback) +
                      ")" + (others.empty() ? "" : ", or use model.arch=" + others));
  }
}

}  // namespace recipe::dsl::detail
