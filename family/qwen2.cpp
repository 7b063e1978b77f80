// The Qwen2 family (model.arch = "qwen2"; Qwen2 and Qwen2.5 dense models): Llama's block — RMSNorm,
// RoPE, SwiGLU gate|up/down, grouped-query attention — with biases on the q, k and v projections
// and on no other linear (o_proj and the MLP have none). It computes exactly that: norm,
// activation, positions and biases are fixed (model.bias=false means "no biases beyond q/k/v"; the
// q/k/v bias rows below are present whatever it says, by this family's own table), tying is a
// recipe's choice (Qwen2.5 0.5B/1.5B tie, 7B does not). It reads and writes Hugging Face Qwen2
// (Qwen2ForCausalLM).
//
// Row order is module order and matters: within each decay group it is the flat buffer order (the
// GPT table's order with the rows Qwen2 lacks left out, so a Qwen2 model lays out as a GPT/Llama
// model with biases would, less the o_proj and MLP biases). Adjacent rows with the same role and
// part are a pack (q|k|v weights, q|k|v biases, gate|up): the q|k|v bias pack is added in the qkv
// GEMM's epilogue and sharded by column like the weights (each TP rank its heads' rows of q, k, v).
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

constexpr unsigned swiglu = needs_swiglu;
constexpr unsigned l_qkv = needs_lora_qkv, l_proj = needs_lora_proj, l_in = needs_lora_mlp_in,
                   l_out = needs_lora_mlp_out;

// One row per line, wider than the usual 120 columns on purpose: the table is read by its columns.
// clang-format off
const std::vector<TensorDecl> kTable = {
//  name                               scope                       role                   part       dims                           shard           decay         init              requires                 Qwen2 HF name
   {"embedding.word.weight",           S::embedding_and_tied_head, R::word_embedding,     P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        always, {{"model.embed_tokens.weight"}}},
   {"layers.{}.attention_norm.weight", S::layer,                   R::attention_norm,     P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.input_layernorm.weight"}}},
   {"layers.{}.attention.q.weight",    S::layer,                   R::qkv,                P::weight, {D::q_dim, D::hidden},         Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.q_proj.weight"}}},
   {"layers.{}.attention.k.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.k_proj.weight"}}},
   {"layers.{}.attention.v.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.v_proj.weight"}}},
   {"layers.{}.attention.q.bias",      S::layer,                   R::qkv,                P::bias,   {D::q_dim},                    Sh::column,     G::no_decay,  I::zeros,         always, {{"model.layers.{}.self_attn.q_proj.bias"}}},
   {"layers.{}.attention.k.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         always, {{"model.layers.{}.self_attn.k_proj.bias"}}},
   {"layers.{}.attention.v.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         always, {{"model.layers.{}.self_attn.v_proj.bias"}}},
   {"layers.{}.attention.proj.weight", S::layer,                   R::attention_out,      P::weight, {D::hidden, D::q_dim},         Sh::row,        G::decay,     I::normal_output, always, {{"model.layers.{}.self_attn.o_proj.weight"}}},
   {"layers.{}.mlp_norm.weight",       S::layer,                   R::mlp_norm,           P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.post_attention_layernorm.weight"}}},
   {"layers.{}.mlp.gate.weight",       S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.gate_proj.weight"}}},
   {"layers.{}.mlp.up.weight",         S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.up_proj.weight"}}},
   {"layers.{}.mlp.down.weight",       S::layer,                   R::mlp_out,            P::weight, {D::hidden, D::ffn},           Sh::row,        G::decay,     I::normal_output, swiglu, {{"model.layers.{}.mlp.down_proj.weight"}}},
//  LoRA adapters (peft.kind=lora), as Llama's (family/llama.cpp): the adapters adapt the weights only; the q|k|v
//  biases stay frozen with the base (HF PEFT's bias="none"), and a merged export keeps them as they are.
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

// transformers' Qwen2Config: the keys export writes (in this order) and import checks, with the
// defaults Qwen2Config gives an absent key. Qwen2Config has no attention_bias/mlp_bias: Qwen2's
// q/k/v biases are always there and its other linears never have one (the table above).
// rope_theta is written both where transformers < 5 reads it and in rope_parameters (5.x).
//
// Sliding-window attention: transformers' Qwen2 uses it only with use_sliding_window=true (its
// config then sets sliding_window on the layers from max_window_layers on); with
// use_sliding_window=false it sets sliding_window to None and every layer attends to the whole
// causal prefix. The engine has no sliding-window attention, so use_sliding_window=true is refused,
// and sliding_window and max_window_layers — which Qwen2.5's config.json files carry with
// use_sliding_window=false — are not read: transformers ignores them then too. layer_types
// (transformers 5 writes it) must name full attention on every layer.
HfArchitecture qwen2() {
  HfArchitecture h{.model_type = "qwen2",
                   .class_name = "Qwen2ForCausalLM",
                   .base_prefix = "model.",
                   .flags = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false},
                   .fixed = flag_norm | flag_activation | flag_positions | flag_bias,
                   .computes = "rmsnorm, swiglu, rope, q/k/v biases only"};
  using F = HfField;
  const char* plain_rope =
      "the engine computes plain RoPE only (no YaRN or other scaled positions): remove rope_scaling from "
      "config.json (Qwen2.5 ships without it; its model cards add YaRN only to read past 32768 tokens)";
  h.config = {
      {.key = "vocab_size", .field = F::vocab, .no_default = true},
      {.key = "hidden_size", .field = F::hidden, .fallback = 4096},
      {.key = "intermediate_size", .field = F::ffn, .fallback = 22016},
      {.key = "num_hidden_layers", .field = F::layers, .fallback = 32},
      {.key = "num_attention_heads", .field = F::heads, .fallback = 32},
      {.key = "num_key_value_heads", .field = F::kv_heads, .fallback = 1, .times = "num_attention_heads"},
      // Qwen2Config has no head_dim, but the model reads one when config.json has it.
      {.key = "head_dim", .field = F::head_dim, .fallback = 1, .times = "hidden_size", .over = "num_attention_heads"},
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
      {.key = "rope_scaling", .io = hf_check, .value = "null", .accepted = {"null"}, .why = plain_rope},
      {.key = "use_sliding_window",
       .value = "false",
       .accepted = {"false"},
       .why = "the engine has no sliding-window attention (every layer attends to the whole causal prefix)"},
      {.key = "layer_types",
       .io = hf_check,
       .value = "null",
       .accepted = {"\"full_attention\""},
       .why = "the engine has no sliding-window attention: every entry must be \"full_attention\"",
       .each = true},
      {.key = "attention_dropout",
       .value = "0.0",
       .accepted = {"0.0"},
       .why = "the engine trains without attention dropout"},
      {.key = "initializer_range", .field = F::init_std, .io = hf_write},
      {.key = "tie_word_embeddings", .field = F::tied, .fallback = 0},
      {.key = "use_cache", .io = hf_write, .value = "true"},
  };
  return h;
}

}  // namespace

const Family& qwen2_family() {
  static const Family f{
      .arch = "qwen2",
      .summary =
          "Qwen2/Qwen2.5: rmsnorm, swiglu, rope, grouped-query attention, biases on q/k/v only, untied head "
          "by default",
      .defaults = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false, .tied = false},
      .fixed = flag_norm | flag_activation | flag_positions | flag_bias | flag_qk_norm,
      .tensors = kTable,
      .hf = {qwen2()},
      // HF Qwen2's module names, as Llama's: o_proj and down_proj are whole linears; q|k|v and
      // gate|up are fused here, so their HF parts adapt only together.
      .lora_names = {{"o_proj", lora_proj}, {"down_proj", lora_mlp_out}},
      .lora_groups = {{{"q_proj", "k_proj", "v_proj"}, lora_qkv, "qkv"},
                      {{"gate_proj", "up_proj"}, lora_mlp_in, "fc1"}},
  };
  return f;
}

}  // namespace recipe::core
