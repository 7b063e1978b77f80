// LoRA's recipe-level vocabulary, shared by the resolver (validation, counting), the memory
// estimate and the core (which linears get adapters, and their scale).
//
// peft.target_modules names linears as the engine fuses them (q|k|v is one linear, and so is
// gate|up); it takes the engine's names, the model family's Hugging Face module names
// (core::Family::lora_names / lora_groups, family/gpt.cpp and family/llama.cpp) and "all-linear":
//   qkv  = c_attn (gpt)              = q_proj + k_proj + v_proj (llama: all three together)
//   proj = o_proj (llama)            (c_proj: see below)
//   fc1  = c_fc (gpt)                = gate_proj + up_proj (llama: both together)
//   fc2  = down_proj (llama)         (c_proj: see below)
//   c_proj (gpt) = proj and fc2, as in HF PEFT, where the name matches both modules
//   all-linear = qkv, proj, fc1, fc2
// A fused linear gets one adapter (one A, one B whose rows cover all its outputs), as NeMo adapts
// linear_qkv and linear_fc1. HF PEFT puts one adapter on each of q_proj, k_proj, v_proj; the
// engine's adapter on their fused linear is one of rank r (shared A) instead, so only the complete
// groups are accepted: q_proj alone, or q_proj with v_proj, is rejected with this explanation.
#pragma once

#include <string>
#include <vector>

#include "family/family.hpp"
#include "plan/plan.hpp"

namespace recipe::plan {

struct LoraTargets {
  unsigned mask = 0;                  // core::LoraTarget bits
  std::vector<std::string> problems;  // one message per unusable entry
};

// The linears `modules` adapts in a model of `family`, and what is wrong with the entries that
// name none.
LoraTargets lora_targets(const core::Family& family, const std::vector<std::string>& modules);

// The engine's name of the linear with LoraTarget bit `bit` ("qkv", "proj", "fc1", "fc2"); "" for none.
const char* lora_target_name(unsigned bit);

// Every spelling peft.target_modules accepts for a model of `family`.
std::vector<std::string> lora_target_names(const core::Family& family);

// The adapter scale: alpha / rank, or alpha / sqrt(rank) with peft.use_rslora.
double lora_scale(const PeftConfig& peft);

}  // namespace recipe::plan
