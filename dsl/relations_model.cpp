// Rules across the model's shape keys: heads, KV heads, head_dim, positions (part of check_relations).
#include <cmath>
#include <iterator>

#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"
#include "family/registry.hpp"
#include "plan/model_family.hpp"

namespace recipe::dsl::detail {

namespace {

// model.rope_scaling and its parameters (family/rope.hpp computes the table from them). The
// parameters belong to llama3 only: set to a value without it they would change nothing, so they
// are refused (0, the unset value a resolved plan writes for every key, is not a value); with it
// each must be given (no silent Llama 3.1 default) and consistent.
void check_rope_scaling(ResolveContext& ctx) {
  const plan::ModelConfig& m = ctx.plan().model;
  const char* keys[] = {"model.rope_scaling_factor", "model.rope_scaling_low_freq_factor",
                        "model.rope_scaling_high_freq_factor", "model.rope_scaling_original_max_positions"};
  const std::string llama31 =
      "Llama 3.1: rope_scaling=\"llama3\", rope_scaling_factor=8, rope_scaling_low_freq_factor=1, "
      "rope_scaling_high_freq_factor=4, rope_scaling_original_max_positions=8192";
  if (m.rope_scaling == plan::RopeScaling::none) {
    const double values[] = {m.rope_scaling_factor, m.rope_scaling_low_freq_factor, m.rope_scaling_high_freq_factor,
                             double(m.rope_scaling_original_max_positions)};
    for (size_t i = 0; i < std::size(keys); ++i)
      if (const char* k = keys[i]; ctx.was_set(k) && !ctx.bad_paths.count(k) && values[i] != 0)
        ctx.violation(k, std::string(k) + " is set but model.rope_scaling=\"none\": it scales nothing",
                      "set model.rope_scaling=\"llama3\" (" + llama31 + "), or drop " + k);
    return;
  }
  if (m.position_embedding != plan::PositionEmbedding::rope) {
    ctx.violation("model.rope_scaling",
                  "model.rope_scaling=\"llama3\" scales RoPE, but model.position_embedding=\"" +
                      std::string(plan::to_string(m.position_embedding)) + "\"",
                  "drop model.rope_scaling, or use position_embedding=\"rope\"");
    return;
  }
  require(ctx, keys[0], m.rope_scaling_factor, m.rope_scaling_factor > 0 && std::isfinite(m.rope_scaling_factor),
          "must be positive with model.rope_scaling=\"llama3\"", llama31);
  const double lo = m.rope_scaling_low_freq_factor, hi = m.rope_scaling_high_freq_factor;
  if (require(ctx, keys[1], lo, lo > 0 && std::isfinite(lo), "must be positive with model.rope_scaling=\"llama3\"",
              llama31) &&
      require(ctx, keys[2], hi, hi > 0 && std::isfinite(hi), "must be positive with model.rope_scaling=\"llama3\"",
              llama31))
    require(ctx, keys[1], lo, lo < hi,
            "must be below model.rope_scaling_high_freq_factor=" + str(hi) +
                " (wavelengths between original/high and original/low are blended)",
            llama31);
  const int orig = m.rope_scaling_original_max_positions;
  if (require(ctx, keys[3], orig, orig > 0, "must be positive with model.rope_scaling=\"llama3\"", llama31))
    require(ctx, keys[3], orig, orig < m.max_position_embeddings,
            "must be below model.max_position_embeddings=" + str(m.max_position_embeddings) +
                ": the scaling stretches the pretraining context to the longer one",
            "raise max_position_embeddings (Llama 3.1: 131072) or lower the original");
}

// model.hf_architecture names one of the family's Hugging Face architectures.
void check_hf_architecture(ResolveContext& ctx) {
  const plan::ModelConfig& m = ctx.plan().model;
  if (m.hf_architecture.empty()) return;
  const core::Family& f = plan::model_family(m);
  std::string names;
  for (const core::HfArchitecture& h : f.hf) {
    if (m.hf_architecture == h.model_type) {
      // A flag the family leaves to the recipe but this architecture fixes (Mistral: no biases).
      if ((h.fixed & core::flag_bias) && m.bias != h.flags.bias)
        ctx.violation("model.bias",
                      std::string("model.bias=") + (m.bias ? "true" : "false") + ": model.hf_architecture=\"" +
                          h.model_type + "\" computes model.bias=" + (h.flags.bias ? "true" : "false") + " only",
                      "drop model.bias, or model.hf_architecture");
      if ((h.fixed & core::flag_tied) && m.tie_embeddings != h.flags.tied)
        ctx.violation("model.tie_embeddings",
                      std::string("model.tie_embeddings=") + (m.tie_embeddings ? "true" : "false") +
                          ": model.hf_architecture=\"" + h.model_type +
                          "\" computes tie_embeddings=" + (h.flags.tied ? "true" : "false") + " only",
                      "drop model.tie_embeddings, or model.hf_architecture");
      return;
    }
    names += std::string(names.empty() ? "" : ", ") + "\"" + h.model_type + "\"";
  }
  ctx.violation("model.hf_architecture",
                "model.hf_architecture=\"" + m.hf_architecture + "\" is no Hugging Face architecture of model.arch=\"" +
                    f.arch + "\"",
                names.empty() ? std::string("drop it: this family has none")
                              : "use one of " + names + " (or \"\" for the first), or the model.arch that reads it");
}

}  // namespace

bool check_attention_shape(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  // Attention shape. A head_dim of its own (Qwen3) frees the width from hidden_size / heads.
  const bool own_head_dim = ctx.was_set("model.head_dim") && m.head_dim > 0;
  require(ctx, "model.hidden_size", m.hidden_size, own_head_dim || m.hidden_size % m.num_attention_heads == 0,
          "is not divisible by model.num_attention_heads=" + str(m.num_attention_heads),
          "make hidden_size a multiple of the head count, or set model.head_dim");
  const int kv = m.num_kv_heads;
  const bool kv_ok =
      require(ctx, "model.num_kv_heads", kv, kv <= m.num_attention_heads && m.num_attention_heads % kv == 0,
              "does not divide model.num_attention_heads=" + str(m.num_attention_heads),
              "each KV head serves a whole group of query heads; use a divisor of the head count");
  if (m.position_embedding == plan::PositionEmbedding::rope && m.head_dim % 2 != 0)
    ctx.violation("model.position_embedding",
                  "model.position_embedding=rope needs an even head_dim, got model.head_dim=" + str(m.head_dim) +
                      (own_head_dim ? std::string()
                                    : " (hidden_size=" + str(m.hidden_size) +
                                          " / num_attention_heads=" + str(m.num_attention_heads) + ")"),
                  own_head_dim ? "set an even model.head_dim"
                               : "change hidden_size or num_attention_heads so that their quotient is even");
  if (m.position_embedding == plan::PositionEmbedding::learned)
    require(ctx, "model.max_position_embeddings", m.max_position_embeddings, m.max_position_embeddings >= m.seq_length,
            "is smaller than model.seq_length=" + str(m.seq_length) + "; learned positions need one row per token",
            "set max_position_embeddings ≥ " + str(m.seq_length) + " (or 0 = seq_length)");
  check_rope_scaling(ctx);
  check_hf_architecture(ctx);
  return kv_ok;
}

}  // namespace recipe::dsl::detail
