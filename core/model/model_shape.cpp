#include "core/model/model_shape.hpp"

#include <stdexcept>

#include "family/family.hpp"

#include "plan/fp8.hpp"
#include "plan/lora.hpp"
#include "plan/model_family.hpp"

namespace recipe::core {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& value, const std::string& why) {
  throw std::invalid_argument(path + "=" + value + ": " + why);
}

}  // namespace

ModelShape model_shape(const plan::Plan& plan) {
  const auto& m = plan.model;
  ModelShape s;
  ArchShape& a = s.arch;
  a.family = &plan::model_family(m);
  a.layers = m.num_layers;
  a.hidden = m.hidden_size;
  a.heads = m.num_attention_heads;
  a.kv_heads = m.num_kv_heads;
  a.head_dim = m.head_dim;
  a.ffn = m.ffn_hidden_size;
  s.seq = m.seq_length;
  a.vocab = m.vocab_size;
  a.padded_vocab = m.padded_vocab_size;
  a.max_positions = m.max_position_embeddings;
  a.layernorm = m.norm == plan::Norm::layernorm;
  a.gelu = m.activation == plan::Activation::gelu;
  a.learned_positions = m.position_embedding == plan::PositionEmbedding::learned;
  a.bias = m.bias;
  a.tied = m.tie_embeddings;
  a.qk_norm = m.qk_norm;
  s.packed = plan.data.kind == plan::DataKind::sft && plan.data.pack;
  s.max_samples = s.packed ? plan.data.max_samples_per_pack + 1 : 0;
  a.norm_eps = float(m.norm_eps);
  a.rope_theta = float(m.rope_theta);
  if (m.rope_scaling == plan::RopeScaling::llama3) {
    a.rope_scaling = RopeScaling::llama3;
    a.rope_factor = m.rope_scaling_factor;
    a.rope_low_freq_factor = m.rope_scaling_low_freq_factor;
    a.rope_high_freq_factor = m.rope_scaling_high_freq_factor;
    a.rope_original_max_positions = m.rope_scaling_original_max_positions;
  }
  // The resolver checked that the name is one of the family's (dsl/relations_model.cpp).
  for (size_t i = 0; i < a.family->hf.size(); ++i)
    if (m.hf_architecture == a.family->hf[i].model_type) a.hf = int(i);
  a.init_std = m.init_std;
  s.classifier_chunk_rows = plan.trainer.classifier_chunk_rows;
  if (plan.parallelism.sequence_parallel && plan.parallelism.tp > 1) s.sequence_parallel = plan.parallelism.tp;
  s.tp_comm_overlap = plan.parallelism.tp_comm_overlap;
  s.tp_overlap_chunks = plan.parallelism.tp_overlap_chunks;
  if (plan.peft.kind == plan::PeftKind::lora) {
    // The resolver checked rank, alpha and the target names; a plan without targets has no adapters.
    s.lora_targets = plan::lora_targets(*a.family, plan.peft.target_modules).mask;
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
  if (a.layers < 1 || a.hidden < 1 || s.seq < 1 || a.ffn < 1 || a.head_dim < 1)
    throw std::invalid_argument("model.num_layers=" + std::to_string(a.layers) +
                                ", hidden_size=" + std::to_string(a.hidden) + ", seq_length=" + std::to_string(s.seq) +
                                ", ffn_hidden_size=" + std::to_string(a.ffn) +
                                ", head_dim=" + std::to_string(a.head_dim) +
                                ": all must be positive (a plan built in code needs the resolver's derived fields)");
  if (a.kv_heads < 1 || a.heads % a.kv_heads != 0)
    bad("model.num_kv_heads", std::to_string(a.kv_heads),
        "must divide model.num_attention_heads=" + std::to_string(a.heads) + " (GQA groups)");
  if (a.padded_vocab < a.vocab)
    bad("model.padded_vocab_size", std::to_string(a.padded_vocab),
        "smaller than model.vocab_size=" + std::to_string(a.vocab));
  if (a.max_positions < s.seq)
    bad("model.max_position_embeddings", std::to_string(a.max_positions),
        "is below model.seq_length=" + std::to_string(s.seq) + "; raise it or shorten the sequence");
  if (!a.learned_positions && a.head_dim % 2 != 0)
    bad("model.head_dim", std::to_string(a.head_dim), "RoPE needs an even head dimension");
  // The family's table has no rows for a flag it fixes (the Llama table has no fc1/fc2): a plan
  // built in code past the resolver's check would bind tensors that do not exist.
  if (const unsigned c = contradicted_flags(*a.family, a)) {
    const struct {
      unsigned flag;
      const char* key;
      std::string value;
    } flags[] = {{flag_norm, "model.norm", std::string(plan::to_string(m.norm))},
                 {flag_activation, "model.activation", std::string(plan::to_string(m.activation))},
                 {flag_positions, "model.position_embedding", std::string(plan::to_string(m.position_embedding))},
                 {flag_bias, "model.bias", m.bias ? "true" : "false"},
                 {flag_tied, "model.tie_embeddings", m.tie_embeddings ? "true" : "false"},
                 {flag_qk_norm, "model.qk_norm", m.qk_norm ? "true" : "false"}};
    for (const auto& f : flags)
      if (c & f.flag)
        bad(f.key, f.value,
            std::string("model.arch=") + a.family->arch +
                " does not compute it (its tensor table has no rows for it); drop the key or pick another "
                "model.arch (the resolver names the choices)");
  }
  return s;
}

}  // namespace recipe::core
