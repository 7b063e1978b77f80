// The activation declaration (activations.hpp has the buffers, their lifetimes and the region map).
#include "family/activations.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recipe::core {

namespace {

int64_t elem_bytes(const ActivationKnobs& k, ActDType t) { return t == ActDType::act ? k.act_bytes : 4; }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A buffer of its own: its bytes rounded up to the alignment.
ActBuffer own(const ActivationKnobs& k, const char* key, const char* label, ActScope scope, ActDType t,
              std::vector<int64_t> shape) {
  const int64_t bytes = act_align(numel(shape) * elem_bytes(k, t));
  return {key, label, scope, t, std::move(shape), bytes, {}};
}

// One layer's buffers in carve order, each with the most memory-saving level that still keeps it
// per layer (see the header).
struct LayerBuffer {
  const char* key;
  ActDType dtype;
  std::vector<int64_t> shape;
  ActRecompute kept_through;
  bool layernorm_only = false;
};

std::vector<LayerBuffer> layer_buffers(const ActivationKnobs& k) {
  const int64_t N = k.rows(), R = k.residual_rows(), C = k.hidden;
  using enum ActRecompute;
  return {
      {"residual", ActDType::act, {R, C}, full},
      {"ln1", ActDType::act, {R, C}, gelu},
      {"ln1_mean", ActDType::f32, {R}, norm, true},
      {"ln1_rstd", ActDType::f32, {R}, norm},
      {"qkv", ActDType::act, {N, k.qkv_dim()}, norm},
      {"atty", ActDType::act, {N, k.q_dim()}, norm},
      {"lse", ActDType::f32, {k.micro_batch, k.heads, k.seq}, norm},
      {"residual2", ActDType::act, {R, C}, norm},
      {"ln2", ActDType::act, {R, C}, gelu},
      {"ln2_mean", ActDType::f32, {R}, norm, true},
      {"ln2_rstd", ActDType::f32, {R}, norm},
      {"fc_pre", ActDType::act, {N, k.fc_in_rows()}, norm},
      {"fc_act", ActDType::act, {N, k.ffn}, none},
  };
}

bool is_fc_act(const char* key) { return std::string(key) == "fc_act"; }

// The transient region's layout (offsets from its start; see the header's map).
struct Transient {
  int64_t fc_act_end, dfc_act_off, dqkv_off, qkv_normed_off, layers_end;
};

Transient transient_layout(const ActivationKnobs& k) {
  const int64_t es = k.act_bytes, N = k.rows(), R = k.residual_rows(), F = k.ffn;
  Transient t{};
  t.fc_act_end = k.recompute != ActRecompute::none ? act_align(N * F * es) : 0;
  t.dfc_act_off = act_align(t.fc_act_end + N * k.fc_in_rows() * es);
  const int64_t mlp_end = k.gelu ? t.dfc_act_off : t.dfc_act_off + N * F * es;
  const int64_t proj_end = t.fc_act_end + R * k.hidden * es;
  t.dqkv_off = act_align(N * k.q_dim() * es);
  t.qkv_normed_off = act_align(t.dqkv_off + N * k.qkv_dim() * es);
  const int64_t attn_end = k.qk_norm ? t.qkv_normed_off + N * k.qkv_dim() * es : t.dqkv_off + N * k.qkv_dim() * es;
  t.layers_end = std::max({mlp_end, proj_end, attn_end});
  return t;
}

}  // namespace

int64_t layers_transient_bytes(const ActivationKnobs& k) { return transient_layout(k).layers_end; }

std::vector<ActBuffer> declare_activations(const ActivationKnobs& k) {
  const int64_t N = k.rows();
  // The resolver derived the chunk (plan::classifier_chunk_rows over these same buffer sizes). The
  // logits view and the classifier's chunk loop index by it, so an unresolved shape must not pass.
  if (k.classifier_chunk_rows < 1)
    throw std::logic_error("activation arena: the plan is not resolved (trainer.classifier_chunk_rows)");
  const int64_t R = k.residual_rows(), C = k.hidden, F = k.ffn, es = k.act_bytes;
  const int64_t chunk = std::min(k.classifier_chunk_rows, N);
  const ActRecompute level = k.recompute;
  using enum ActScope;
  std::vector<ActBuffer> d;

  // Rank scope: the transient region and the buffers that stand in for what the level drops.
  const Transient t = transient_layout(k);
  const char* label = "transient region (logits chunk | fc_act, dfc, proj_out | datty, dqkv, qkv_normed)";
  ActBuffer region{
      "transient", label, rank, ActDType::act, {}, act_align(std::max(t.layers_end, chunk * k.padded_vocab * es)), {}};
  region.views.push_back({"logits", ActDType::act, {chunk, k.padded_vocab}, 0});
  if (level != ActRecompute::none) region.views.push_back({"shared_fc_act", ActDType::act, {N, F}, 0});
  region.views.push_back({"dfc", ActDType::act, {N, k.fc_in_rows()}, t.fc_act_end});
  if (!k.gelu) region.views.push_back({"dfc_act", ActDType::act, {N, F}, t.dfc_act_off});
  region.views.push_back({"proj_out", ActDType::act, {R, C}, t.fc_act_end});
  region.views.push_back({"datty", ActDType::act, {N, k.q_dim()}, 0});
  region.views.push_back({"dqkv", ActDType::act, {N, k.qkv_dim()}, t.dqkv_off});
  if (k.qk_norm) region.views.push_back({"qkv_normed", ActDType::act, {N, k.qkv_dim()}, t.qkv_normed_off});
  d.push_back(std::move(region));
  if (level == ActRecompute::norm)
    d.push_back(own(k, "shared_ln", "ln (shared, recomputed)", rank, ActDType::act, {R, C}));
  if (k.sequence_parallel > 1) {
    d.push_back(own(k, "sp_full", "sequence-parallel whole rows", rank, ActDType::act, {N, C}));
    d.push_back(own(k, "sp_full_grad", "sequence-parallel whole rows", rank, ActDType::act, {N, C}));
  }
  const std::vector<LayerBuffer> per_layer = layer_buffers(k);
  if (level == ActRecompute::full)
    for (const LayerBuffer& b : per_layer)
      if (std::string(b.key) != "residual" && !is_fc_act(b.key) && (k.layernorm || !b.layernorm_only))
        d.push_back(own(k, b.key, b.key, rank, b.dtype, b.shape));

  // Layer scope: what this level keeps of every layer.
  for (const LayerBuffer& b : per_layer)
    if (level <= b.kept_through && (k.layernorm || !b.layernorm_only))
      d.push_back(own(k, b.key, b.key, ActScope::layer, b.dtype, b.shape));

  // Slot scope.
  d.push_back(own(k, "final_residual", "final_residual", slot, ActDType::act, {R, C}));
  d.push_back(own(k, "lnf", "lnf", slot, ActDType::act, {R, C}));
  if (k.layernorm) d.push_back(own(k, "lnf_mean", "lnf_mean", slot, ActDType::f32, {R}));
  d.push_back(own(k, "lnf_rstd", "lnf_rstd", slot, ActDType::f32, {R}));
  d.push_back(own(k, "inputs", "inputs", slot, ActDType::i32, {N}));
  d.push_back(own(k, "targets", "targets", slot, ActDType::i32, {N}));
  if (k.packed) d.push_back(own(k, "positions", "positions", slot, ActDType::i32, {N}));
  d.push_back(own(k, "dresidual", "dresidual", slot, ActDType::act, {R, C}));
  d.push_back(own(k, "dln", "dln", slot, ActDType::act, {R, C}));
  if (k.vocab_parallel_loss) {
    d.push_back(own(k, "loss_rowmax", "vocab-parallel loss rowmax", slot, ActDType::f32, {chunk}));
    d.push_back(own(k, "loss_sums", "vocab-parallel loss sums", slot, ActDType::f32, {2, chunk}));
  }
  return d;
}

int64_t scope_bytes(const std::vector<ActBuffer>& decl, ActScope scope) {
  int64_t n = 0;
  for (const ActBuffer& b : decl)
    if (b.scope == scope) n += b.bytes;
  return n;
}

int64_t arena_bytes(const std::vector<ActBuffer>& decl, int64_t layers, int64_t slots, bool with_rank) {
  return (with_rank ? scope_bytes(decl, ActScope::rank) : 0) +
         slots * (layers * scope_bytes(decl, ActScope::layer) + scope_bytes(decl, ActScope::slot));
}

}  // namespace recipe::core
