#include "core/model/model_shape.hpp"

#include <stdexcept>

#include "plan/fp8.hpp"
#include "plan/lora.hpp"

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
  s.kv_heads = m.num_kv_heads;
  s.head_dim = m.head_dim;
  s.ffn = m.ffn_hidden_size;
  s.seq = m.seq_length;
  s.vocab = m.vocab_size;
  s.padded_vocab = m.padded_vocab_size;
  s.max_positions = m.max_position_embeddings;
  s.layernorm = m.norm == plan::Norm::layernorm;
  s.gelu = m.activation == plan::Activation::gelu;
  s.learned_positions = m.position_embedding == plan::PositionEmbedding::learned;
  s.bias = m.bias;
  s.tied = m.tie_embeddings;
  s.packed = plan.data.kind == plan::DataKind::sft && plan.data.pack;
  s.max_samples = s.packed ? plan.data.max_samples_per_pack + 1 : 0;
  s.norm_eps = float(m.norm_eps);
  s.rope_theta = float(m.rope_theta);
  s.init_std = m.init_std;
  s.classifier_chunk_rows = plan.trainer.classifier_chunk_rows;
  if (plan.parallelism.sequence_parallel && plan.parallelism.tp > 1) s.sequence_parallel = plan.parallelism.tp;
  s.tp_comm_overlap = plan.parallelism.tp_comm_overlap;
  s.tp_overlap_chunks = plan.parallelism.tp_overlap_chunks;
  if (plan.peft.kind == plan::PeftKind::lora) {
    // The resolver checked rank, alpha and the target names; a plan without targets has no adapters.
    s.lora_targets = plan::lora_targets(plan.peft.target_modules).mask;
    if (s.lora_targets == 0 || plan.peft.rank < 1)
      bad("peft.target_modules", std::to_string(plan.peft.target_modules.size()) + " entries",
          "LoRA needs a positive peft.rank and at least one adapted linear");
    s.lora_rank = plan.peft.rank;
    s.lora_scale = float(plan::lora_scale(plan.peft));
    s.lora_dropout = float(plan.peft.dropout);
    s.lora_dropout_seed = uint64_t(plan.trainer.seed);
  }

  s.fp8_linears = plan::fp8_linears(plan).mask;
  s.fp8_frozen = plan::fp8_frozen_linears(plan);
  s.fp8_grad_e5m2 = plan.fp8.backward_format == plan::Fp8Format::e5m2;
  s.fp8_fast_accum_forward = plan.fp8.fast_accum_forward;
  if (s.fp8_linears && plan.fp8.scaling == plan::Fp8Scaling::delayed) {
    s.fp8_history_len = plan.fp8.amax_history_len;
    s.fp8_amax_most_recent = plan.fp8.amax_compute == plan::Fp8AmaxCompute::most_recent;
  }

  // The resolver checks all of this; these few are kept because buffer sizes and indexing depend on
  // them (a hand-built plan that skipped the derivations fails here instead of reading out of bounds).
  if (s.layers < 1 || s.hidden < 1 || s.seq < 1 || s.ffn < 1 || s.head_dim < 1)
    throw std::invalid_argument("model.num_layers=" + std::to_string(s.layers) +
                                ", hidden_size=" + std::to_string(s.hidden) + ", seq_length=" + std::to_string(s.seq) +
                                ", ffn_hidden_size=" + std::to_string(s.ffn) +
                                ", head_dim=" + std::to_string(s.head_dim) +
                                ": all must be positive (a plan built in code needs the resolver's derived fields)");
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0)
    bad("model.num_kv_heads", std::to_string(s.kv_heads),
        "must divide model.num_attention_heads=" + std::to_string(s.heads) + " (GQA groups)");
  if (s.padded_vocab < s.vocab)
    bad("model.padded_vocab_size", std::to_string(s.padded_vocab),
        "smaller than model.vocab_size=" + std::to_string(s.vocab));
  if (s.max_positions < s.seq)
    bad("model.max_position_embeddings", std::to_string(s.max_positions),
        "is below model.seq_length=" + std::to_string(s.seq) + "; raise it or shorten the sequence");
  if (!s.learned_positions && s.head_dim % 2 != 0)
    bad("model.head_dim", std::to_string(s.head_dim), "RoPE needs an even head dimension");
  return s;
}

}  // namespace recipe::core
