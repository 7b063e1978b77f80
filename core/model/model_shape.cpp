#include "core/model/model_shape.hpp"

#include <stdexcept>

namespace recipe::core {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& value, const std::string& why) {
  throw std::invalid_argument(path + "=" + value + ": " + why);
}

}  // namespace

ModelShape model_shape(const plan::Plan& plan) {
  const auto& m = plan.model;
  ModelShape s;
  s.layers = m.num_layers;
  s.hidden = m.hidden_size;
  s.heads = m.num_attention_heads;
  s.seq = m.seq_length;
  s.vocab = m.vocab_size;
  if (s.layers < 1) bad("model.num_layers", std::to_string(s.layers), "need at least 1 layer");
  if (s.hidden < 1) bad("model.hidden_size", std::to_string(s.hidden), "must be positive");
  if (s.heads < 1) bad("model.num_attention_heads", std::to_string(s.heads), "must be positive");
  if (s.seq < 1) bad("model.seq_length", std::to_string(s.seq), "must be positive");
  if (s.vocab < 2) bad("model.vocab_size", std::to_string(s.vocab), "need at least 2 tokens");

  s.kv_heads = m.num_kv_heads > 0 ? m.num_kv_heads : s.heads;
  if (s.heads % s.kv_heads != 0)
    bad("model.num_kv_heads", std::to_string(s.kv_heads),
        "must divide model.num_attention_heads=" + std::to_string(s.heads) + " (GQA groups)");
  if (m.head_dim > 0) {
    s.head_dim = m.head_dim;
  } else {
    if (s.hidden % s.heads != 0)
      bad("model.hidden_size", std::to_string(s.hidden),
          "is not a multiple of model.num_attention_heads=" + std::to_string(s.heads));
    s.head_dim = s.hidden / s.heads;
  }

  if (m.norm == plan::Norm::layernorm)
    s.layernorm = true;
  else if (m.norm == plan::Norm::rmsnorm)
    s.layernorm = false;
  else
    bad("model.norm", "\"" + std::string(plan::to_string(m.norm)) + "\"", "use \"layernorm\" or \"rmsnorm\"");
  if (m.activation == plan::Activation::gelu)
    s.gelu = true;
  else if (m.activation == plan::Activation::swiglu)
    s.gelu = false;
  else
    bad("model.activation", "\"" + std::string(plan::to_string(m.activation)) + "\"", "use \"gelu\" or \"swiglu\"");
  if (m.position_embedding == plan::PositionEmbedding::learned)
    s.learned_positions = true;
  else if (m.position_embedding == plan::PositionEmbedding::rope)
    s.learned_positions = false;
  else
    bad("model.position_embedding", "\"" + std::string(plan::to_string(m.position_embedding)) + "\"",
        "use \"learned\" or \"rope\"");
  if (!s.learned_positions && s.head_dim % 2 != 0)
    bad("model.head_dim", std::to_string(s.head_dim), "RoPE needs an even head dimension");

  if (m.ffn_hidden_size > 0) {
    s.ffn = m.ffn_hidden_size;
  } else if (s.gelu) {
    s.ffn = 4 * s.hidden;
  } else {  // Llama: 2/3 of 4·hidden, rounded up to a multiple of 256
    int f = int(2 * (4 * int64_t(s.hidden)) / 3);
    s.ffn = (f + 255) / 256 * 256;
  }

  int tp = std::max(1, plan.parallelism.tp);
  if (m.padded_vocab_size > 0) {
    s.padded_vocab = m.padded_vocab_size;
  } else {
    int mult = std::max(1, m.make_vocab_size_divisible_by) * tp;
    s.padded_vocab = (s.vocab + mult - 1) / mult * mult;
  }
  if (s.padded_vocab < s.vocab)
    bad("model.padded_vocab_size", std::to_string(s.padded_vocab),
        "smaller than model.vocab_size=" + std::to_string(s.vocab));
  s.max_positions = m.max_position_embeddings > 0 ? m.max_position_embeddings : s.seq;
  if (s.max_positions < s.seq)
    bad("model.max_position_embeddings", std::to_string(s.max_positions),
        "is below model.seq_length=" + std::to_string(s.seq) + "; raise it or shorten the sequence");

  s.bias = m.bias;
  s.tied = m.tie_embeddings;
  s.norm_eps = float(m.norm_eps);
  s.rope_theta = float(m.rope_theta);
  s.init_std = m.init_std;
  s.classifier_chunk_rows = plan.trainer.classifier_chunk_rows;
  if (!(s.init_std > 0)) bad("model.init_std", std::to_string(s.init_std), "must be positive");
  return s;
}

}  // namespace recipe::core
