// The activation declaration: the one list of buffers a model's activation arena holds on one rank.
// core/model/activations.cpp carves exactly this list (in this order) out of one allocation of
// arena_bytes(); plan/memory_estimate.cpp sums the same list, so the estimate is the carve, to the
// byte. Dependency-free (plain structs in, plain structs out): what a buffer is for, when it lives
// and how big it is are said here once.
//
// Per layer (act dtype unless noted; N = B·T rows (T after context parallelism), QKV = (Hq+2·Hkv)·D,
// FI = F (GELU) or 2F (SwiGLU); R = this rank's rows of the residual stream: N, or N/sp with
// sequence parallelism) and the most memory-saving recompute level that still keeps it:
//   residual [R,C]     layer input (the residual stream)              full
//   ln1 [R,C]                                                         gelu
//   ln1_mean [R] f32 (LayerNorm only), ln1_rstd [R] f32               norm
//   qkv [N,QKV]        after RoPE when the model uses it; with qk-norm the q|k|v projection's
//                      output itself (before the norm and RoPE)        norm
//   atty [N,Hq·D], lse [B,Hq,T] f32                                   norm
//   residual2 [R,C]    residual + attention projection                norm
//   ln2 [R,C]                                                         gelu
//   ln2_mean/ln2_rstd [R] f32                                         norm
//   fc_pre [N,FI]      GELU: pre-activation of fc1; SwiGLU: [gate|up] norm
//   fc_act [N,F]       GELU / SwiGLU output (input of fc2 / down)     none
// A buffer the level drops is rebuilt in backward from what is kept, into one buffer of the rank:
//   gelu  fc_act → the transient region's fc_act view (llm.c's default, -r 1)
//   norm  also ln1/ln2 → one shared [R,C] "ln (shared, recomputed)" (the saved mean/rstd stay)
//   full  everything but residual → one scratch set (fc_act still in the transient region)
//
// Once per rank (shared by every micro-batch slot and every model chunk; each lives only inside one
// layer's forward or backward, or inside the classifier), ONE "transient" region overlaid by hand:
//   offset 0:        logits chunk [chunk,Vl]       classifier only (classifier_chunk_rows)
//   offset 0:        fc_act [N,F] (gelu/norm/full) fc1 forward → fc2 forward; fc2 backward
//   after fc_act:    dfc [N,FI], then dfc_act [N,F] (SwiGLU)      MLP backward
//   after fc_act:    proj_out [R,C]                 forward: projection output before the residual add
//   offset 0:        datty [N,Hq·D], then dqkv [N,QKV]            attention backward
//   after dqkv:      qkv_normed [N,QKV] (qk-norm only)            attention forward; attention backward
// qk-norm (Qwen3) keeps no buffer per layer: the layer's qkv holds the projection's output, and
// qkv_normed = rope(qk_norm(qkv)), what attention reads, is built in the transient region right
// before the attention forward and rebuilt (two elementwise passes) right before its backward,
// beside datty and dqkv; the qk-norm backward recomputes each head's rstd from the saved qkv.
// No op reads and writes overlapping parts of the region, and no part is live across two phases.
// Then the shared ln (norm), sequence parallelism's two [N,C] whole-row buffers (the rows a linear,
// the embedding or the classifier gathers or reduce-scatters; their own region, since inside one
// linear call they sit beside tensors of the transient region) and the scratch set (full).
//
// Per slot (micro-batch in flight): its saved layers, then final residual/norm (+ stats) [R,C],
// token ids and targets i32 [N], positions i32 [N] (packed), dresidual [R,C] (the gradient handed
// between pipeline stages), dln [R,C] (the classifier's d(final norm)), and on the last stage under
// tensor parallelism the vocab-parallel loss scratch: rowmax f32 [chunk], sums f32 [2,chunk].
//
// Every buffer starts at a multiple of kActAlign bytes and takes a multiple of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recipe::core {

constexpr int64_t kActAlign = 256;
constexpr int64_t act_align(int64_t bytes) { return (bytes + kActAlign - 1) / kActAlign * kActAlign; }

// trainer.recompute's levels in increasing order of memory saved (the same order as plan::Recompute,
// which core converts; the family library reads no plan).
enum class ActRecompute : uint8_t { none, gelu, norm, full };

// `act`: the backend's activation dtype (ActivationKnobs::act_bytes per element).
enum class ActDType : uint8_t { act, f32, i32 };

// How often a buffer exists in an arena: once per rank, once per micro-batch slot, or once per layer
// of each slot.
enum class ActScope : uint8_t { rank, slot, layer };

// A tensor laid out by hand inside a region buffer, at a byte offset from the region's start.
struct ActView {
  const char* key;
  ActDType dtype;
  std::vector<int64_t> shape;
  int64_t offset = 0;
};

struct ActBuffer {
  // The tensor it becomes (a field of core::LayerActs / core::Activations; at rank scope the layer
  // keys name the scratch set of recompute = full) and its name in the arena's breakdown.
  const char* key;
  const char* label;
  ActScope scope;
  ActDType dtype;
  std::vector<int64_t> shape;  // empty for a region (its views say what it holds)
  int64_t bytes = 0;           // aligned: what the buffer takes in the arena
  std::vector<ActView> views;
};

// What the declaration needs, all on one rank: the model's dimensions after tensor parallelism
// (heads, kv_heads, ffn and padded_vocab already divided by tp) and context parallelism (seq = the
// rank's tokens of a sample), and the execution knobs that change the buffers.
struct ActivationKnobs {
  int64_t micro_batch = 0, seq = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, padded_vocab = 0;
  bool layernorm = true;      // false: RMSNorm (no mean statistics)
  bool gelu = true;           // false: SwiGLU ([gate|up] and its gradient)
  bool qk_norm = false;       // qk-norm: the transient region's qkv_normed
  bool packed = false;        // sequences hold several samples: per-token positions
  int sequence_parallel = 1;  // ≥ 1
  ActRecompute recompute = ActRecompute::none;
  int64_t act_bytes = 4;  // bytes per element of the activation dtype (CPU f32, CUDA bf16)
  // trainer.classifier_chunk_rows (resolved; must be ≥ 1 for a carve).
  int64_t classifier_chunk_rows = 0;
  // The last pipeline stage under tensor parallelism: the vocab-parallel loss keeps its row
  // maxima and sums per slot.
  bool vocab_parallel_loss = false;

  int64_t rows() const { return micro_batch * seq; }                    // N
  int64_t residual_rows() const { return rows() / sequence_parallel; }  // R
  int64_t q_dim() const { return heads * head_dim; }
  int64_t qkv_dim() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t fc_in_rows() const { return gelu ? ffn : 2 * ffn; }
};

// The part of the transient region the layers' buffers need (fc_act when shared, dfc (+ dfc_act)
// | proj_out | datty, dqkv (+ qkv_normed)), unaligned: the room the classifier's logits chunk gets for free.
int64_t layers_transient_bytes(const ActivationKnobs& k);

// The declaration: rank-scope buffers first, then one layer's, then one slot's own, in carve order.
// Throws std::logic_error when classifier_chunk_rows < 1 (an unresolved plan). Rows that
// sequence_parallel does not divide are the caller's to refuse (the resolver, core's knobs).
std::vector<ActBuffer> declare_activations(const ActivationKnobs& k);

// Bytes of the arena holding `slots` micro-batches of `decl` (declared for `layers` layers);
// with_rank = false: a model chunk that borrows another chunk's rank-scope buffers.
int64_t arena_bytes(const std::vector<ActBuffer>& decl, int64_t layers, int64_t slots, bool with_rank = true);
// Bytes of the buffers of one scope.
int64_t scope_bytes(const std::vector<ActBuffer>& decl, ActScope scope);

}  // namespace recipe::core
