// Our checkpoints ↔ Hugging Face `transformers` model directories (config.json + safetensors).
//
// What is written is read off the model's family descriptor (family/family.hpp): each family lists
// the HF architectures it reads and writes (export writes the first), and for each the
// config.json model_type and class, the flags that architecture can express, and its config.json
// keys ↔ ArchShape fields. Which of our tensors make which HF tensor, and their orientation, are the
// family's tensor-table columns. This file holds no per-family branch; it interprets those.
//
// Today (family/gpt.cpp, family/llama.cpp, family/qwen2.cpp, family/qwen3.cpp):
//
//   gpt → gpt2 (GPT2LMHeadModel): LayerNorm with biases, tanh-GELU MLP ("gelu_new"), learned
//     positions, biases in every linear, kv_heads == heads, head_dim·heads == hidden. GPT-2's Conv1D
//     stores weights [in, out] (y = x·W + b), the transpose of our [out, in] (nn.Linear); c_attn is
//     q|k|v concatenated along the output dim: c_attn.weight = [q;k;v]ᵀ, shape [C, 3C].
//   llama → llama (LlamaForCausalLM): RMSNorm, SwiGLU (down(silu(gate)·up)), RoPE with HF's
//     rotate-half pairing (i with i + D/2, angle t·θ^(-2i/D): the engine's kernels/cpu/rope.cpp, so
//     q_proj and k_proj need no head-dim permutation), GQA with q head h reading kv head h / (Hq/Hkv)
//     (HF's repeat_kv). Biases map to attention_bias / mlp_bias.
//   qwen2 → qwen2 (Qwen2ForCausalLM): Llama's mapping, with q_proj/k_proj/v_proj biases (always
//     there, no config key) and none on o_proj or the MLP; use_sliding_window must be false.
//   llama → mistral (MistralForCausalLM) with model.hf_architecture="mistral": the same tensors and
//     names, no biases, sliding_window written as null (an imported window must cover every position).
//   Both write Llama 3.1's "llama3" RoPE scaling in rope_parameters (transformers 5) and rope_scaling
//     (transformers 4), and import reads either.
//   qwen3 → qwen3 (Qwen3ForCausalLM): Llama's block without biases plus q_norm/k_norm ([head_dim]
//     RMSNorm weights of every q and k head, before RoPE); head_dim is its own key.
//
// A model whose flags its family's HF architecture cannot express (a GPT without biases, RMSNorm in
// the gpt family, ...) has no HF class that computes the same function, and is refused naming them.
//
// Vocabulary: our embedding (and lm_head) has padded_vocab rows; HF gets the first vocab_size rows
// (the padded rows never receive a gradient and the loss masks their logits, so trimming changes
// nothing the model computes). Import fills the padded rows with zeros.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "core/model/model_shape.hpp"
#include "family/family.hpp"
#include "plan/plan.hpp"

namespace recipe::core::hf {

// The HF architecture export writes and import expects for a model of this shape (its family's
// first, or the one model.hf_architecture names: ArchShape::hf); throws
// std::invalid_argument listing what that architecture cannot express.
const HfArchitecture& hf_architecture(const ModelShape& s);

// The tensor table's HF-name column of that architecture (HfArchitecture::names_column).
int hf_names_column(const ModelShape& s);

// One tensor of the HF model and the tensors of ours it is made of.
struct TensorSpec {
  std::string hf_name;  // "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> hf_shape;
  std::vector<std::string> parts;  // ours, concatenated along dim 0 (q|k|v), in our orientation
  bool transpose = false;          // HF stores the 2-D concatenation transposed (Conv1D)
  bool vocab_rows = false;         // dim 0 is the padded vocabulary: HF has the first `vocab` rows
};

// Every tensor of the HF model (the shape's HF architecture, hf_architecture()), in the HF module
// order.
std::vector<TensorSpec> tensor_specs(const ModelShape& s);

// config.json for the shape ("torch_dtype" from `dtype`).
nlohmann::ordered_json make_config(const ModelShape& s, ckpt::DType dtype);

// The index in the shape's family's HF list (Family::hf) of config.json's model_type, which must be
// the shape's (ArchShape::hf); -1, with a line in `bad`, when it is another family's or another of
// the family's (a Mistral config.json with a recipe that exports Llama). Throws std::invalid_argument when model_type is
// missing or no family's.
int hf_column(const nlohmann::json& config, const ModelShape& s, std::vector<std::string>& bad);

// Where config.json disagrees with the shape, one line each naming both values, e.g.
// "n_embd is 768 in config.json, the recipe has model.hidden_size=512". Throws
// std::invalid_argument when model_type is missing or no family's, or when config.json asks for
// something the engine does not compute (rope_scaling, another activation).
std::vector<std::string> config_mismatches(const nlohmann::json& config, const ModelShape& s);

struct ExportOptions {
  std::string out_dir;                   // created if missing; may hold only files export writes
  ckpt::DType dtype = ckpt::DType::f32;  // f32 is exact; bf16 rounds to nearest even
  // A LoRA checkpoint: write the merged weights W + s·B·A (lora_merge.hpp). Without it, its base.
  bool merge_lora = false;
};

struct ExportResult {
  bool adapters_left_out = false;  // a LoRA checkpoint exported without merge_lora: the base model
  std::string out_dir;
  std::string model_type;
  int tensors = 0;
  uint64_t bytes = 0;              // model.safetensors
  std::vector<std::string> files;  // written, absolute paths
};

// Reads `checkpoint_dir` (any saving layout; an adapter-only LoRA checkpoint with its base) whole
// tensor by tensor and writes <out_dir>/model.safetensors + config.json. `shape` is the
// checkpoint's model (its plan.toml); the checkpoint's tensors must match it. A LoRA model's
// adapters are not part of the HF model: merge_lora folds them in, else the base is written (its
// adapters export with hf_peft.hpp). Throws std::invalid_argument for merge_lora without
// adapters, std::runtime_error (ckpt::CheckpointError for broken files) naming the file and the fix.
ExportResult export_checkpoint(const std::string& checkpoint_dir, const ModelShape& shape,
                               const ExportOptions& options);

// Creates the export directory `out`, or checks that it holds only `files` (an earlier export's,
// which are replaced); throws std::runtime_error naming what else it holds.
void prepare_export_dir(const std::string& out, const std::vector<std::string>& files);
// Writes `text` to `<path>.tmp` and renames it into place; throws std::runtime_error naming it.
void write_text_file(const std::string& path, const std::string& text);

struct ImportOptions {
  std::string checkpoints_dir;  // step-0/ and `latest` are written here
  std::string plan_toml;        // stored as the checkpoint's plan.toml
  std::string source;           // recorded in common.json "imported_from" (default: the HF dir)
};

struct ImportResult {
  std::string checkpoint_dir;  // <checkpoints_dir>/step-0
  std::string model_type;
  int tensors = 0;                  // HF tensors read
  std::vector<std::string> unused;  // HF tensors that are no weight of ours (buffers such as inv_freq)
};

// Reads an HF model directory (config.json + model.safetensors or an index and its shards; F32,
// BF16 or F16) into a step-0 checkpoint of the model `plan` describes. Refuses, listing every
// problem: std::invalid_argument when config.json describes another model than the recipe (or
// the recipe has no HF equivalent), std::runtime_error / ckpt::CheckpointError for missing or
// misshapen tensors and unreadable files. Loading it with
// checkpoint.load and mode="finetune" starts training from these weights.
ImportResult import_checkpoint(const std::string& hf_dir, const plan::Plan& plan, const ImportOptions& options);

}  // namespace recipe::core::hf
