#include "plan/model_size.hpp"

#include <algorithm>
#include <string>

#include "family/tensor_table.hpp"
#include "plan/lora.hpp"
#include "plan/model_family.hpp"

namespace recipe::plan {

namespace {

bool swiglu(const ModelConfig& m) { return m.activation == plan::Activation::swiglu; }

// The model's architecture, read leniently (the resolver counts before it knows the plan is
// valid; unknown strings simply select no optional part). `vocab` rows stand in for the padded vocab.
core::ArchShape table_shape(const ModelConfig& m, int64_t vocab) {
  core::ArchShape s;
  s.family = &model_family(m);
  s.layers = m.num_layers;
  s.hidden = m.hidden_size;
  s.heads = m.num_attention_heads;
  s.kv_heads = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads;
  s.head_dim = m.head_dim > 0 ? m.head_dim : (m.num_attention_heads > 0 ? m.hidden_size / m.num_attention_heads : 0);
  s.ffn = m.ffn_hidden_size;
  s.vocab = m.vocab_size;
  s.padded_vocab = static_cast<int>(vocab);
  s.max_positions = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length;
  s.layernorm = m.norm == plan::Norm::layernorm;
  s.gelu = !swiglu(m);
  s.learned_positions = m.position_embedding == plan::PositionEmbedding::learned;
  s.bias = m.bias;
  s.tied = m.tie_embeddings;
  s.qk_norm = m.qk_norm;
  return s;
}

// The plan's LoRA adapters (none without LoRA).
core::Adapters lora_adapters(const Plan& plan) {
  core::Adapters a;
  if (plan.peft.kind == PeftKind::lora && plan.peft.rank > 0) {
    a.rank = plan.peft.rank;
    a.targets = lora_targets(model_family(plan.model), plan.peft.target_modules).mask;
  }
  return a;
}

// Σ over the table's present rows of `role` (whole tensors, one copy each).
int64_t role_params(const ModelConfig& m, int64_t vocab, core::Role role) {
  const core::ArchShape s = table_shape(m, vocab);
  int64_t n = 0;
  for (const core::TensorDecl& d : core::tensor_table(s))
    if (d.role == role && core::present(d, s)) n += core::global_numel(d, s);
  return n;
}

}  // namespace

core::ArchShape model_table_shape(const ModelConfig& m) { return table_shape(m, m.padded_vocab_size); }

LayerParams layer_params(const ModelConfig& m) {
  const core::ArchShape s = table_shape(m, m.padded_vocab_size);
  LayerParams p;
  for (const core::TensorDecl& d : core::tensor_table(s)) {
    if (d.scope != core::Scope::layer || !core::present(d, s) || core::is_adapter(d)) continue;
    (d.shard == core::Shard::replicated ? p.replicated : p.sharded) += core::global_numel(d, s);
  }
  return p;
}

int64_t word_embedding_params(const ModelConfig& m, int64_t vocab) {
  return role_params(m, vocab, core::Role::word_embedding);
}

int64_t position_embedding_params(const ModelConfig& m) {
  return role_params(m, m.padded_vocab_size, core::Role::position_embedding);
}

int64_t final_norm_params(const ModelConfig& m) { return role_params(m, m.padded_vocab_size, core::Role::final_norm); }

int64_t count_params(const ModelConfig& m, int64_t vocab) {
  // Every present row once (a tied head is the word embedding: no row of its own), layer rows once per layer.
  const core::ArchShape s = table_shape(m, vocab);
  int64_t n = 0;
  for (const core::TensorDecl& d : core::tensor_table(s))
    if (core::present(d, s)) n += (d.scope == core::Scope::layer ? s.layers : 1) * core::global_numel(d, s);
  return n;
}

int64_t matmul_params(const ModelConfig& m) {
  // Every row a token is multiplied by: the layers' linears (and, at ~1e-4 of the total, their norms
  // and biases, as Megatron counts them) and the output head. The input embedding and learned
  // positions are table lookups. A tied head is the word embedding's only matmul, so it stays.
  const int64_t all = count_params(m, m.padded_vocab_size);
  const int64_t lookup = m.tie_embeddings ? 0 : word_embedding_params(m, m.padded_vocab_size);
  return all - lookup - position_embedding_params(m);
}

double training_flops_per_token(const ModelConfig& m) {
  const double attention_width = static_cast<double>(m.num_attention_heads) * m.head_dim;
  return 6.0 * static_cast<double>(matmul_params(m)) + 12.0 * m.num_layers * attention_width * m.seq_length;
}

double training_flops_per_token(const Plan& plan) {
  const ModelConfig& m = plan.model;
  if (plan.peft.kind != PeftKind::lora) return training_flops_per_token(m);
  const double attention_width = static_cast<double>(m.num_attention_heads) * m.head_dim;
  return 4.0 * static_cast<double>(matmul_params(m)) + 6.0 * static_cast<double>(lora_trainable_params(plan)) +
         12.0 * m.num_layers * attention_width * m.seq_length;
}

LayerParams lora_layer_params(const Plan& plan) {
  const core::ArchShape s = table_shape(plan.model, plan.model.padded_vocab_size);
  const core::Adapters a = lora_adapters(plan);
  LayerParams p;
  if (!a.any()) return p;
  for (const core::TensorDecl& d : core::tensor_table(s)) {
    if (d.scope != core::Scope::layer || !core::present(d, s, a) || !core::is_adapter(d)) continue;
    (d.shard == core::Shard::replicated ? p.replicated : p.sharded) += core::global_numel(d, s, a);
  }
  return p;
}

int64_t lora_widest_input(const Plan& plan, int tp) {
  const core::ArchShape s = table_shape(plan.model, plan.model.padded_vocab_size);
  const core::Adapters a = lora_adapters(plan);
  int64_t widest = 0;
  if (!a.any()) return widest;
  for (const core::TensorDecl& d : core::tensor_table(s)) {
    if (d.scope != core::Scope::layer || !core::present(d, s, a) || d.part != core::Part::lora_a) continue;
    const int64_t in = core::global_shape(d, s, a).at(1);
    widest = std::max(widest, d.shard == core::Shard::row ? in / std::max(1, tp) : in);
  }
  return widest;
}

int64_t lora_trainable_params(const Plan& plan) { return lora_layer_params(plan).total() * plan.model.num_layers; }

}  // namespace recipe::plan
