// A model family as data: everything the engine needs to know about one architecture, in one
// descriptor that model.arch selects (family/registry.hpp lists them, one line each):
//
//   - its architecture flags: the value each takes when a recipe leaves it unset, and which of them
//     the family computes only at that value (the resolver refuses a recipe that sets another);
//   - its tensor table (family/tensor_table.hpp), with one HF-name column per HF architecture;
//   - each HF architecture it reads and writes: config.json's model_type and class, the flags that
//     architecture can express, and the config.json keys ↔ ArchShape fields (both directions:
//     hf/hf_convert.cpp writes config.json from them and checks an imported one against them);
//   - its LoRA target names: the HF module names peft.target_modules accepts besides the engine's
//     own (qkv, proj, fc1, fc2, all-linear; plan/lora.hpp), and the linears they adapt.
//
// A new dense family is a new file beside gpt.cpp and llama.cpp holding these, and a registry line;
// docs/architecture.md ("Adding a model family") lists what else it touches.
#pragma once

#include <span>
#include <vector>

#include "family/arch_shape.hpp"
#include "family/tensor_table.hpp"

namespace recipe::core {

// The architecture flags of ArchShape, as bits.
enum ArchFlag : unsigned {
  flag_norm = 1u << 0,        // layernorm (else RMSNorm): model.norm
  flag_activation = 1u << 1,  // gelu (else SwiGLU): model.activation
  flag_positions = 1u << 2,   // learned positions (else RoPE): model.position_embedding
  flag_bias = 1u << 3,        // model.bias
  flag_tied = 1u << 4,        // model.tie_embeddings
  flag_qk_norm = 1u << 5,     // model.qk_norm
};
inline constexpr ArchFlag kArchFlags[] = {flag_norm, flag_activation, flag_positions,
                                          flag_bias, flag_tied,       flag_qk_norm};

// One value per flag, as ArchShape holds them.
struct ArchFlags {
  bool layernorm = true, gelu = true, learned_positions = true, bias = true, tied = true, qk_norm = false;
};
bool flag_value(const ArchFlags& f, ArchFlag flag);
ArchFlags flags_of(const ArchShape& s);

// What a config.json key holds: an ArchShape field, or (none) a constant.
enum class HfField {
  none,
  vocab,
  hidden,
  layers,
  heads,
  kv_heads,
  head_dim,
  ffn,
  max_positions,
  norm_eps,
  rope_theta,
  init_std,
  bias,
  tied,
  // config.json's RoPE scaling (rope_parameters / rope_scaling): its rope_type ("default" or
  // "llama3") and llama3's parameters; export writes the parameters only for llama3. Import reads
  // them as a whole (HfArchitecture::rope_scaling), not key by key.
  rope_type,
  rope_factor,
  rope_low_freq_factor,
  rope_high_freq_factor,
  rope_original_max_positions,
  // Mistral's sliding_window: export writes null (full attention); import accepts null or a window
  // that covers every position (see hf/hf_config.cpp), else refuses it.
  sliding_window
};

enum HfIo : unsigned {
  hf_write = 1u << 0,  // export writes it
  hf_check = 1u << 1,  // import compares config.json's value with the recipe's
};

// One config.json key of an HF architecture.
struct HfConfigKey {
  const char* key;  // "n_embd"; "a.b" is key b of the object a
  HfField field = HfField::none;
  unsigned io = hf_write | hf_check;
  // A field's default when config.json lacks the key (transformers' config class): fallback ×
  // (key `times`) / (key `over`), those read with their own defaults. no_default: an absent key is
  // not checked.
  double fallback = 0;
  const char* times = nullptr;
  const char* over = nullptr;
  bool no_default = false;
  // A constant (field none): the JSON text written, the JSON texts import accepts (an absent or
  // null key reads as `value`), and why another value is refused.
  const char* value = nullptr;
  std::vector<const char*> accepted{};
  const char* why = nullptr;
  // Read from config.json's "rope_parameters" object where it has the key (transformers 5), else
  // from the top level (transformers 4).
  bool in_rope_parameters = false;
  // A constant that config.json gives as a list (one entry per layer): every entry must be one of
  // `accepted`.
  bool each = false;
  // Written only when the model has RoPE scaling (llama3's parameters).
  bool scaled_only = false;
};

// An HF architecture a family reads and writes.
struct HfArchitecture {
  const char* model_type;   // config.json "model_type": "gpt2"
  const char* class_name;   // config.json "architectures": "GPT2LMHeadModel"
  const char* base_prefix;  // "transformer.": the bare base model's tensors are saved without it
  // The flags this class computes (only the `fixed` ones matter; the others are config keys), what
  // it computes in words, and its limits on attention.
  ArchFlags flags;
  unsigned fixed = 0;
  const char* computes = "";
  bool mha_only = false;              // no grouped-query attention: kv_heads == heads
  bool head_dim_from_hidden = false;  // head_dim = hidden / heads
  // The order export lists its tensors in: the table's (false), or in each run of linears between
  // two norms the weights before the biases (what transformers' Llama state dict does).
  bool weights_before_biases = false;
  // config.json carries RoPE scaling as transformers' RoPE utilities read it: "rope_scaling"
  // (transformers 4: an object with rope_type or type, and its parameters) or "rope_parameters"
  // (transformers 5: the same object with rope_theta in it); the first wins where both exist, as in
  // transformers 5. Import checks rope_type and llama3's parameters against the recipe and refuses
  // the types the engine does not compute (yarn, linear, dynamic, longrope, ...) by name.
  bool rope_scaling = false;
  // The tensor table's HF-name column this architecture reads (TensorDecl::hf); -1: its own index
  // in Family::hf. Mistral's tensors are named as Llama's, so it reads column 0.
  int names_column = -1;
  std::vector<HfConfigKey> config{};  // in the order export writes them
};

// A module name of peft.target_modules that adapts whole engine linears (LoraTarget bits).
struct LoraName {
  const char* name;
  unsigned targets;
};
// HF module names of the parts of one fused linear: accepted only all together (one adapter).
struct LoraGroup {
  std::vector<const char*> parts;
  unsigned target;
  const char* fused;  // the engine's name of the fused linear: "qkv"
};

struct Family {
  const char* arch;     // model.arch: "gpt"
  const char* summary;  // one line for messages and docs
  ArchFlags defaults;   // the flags a recipe does not set
  unsigned fixed = 0;   // ArchFlag bits the family computes only at their default
  std::span<const TensorDecl> tensors;
  std::vector<HfArchitecture> hf{};  // [0] unless model.hf_architecture names another (ArchShape::hf)
  std::vector<LoraName> lora_names{};
  std::vector<LoraGroup> lora_groups{};
};

// The family flags of `s` fixes at another value than its default (0: none).
unsigned contradicted_flags(const Family& f, const ArchShape& s);

}  // namespace recipe::core
