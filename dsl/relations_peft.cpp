// Rules of fine-tuning: LoRA targets and rank, mode, the weights to start from (part of
// check_relations).
#include <algorithm>
#include <limits>

#include "dsl/suggest.hpp"
#include "family/arch_shape.hpp"
#include "plan/lora.hpp"
#include "plan/model_family.hpp"
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_peft(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  // PEFT.
  const plan::PeftConfig& pe = p.peft;
  if (pe.kind == plan::PeftKind::lora) {
    const core::Family& family = plan::model_family(m);
    const std::vector<std::string> names = plan::lora_target_names(family);
    if (pe.target_modules.empty())
      ctx.violation("peft.target_modules", "peft.target_modules is empty; LoRA needs at least one linear to adapt",
                    "e.g. target_modules = {\"qkv\", \"proj\"} (any of " + join_or(names) + ")");
    for (const auto& target : pe.target_modules)
      if (std::find(names.begin(), names.end(), target) == names.end())
        ctx.violation("peft.target_modules",
                      "peft.target_modules has \"" + target + "\", which is not a linear of the model" +
                          did_you_mean(target, names),
                      "use any of " + join_or(names));
    for (const std::string& problem : plan::lora_targets(family, pe.target_modules).problems)
      if (problem.find("fused") != std::string::npos)
        ctx.violation("peft.target_modules", "peft.target_modules: " + problem,
                      "adapt the whole fused linear, or leave its parts out");
    // A rank above min(in, out) of an adapted linear adds parameters but no expressiveness: B·A
    // cannot exceed the rank of the smaller side (PEFT allows it silently; it is a typo here).
    const unsigned mask = plan::lora_targets(family, pe.target_modules).mask;
    const int attn_side = m.hidden_size;  // qkv: hidden → (heads+2·kv)·head_dim; proj: hidden → hidden
    const int mlp_side = std::min(m.hidden_size, m.ffn_hidden_size);  // fc1: hidden → ffn; fc2: ffn → hidden
    int bound = std::numeric_limits<int>::max();
    std::string limiting;
    if ((mask & (core::lora_qkv | core::lora_proj)) && attn_side < bound) {
      bound = attn_side;
      limiting = "model.hidden_size=" + str(m.hidden_size) + " (attention linears)";
    }
    if ((mask & (core::lora_mlp_in | core::lora_mlp_out)) && mlp_side < bound) {
      bound = mlp_side;
      limiting = "min(model.hidden_size, model.ffn_hidden_size) = " + str(mlp_side) + " (MLP linears)";
    }
    if (pe.rank >= 1 && bound != std::numeric_limits<int>::max() && pe.rank > bound)
      ctx.violation("peft.rank",
                    "peft.rank=" + str(pe.rank) + " exceeds the smaller side of an adapted linear: " + limiting,
                    "use peft.rank ≤ " + str(bound) + " (typical ranks are 8 to 64)");
    if (p.mode != plan::Mode::finetune)
      ctx.violation("mode", "peft.kind=lora needs mode=finetune, got mode=" + std::string(plan::to_string(p.mode)),
                    "use `recipe finetune`, or set mode=\"finetune\"");
  }
  if (p.mode == plan::Mode::finetune && p.checkpoint.load.empty() && !p.checkpoint.allow_random_init)
    ctx.violation("checkpoint.load", "mode=finetune needs checkpoint.load, the weights to fine-tune",
                  "set checkpoint.load to a checkpoint or run dir (`recipe ckpt import` makes one from a Hugging Face "
                  "model), or checkpoint.allow_random_init=true to fine-tune random weights on purpose",
                  "mode");
}

}  // namespace recipe::dsl::detail
