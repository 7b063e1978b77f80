// A LoRA checkpoint's adapters as a Hugging Face PEFT adapter directory: adapter_config.json +
// adapter_model.safetensors, which `PeftModel.from_pretrained(base, dir)` loads onto the model that
// `recipe ckpt export --format hf` writes of the base (hf_convert.hpp).
//
// PEFT puts one adapter on each HF module; its keys are
//   base_model.model.<HF module>.lora_A.weight   [r, in]
//   base_model.model.<HF module>.lora_B.weight   [out, r]
// and it computes y = base(x) + scaling·lora_B(lora_A(x)), scaling = lora_alpha / r (use_rslora:
// lora_alpha / √r): the engine's y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with the same A, B and s, so r,
// lora_alpha and use_rslora are the plan's peft.rank, peft.alpha and peft.use_rslora.
//
// The engine fuses q|k|v (and Llama's gate|up) into one linear with ONE adapter: one A, and a B
// whose rows cover all the fused outputs. Where HF has one module per part (Llama's q_proj,
// k_proj, v_proj; gate_proj, up_proj) each gets a copy of A and its own row block of B (the same
// rows the hf export gives each module's weight: q.lora_b, k.lora_b, v.lora_b); together they
// compute exactly the fused adapter. Where HF fuses too (GPT-2's c_attn), the module gets A and
// the whole B. GPT-2's Conv1D modules store their weight [in, out]; PEFT keeps lora_A/lora_B in
// nn.Linear orientation for them as well and needs fan_in_fan_out = true (for merging), so the
// adapters are never transposed. The engine's RoPE already uses HF's rotate-half pairing, so q and
// k rows need no permutation (hf_convert.hpp), for weights and B alike.
//
// target_modules lists each adapted module by its last name component ("q_proj", "c_attn"), or
// its last two where the last is ambiguous in the model (GPT-2's "attn.c_proj", "mlp.c_proj");
// PEFT matches a module whose full name ends in ".<entry>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "core/model/model_shape.hpp"
#include "plan/plan.hpp"

namespace recipe::core::hf {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";

// One tensor of the PEFT adapter and the engine tensors it is made of (concatenated along dim 0).
struct PeftTensorSpec {
  std::string key;  // "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
  std::vector<int64_t> shape;
  std::vector<std::string> parts;  // ours: the role's lora_a, or the B row blocks of this module
};

// Every tensor of the PEFT adapter of a model of shape `s` (lora_A before lora_B, modules in HF
// order); throws std::invalid_argument when `s` has no adapters or no HF architecture.
std::vector<PeftTensorSpec> peft_tensor_specs(const ModelShape& s);

// The target_modules entries of the adapted modules (see above), sorted.
std::vector<std::string> peft_target_modules(const ModelShape& s);

// adapter_config.json. `base_model` goes to base_model_name_or_path (may be empty: null).
nlohmann::ordered_json make_peft_config(const ModelShape& s, const plan::PeftConfig& peft,
                                        const std::string& base_model);

struct PeftExportOptions {
  std::string out_dir;                   // created if missing; may hold only files this export writes
  ckpt::DType dtype = ckpt::DType::f32;  // f32 is exact; bf16 rounds to nearest even
  std::string base_model;                // base_model_name_or_path (e.g. the base's hf export)
};

struct PeftExportResult {
  std::string out_dir;
  int tensors = 0;
  uint64_t bytes = 0;  // adapter_model.safetensors
  std::vector<std::string> target_modules;
  std::vector<std::string> files;  // written, absolute paths
};

// Reads the adapters of `checkpoint_dir` (a LoRA checkpoint of a model of shape `s` trained with
// `peft`; adapter-only or full) and writes the PEFT directory. Throws std::invalid_argument when
// the model has no adapters or no HF equivalent, std::runtime_error / ckpt::CheckpointError
// naming the file when the checkpoint lacks an adapter tensor or cannot be read.
PeftExportResult export_peft(const std::string& checkpoint_dir, const ModelShape& s, const plan::PeftConfig& peft,
                             const PeftExportOptions& options);

}  // namespace recipe::core::hf
