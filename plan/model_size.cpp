#include "plan/model_size.hpp"

#include <string>

namespace recipe::plan {

namespace {

bool swiglu(const ModelConfig& m) { return m.activation == "swiglu"; }
int64_t norm_params(const ModelConfig& m) {
  const int64_t h = m.hidden_size;
  // LayerNorm has a scale and (with bias) a shift; RMSNorm only a scale.
  return (m.norm == "layernorm" && m.bias) ? 2 * h : h;
}
int64_t kv_width(const ModelConfig& m) {
  const int kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads;
  return static_cast<int64_t>(kv) * m.head_dim;
}

}  // namespace

LinearShape adaptable_linear_shape(const ModelConfig& m, const std::string& module) {
  const int64_t h = m.hidden_size, f = m.ffn_hidden_size;
  if (module == "qkv") return {h, h + 2 * kv_width(m)};
  if (module == "proj") return {h, h};
  if (module == "fc1") return {h, swiglu(m) ? 2 * f : f};
  if (module == "fc2") return {f, h};
  return {};
}

LayerParams layer_params(const ModelConfig& m) {
  const int64_t h = m.hidden_size, f = m.ffn_hidden_size, kv = kv_width(m);
  const int64_t b = m.bias ? 1 : 0;
  LayerParams p;
  // Column-parallel: qkv and fc1 (gate+up for swiglu), weights and biases split over TP.
  p.sharded += h * (h + 2 * kv) + b * (h + 2 * kv);
  const int64_t fc1_out = swiglu(m) ? 2 * f : f;
  p.sharded += h * fc1_out + b * fc1_out;
  // Row-parallel: proj and fc2 weights split over TP, their output biases replicated.
  p.sharded += h * h + f * h;
  p.replicated += 2 * b * h;
  p.replicated += 2 * norm_params(m);  // pre-attention and pre-MLP norms
  return p;
}

int64_t word_embedding_params(const ModelConfig& m, int64_t vocab) { return vocab * m.hidden_size; }

int64_t position_embedding_params(const ModelConfig& m) {
  if (m.position_embedding != "learned") return 0;
  const int64_t positions = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length;
  return positions * m.hidden_size;
}

int64_t final_norm_params(const ModelConfig& m) { return norm_params(m); }

int64_t count_params(const ModelConfig& m, int64_t vocab) {
  const int64_t embed = word_embedding_params(m, vocab);
  return static_cast<int64_t>(m.num_layers) * layer_params(m).total() + final_norm_params(m) + embed +
         position_embedding_params(m) + (m.tie_embeddings ? 0 : embed);
}

double training_flops_per_token(const ModelConfig& m, int64_t num_params) {
  return 6.0 * static_cast<double>(num_params) +
         12.0 * m.num_layers * static_cast<double>(m.hidden_size) * m.seq_length;
}

int64_t lora_trainable_params(const Plan& plan) {
  if (plan.peft.kind != "lora") return 0;
  int64_t per_layer = 0;
  for (const auto& module : plan.peft.target_modules) {
    const auto shape = adaptable_linear_shape(plan.model, module);
    per_layer += static_cast<int64_t>(plan.peft.rank) * (shape.in + shape.out);
  }
  return per_layer * plan.model.num_layers;
}

}  // namespace recipe::plan
