// A model family's tensors, declared once. Each row of a family's table says everything the rest of
// the engine needs to know about one tensor: its name, its shape as a function of the model's
// dimensions, how tensor parallelism shards it, its weight-decay group, its initialization, what the
// model binds it to (which also makes packs: q|k|v, gate|up), when the model has it at all, and
// its Hugging Face name and orientation in each HF architecture the family reads and writes (one
// column per entry of Family::hf). Four things iterate the table and nothing else spells a tensor
// name:
//
//   core/model/param_layout.cpp   the flat buffer layout (order, packs, groups, shards, init)
//   core/model/model.cpp          Model::bind_params (roles → the tensors the block computes with)
//   hf/hf_convert.cpp             HF export/import (names, q|k|v → c_attn, Conv1D transposes)
//   plan/model_size.cpp           parameter counting (resolver, memory estimate)
//
// Each family has its own table (family/gpt.cpp, family/llama.cpp), reached through its descriptor
// (family/family.hpp); tensor_table() returns the table of the shape's family. Within a table the
// ArchShape flags choose rows (LayerNorm/RMSNorm, biases, tied head, ...) where the family lets a
// recipe choose them.
//
// This library depends on nothing (not the plan, not the core), so the plan library's counting and
// the core's layout both link it without a cycle.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "family/arch_shape.hpp"

namespace recipe::core {

// Where the tensor lives: the first pipeline stage (embeddings), every layer, or the last stage
// (final norm, classifier). embedding_and_tied_head: on the first stage, and with tied embeddings
// the last stage holds its own copy for the classifier.
enum class Scope { embedding, embedding_and_tied_head, layer, head };

// What the model computes with the tensor. In one layer, adjacent rows with the same role and part
// are one pack: laid out back to back, bound as one tensor (dim 0 concatenated), e.g. q|k|v.
enum class Role {
  word_embedding,
  position_embedding,
  attention_norm,
  qkv,
  q_norm,  // qk-norm (ArchShape::qk_norm): the RMSNorm weight of every q head, [head_dim]
  k_norm,  // ... of every k head
  attention_out,
  mlp_norm,
  mlp_in,  // fc1, or the gate|up pack
  mlp_out,
  final_norm,
  lm_head,
};
// lora_a / lora_b: the LoRA adapter of the role's linear (A [rank, in], B [out, rank]; adjacent
// lora_b rows of one role are a pack, as the base weights: B of q|k|v, of gate|up).
enum class Part { weight, bias, lora_a, lora_b };

// How tensor parallelism splits it (Megatron): replicated; column = dim 0 (the output features of
// a column-parallel linear, and its bias); row = dim 1 (the input features of a row-parallel
// linear); vocab_rows = dim 0 over the padded vocabulary (HF holds only the first vocab rows).
enum class Shard { replicated, column, row, vocab_rows };

// embedding: decays iff optimizer.decay_embeddings.
enum class DecayGroup { decay, no_decay, embedding };

// normal(0, init_std); normal_output: normal(0, init_std/sqrt(2·layers)) (output projections);
// kaiming_uniform: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = global dim 1, what
// torch's kaiming_uniform_(a=sqrt(5)) gives and HF peft uses for LoRA A.
enum class InitKind { normal, normal_output, zeros, ones, kaiming_uniform };
const char* init_kind_name(InitKind k);

// A dimension of ArchShape (or the adapters' rank) that a tensor's shape is made of.
enum class Dim { hidden, q_dim, kv_dim, head_dim, ffn, padded_vocab, max_positions, lora_rank };

// The parts a model may lack; a row is present when every flag it requires holds.
enum Requires : unsigned {
  always = 0,
  needs_bias = 1u << 0,               // model.bias
  needs_norm_bias = 1u << 1,          // LayerNorm with biases
  needs_learned_positions = 1u << 2,  // not RoPE
  needs_untied = 1u << 3,             // a classifier of its own
  needs_gelu = 1u << 4,               // fc1/fc2 MLP
  needs_swiglu = 1u << 5,             // gate|up, down MLP
  needs_lora_qkv = 1u << 6,           // LoRA adapters on q|k|v (Adapters::targets)
  needs_lora_proj = 1u << 7,          // ... on the attention output projection
  needs_lora_mlp_in = 1u << 8,        // ... on fc1 / gate|up
  needs_lora_mlp_out = 1u << 9,       // ... on fc2 / down
  needs_qk_norm = 1u << 10,           // model.qk_norm: per-head q and k RMSNorm weights
};

struct HfName {
  const char* name = nullptr;  // nullptr: this architecture has no such tensor; "{}" = layer
  bool transposed = false;     // stored [in, out] (GPT-2's Conv1D), ours is [out, in]
};

struct TensorDecl {
  const char* name;  // ours; in layer rows "{}" stands for the layer number
  Scope scope;
  Role role;
  Part part;
  std::vector<Dim> dims;  // global shape
  Shard shard;
  DecayGroup decay;
  InitKind init;
  unsigned requires_ = always;
  // Its name in each HF architecture of the family, column i for Family::hf[i]; none for adapters.
  std::vector<HfName> hf{};
  HfName hf_name(int column) const { return column < int(hf.size()) ? hf[size_t(column)] : HfName{}; }
};

// The table of the shape's family, in module order (the order of the flat layout within each decay
// group, and of GPT-2's HF checkpoint). Throws std::logic_error for a shape without a family.
std::span<const TensorDecl> tensor_table(const ArchShape& s);

bool present(const TensorDecl& d, const ArchShape& s, const Adapters& a = {});
// Whether the optimizer trains the tensor: every tensor of a model without LoRA adapters; only the
// adapters (Part::lora_a / lora_b) of one with them: the base is frozen (no gradient, no f32
// master, no Adam state). The one place that decides trainability.
bool trainable(const TensorDecl& d, const Adapters& a);
bool is_adapter(const TensorDecl& d);
int64_t dim_size(Dim dim, const ArchShape& s, const Adapters& a = {});
std::vector<int64_t> global_shape(const TensorDecl& d, const ArchShape& s, const Adapters& a = {});
int64_t global_numel(const TensorDecl& d, const ArchShape& s, const Adapters& a = {});
int shard_dim(Shard shard);  // -1 (replicated), 0 or 1

// "{}" in the pattern replaced by the layer number (layer rows) or left alone.
std::string tensor_name(const TensorDecl& d, int layer = -1);
// Its name in HF architecture `column` of its family; throws std::logic_error where it has none.
std::string hf_tensor_name(const TensorDecl& d, int column, int layer = -1);

// The name of the word embedding: the stage code that keeps the tied copy equal looks it up (every
// family names it alike; a test holds them to it).
const std::string& word_embedding_name();

}  // namespace recipe::core
