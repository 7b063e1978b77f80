// The Qwen3 dense family (model.arch = "qwen3"): Llama's block (RMSNorm, RoPE, SwiGLU gate|up/down,
// grouped-query attention, no biases) plus qk-norm: an RMSNorm over each head's q and each head's k
// vector (weights q_norm/k_norm, [head_dim] each, eps = model.norm_eps) applied right after the
// q|k|v projection and before RoPE. head_dim is its own key (Qwen3-0.6B: hidden 1024, 16 heads of
// 128). It computes those parts only; tying the embeddings is a recipe's choice. It reads and writes
// Hugging Face Qwen3 (Qwen3ForCausalLM).
//
// Row order is module order and matters (the flat buffer order within each decay group): Llama's,
// with q_norm and k_norm after q|k|v (HF's module order: q, k, v, o projections, then the norms;
// the norms sit in another decay group than the projections, so only their order among the other
// no-decay rows matters). Both norms are replicated under tensor parallelism: every rank holds the
// whole [head_dim] weights and its heads' gradient contributions are summed over the TP group
// (core/model/model.hpp).
#include "family/registry.hpp"

namespace recipe::core {

namespace {

using D = Dim;
using S = Scope;
using R = Role;
using P = Part;
using Sh = Shard;
using G = DecayGroup;
using I = InitKind;

constexpr unsigned swiglu = needs_swiglu, qk = needs_qk_norm;
constexpr unsigned l_qkv = needs_lora_qkv, l_proj = needs_lora_proj, l_in = needs_lora_mlp_in,
                   l_out = needs_lora_mlp_out;

// One row per line, wider than the usual 120 columns on purpose: the table is read by its columns.
// clang-format off
const std::vector<TensorDecl> kTable = {
//  name                               scope                       role                   part       dims                           shard           decay         init              requires                 Qwen3 HF name
   {"embedding.word.weight",           S::embedding_and_tied_head, R::word_embedding,     P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        always, {{"model.embed_tokens.weight"}}},
   {"layers.{}.attention_norm.weight", S::layer,                   R::attention_norm,     P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.input_layernorm.weight"}}},
   {"layers.{}.attention.q.weight",    S::layer,                   R::qkv,                P::weight, {D::q_dim, D::hidden},         Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.q_proj.weight"}}},
   {"layers.{}.attention.k.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.k_proj.weight"}}},
   {"layers.{}.attention.v.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.v_proj.weight"}}},
   {"layers.{}.attention.q_norm.weight", S::layer,                 R::q_norm,             P::weight, {D::head_dim},                 Sh::replicated, G::no_decay,  I::ones,          qk, {{"model.layers.{}.self_attn.q_norm.weight"}}},
   {"layers.{}.attention.k_norm.weight", S::layer,                 R::k_norm,             P::weight, {D::head_dim},                 Sh::replicated, G::no_decay,  I::ones,          qk, {{"model.layers.{}.self_attn.k_norm.weight"}}},
   {"layers.{}.attention.proj.weight", S::layer,                   R::attention_out,      P::weight, {D::hidden, D::q_dim},         Sh::row,        G::decay,     I::normal_output, always, {{"model.layers.{}.self_attn.o_proj.weight"}}},
   {"layers.{}.mlp_norm.weight",       S::layer,                   R::mlp_norm,           P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.post_attention_layernorm.weight"}}},
   {"layers.{}.mlp.gate.weight",       S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.gate_proj.weight"}}},
   {"layers.{}.mlp.up.weight",         S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.up_proj.weight"}}},
   {"layers.{}.mlp.down.weight",       S::layer,                   R::mlp_out,            P::weight, {D::hidden, D::ffn},           Sh::row,        G::decay,     I::normal_output, swiglu, {{"model.layers.{}.mlp.down_proj.weight"}}},
//  LoRA adapters (peft.kind=lora), as Llama's (family/llama.cpp says how they shard).
   {"layers.{}.attention.qkv.lora_a.weight", S::layer,           R::qkv,                P::lora_a, {D::lora_rank, D::hidden},     Sh::replicated, G::decay,     I::kaiming_uniform, l_qkv},
   {"layers.{}.attention.q.lora_b.weight", S::layer,             R::qkv,                P::lora_b, {D::q_dim, D::lora_rank},      Sh::column,     G::decay,     I::zeros,         l_qkv},
   {"layers.{}.attention.k.lora_b.weight", S::layer,             R::qkv,                P::lora_b, {D::kv_dim, D::lora_rank},     Sh::column,     G::decay,     I::zeros,         l_qkv},
   {"layers.{}.attention.v.lora_b.weight", S::layer,             R::qkv,                P::lora_b, {D::kv_dim, D::lora_rank},     Sh::column,     G::decay,     I::zeros,         l_qkv},
   {"layers.{}.attention.proj.lora_a.weight", S::layer,          R::attention_out,      P::lora_a, {D::lora_rank, D::q_dim},      Sh::row,        G::decay,     I::kaiming_uniform, l_proj},
   {"layers.{}.attention.proj.lora_b.weight", S::layer,          R::attention_out,      P::lora_b, {D::hidden, D::lora_rank},     Sh::replicated, G::decay,     I::zeros,         l_proj},
   {"layers.{}.mlp.gate_up.lora_a.weight", S::layer,             R::mlp_in,             P::lora_a, {D::lora_rank, D::hidden},     Sh::replicated, G::decay,     I::kaiming_uniform, swiglu | l_in},
   {"layers.{}.mlp.gate.lora_b.weight",    S::layer,             R::mlp_in,             P::lora_b, {D::ffn, D::lora_rank},        Sh::column,     G::decay,     I::zeros,         swiglu | l_in},
   {"layers.{}.mlp.up.lora_b.weight",      S::layer,             R::mlp_in,             P::lora_b, {D::ffn, D::lora_rank},        Sh::column,     G::decay,     I::zeros,         swiglu | l_in},
   {"layers.{}.mlp.down.lora_a.weight",    S::layer,             R::mlp_out,            P::lora_a, {D::lora_rank, D::ffn},        Sh::row,        G::decay,     I::kaiming_uniform, swiglu | l_out},
   {"layers.{}.mlp.down.lora_b.weight",    S::layer,             R::mlp_out,            P::lora_b, {D::hidden, D::lora_rank},     Sh::replicated, G::decay,     I::zeros,         swiglu | l_out},
   {"final_norm.weight",               S::head,                    R::final_norm,         P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.norm.weight"}}},
   {"lm_head.weight",                  S::head,                    R::lm_head,            P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        needs_untied, {{"lm_head.weight"}}},
};
// clang-format on

// transformers' Qwen3Config: the keys export writes (in this order) and import checks, with the
// defaults Qwen3Config gives an absent key. As Llama's, rope_theta is written both at the top level
// (transformers < 5) and in rope_parameters (5.x). Sliding-window attention and biases are parts the
// engine does not compute: config.json values that ask for them are refused by key.
HfArchitecture qwen3() {
  HfArchitecture h{
      .model_type = "qwen3",
      .class_name = "Qwen3ForCausalLM",
      .base_prefix = "model.",
      .flags = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false, .qk_norm = true},
      .fixed = flag_norm | flag_activation | flag_positions | flag_bias | flag_qk_norm,
      .computes = "rmsnorm, swiglu, rope, qk-norm, no biases",
      .weights_before_biases = true};
  using F = HfField;
  const char* plain_rope = "the engine has plain RoPE only";
  h.config = {
      {.key = "vocab_size", .field = F::vocab, .no_default = true},
      {.key = "hidden_size", .field = F::hidden, .fallback = 4096},
      {.key = "intermediate_size", .field = F::ffn, .fallback = 22016},
      {.key = "num_hidden_layers", .field = F::layers, .fallback = 32},
      {.key = "num_attention_heads", .field = F::heads, .fallback = 32},
      {.key = "num_key_value_heads", .field = F::kv_heads, .fallback = 32},
      {.key = "head_dim", .field = F::head_dim, .fallback = 128},
      {.key = "hidden_act", .value = "\"silu\"", .accepted = {"\"silu\""}, .why = "the engine's SwiGLU uses silu"},
      {.key = "max_position_embeddings", .field = F::max_positions, .io = hf_write},
      {.key = "rms_norm_eps", .field = F::norm_eps, .fallback = 1e-6},
      {.key = "rope_theta", .field = F::rope_theta, .fallback = 10000.0, .in_rope_parameters = true},
      {.key = "rope_parameters.rope_type",
       .value = "\"default\"",
       .accepted = {"\"default\""},
       .why = plain_rope,
       .in_rope_parameters = true},
      {.key = "rope_parameters.rope_theta", .field = F::rope_theta, .io = hf_write},
      {.key = "rope_scaling",
       .io = hf_check,
       .value = "null",
       .accepted = {"null"},
       .why = "the engine has plain RoPE only (no scaled positions)"},
      {.key = "attention_bias",
       .value = "false",
       .accepted = {"false"},
       .why = "model.arch=qwen3 has no biases (the engine's qwen3 computes attention without them)"},
      {.key = "use_sliding_window",
       .value = "false",
       .accepted = {"false"},
       .why = "the engine has no sliding-window attention (every layer attends to the whole causal context)"},
      {.key = "attention_dropout", .io = hf_write, .value = "0.0"},
      {.key = "initializer_range", .field = F::init_std, .io = hf_write},
      {.key = "tie_word_embeddings", .field = F::tied, .fallback = 0},
      {.key = "use_cache", .io = hf_write, .value = "true"},
  };
  return h;
}

}  // namespace

const Family& qwen3_family() {
  static const Family f{
      .arch = "qwen3",
      .summary =
          "Qwen3: rmsnorm, swiglu, rope, grouped-query attention with per-head q/k rmsnorm (qk-norm), no "
          "biases, untied head by default",
      .defaults = {.layernorm = false,
                   .gelu = false,
                   .learned_positions = false,
                   .bias = false,
                   .tied = false,
                   .qk_norm = true},
      .fixed = flag_norm | flag_activation | flag_positions | flag_bias | flag_qk_norm,
      .tensors = kTable,
      .hf = {qwen3()},
      // HF Qwen3's module names are Llama's.
      .lora_names = {{"o_proj", lora_proj}, {"down_proj", lora_mlp_out}},
      .lora_groups = {{{"q_proj", "k_proj", "v_proj"}, lora_qkv, "qkv"},
                      {{"gate_proj", "up_proj"}, lora_mlp_in, "fc1"}},
  };
  return f;
}

}  // namespace recipe::core
