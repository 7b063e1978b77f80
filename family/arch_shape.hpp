// The numbers and flags that define a decoder architecture's tensors: its family, its dimensions
// and which parts it has. Plain structs with no dependencies, so the tensor tables (and the plan's
// parameter counting, which iterates them) can use them without linking the core. The execution
// shape (sequence, packing, parallel and FP8 knobs, the LoRA scale) is core/model/model_shape.hpp's
// ModelShape, which holds one of these as `arch`.
#pragma once

#include <cstdint>

namespace recipe::core {

struct Family;

// The linears a LoRA adapter (or FP8) can sit on, as the block fuses them (q|k|v one linear,
// gate|up one).
enum LoraTarget : unsigned {
  lora_qkv = 1u << 0,
  lora_proj = 1u << 1,
  lora_mlp_in = 1u << 2,   // fc1, or the gate|up pack
  lora_mlp_out = 1u << 3,  // fc2, or down
};

// The LoRA adapters a model carries: the tensor table holds their rows (A [rank, in], B [out, rank])
// for the targets set here. rank 0: none.
struct Adapters {
  int rank = 0;
  unsigned targets = 0;  // LoraTarget bits
  bool any() const { return rank > 0; }
};

// How RoPE's base frequencies are rescaled (model.rope_scaling; family/rope.hpp computes them).
enum class RopeScaling : uint8_t { none, llama3 };

struct ArchShape {
  // The family model.arch selects (family/registry.hpp): its tensor table, HF mapping, LoRA names.
  const Family* family = nullptr;
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  int vocab = 0, padded_vocab = 0, max_positions = 0;
  bool layernorm = true;          // false: RMSNorm
  bool gelu = true;               // false: SwiGLU (gate/up/down)
  bool learned_positions = true;  // false: RoPE
  bool bias = true;               // biases in linears (and LayerNorm)
  bool tied = true;               // logits use embedding.word.weight
  bool qk_norm = false;           // RMSNorm of each q and k head (weights [head_dim]) before RoPE (Qwen3)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  // RoPE scaling and its parameters (llama3: Llama 3.1's; 0 without scaling).
  RopeScaling rope_scaling = RopeScaling::none;
  double rope_factor = 0, rope_low_freq_factor = 0, rope_high_freq_factor = 0;
  int rope_original_max_positions = 0;
  // The Hugging Face architecture this model reads and writes: an index into family->hf (0: the
  // family's first; model.hf_architecture picks another, e.g. mistral in the llama family).
  int hf = 0;
  double init_std = 0.02;

  int64_t q_dim() const { return int64_t(heads) * head_dim; }
  int64_t kv_dim() const { return int64_t(kv_heads) * head_dim; }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  int64_t fc_in_rows() const { return gelu ? ffn : 2 * int64_t(ffn); }  // fc1 or [gate|up]
  bool norm_bias() const { return layernorm && bias; }
};

}  // namespace recipe::core
