// Rules across the model's shape keys: heads, KV heads, head_dim, positions (part of check_relations).
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

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
  return kv_ok;
}

}  // namespace recipe::dsl::detail
