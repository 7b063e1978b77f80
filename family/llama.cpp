// The Llama family (model.arch = "llama"): RMSNorm, RoPE, SwiGLU gate|up/down, grouped-query
// attention, no biases and an untied head by default. It computes SwiGLU and RoPE only (its table
// has no fc1/fc2 and no position table); norm, biases and tying are a recipe's choice (LayerNorm
// and biases have their rows here, as the engine computes them). It reads and writes Hugging Face
// Llama (LlamaForCausalLM), whose attention_bias/mlp_bias and tie_word_embeddings carry those, and
// Mistral (MistralForCausalLM: the same tensors and names, no biases); model.hf_architecture picks
// the one export writes and import expects. Both carry Llama 3.1's "llama3" RoPE scaling.
//
// Row order is module order and matters: within each decay group it is the flat buffer order (the
// GPT table's order with the rows Llama lacks left out, so both lay out a Llama model alike).
// Adjacent rows with the same role and part are a pack (q|k|v, gate|up).
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

constexpr unsigned bias = needs_bias, swiglu = needs_swiglu;
constexpr unsigned l_qkv = needs_lora_qkv, l_proj = needs_lora_proj, l_in = needs_lora_mlp_in,
                   l_out = needs_lora_mlp_out;

// One row per line, wider than the usual 120 columns on purpose: the table is read by its columns.
// clang-format off
const std::vector<TensorDecl> kTable = {
//  name                               scope                       role                   part       dims                           shard           decay         init              requires                 Llama HF name
   {"embedding.word.weight",           S::embedding_and_tied_head, R::word_embedding,     P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        always, {{"model.embed_tokens.weight"}}},
   {"layers.{}.attention_norm.weight", S::layer,                   R::attention_norm,     P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.input_layernorm.weight"}}},
   {"layers.{}.attention_norm.bias",   S::layer,                   R::attention_norm,     P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias},
   {"layers.{}.attention.q.weight",    S::layer,                   R::qkv,                P::weight, {D::q_dim, D::hidden},         Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.q_proj.weight"}}},
   {"layers.{}.attention.k.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.k_proj.weight"}}},
   {"layers.{}.attention.v.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"model.layers.{}.self_attn.v_proj.weight"}}},
   {"layers.{}.attention.q.bias",      S::layer,                   R::qkv,                P::bias,   {D::q_dim},                    Sh::column,     G::no_decay,  I::zeros,         bias, {{"model.layers.{}.self_attn.q_proj.bias"}}},
   {"layers.{}.attention.k.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         bias, {{"model.layers.{}.self_attn.k_proj.bias"}}},
   {"layers.{}.attention.v.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         bias, {{"model.layers.{}.self_attn.v_proj.bias"}}},
   {"layers.{}.attention.proj.weight", S::layer,                   R::attention_out,      P::weight, {D::hidden, D::q_dim},         Sh::row,        G::decay,     I::normal_output, always, {{"model.layers.{}.self_attn.o_proj.weight"}}},
   {"layers.{}.attention.proj.bias",   S::layer,                   R::attention_out,      P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         bias, {{"model.layers.{}.self_attn.o_proj.bias"}}},
   {"layers.{}.mlp_norm.weight",       S::layer,                   R::mlp_norm,           P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"model.layers.{}.post_attention_layernorm.weight"}}},
   {"layers.{}.mlp_norm.bias",         S::layer,                   R::mlp_norm,           P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias},
   {"layers.{}.mlp.gate.weight",       S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.gate_proj.weight"}}},
   {"layers.{}.mlp.up.weight",         S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu, {{"model.layers.{}.mlp.up_proj.weight"}}},
   {"layers.{}.mlp.gate.bias",         S::layer,                   R::mlp_in,             P::bias,   {D::ffn},                      Sh::column,     G::no_decay,  I::zeros,         swiglu | bias, {{"model.layers.{}.mlp.gate_proj.bias"}}},
   {"layers.{}.mlp.up.bias",           S::layer,                   R::mlp_in,             P::bias,   {D::ffn},                      Sh::column,     G::no_decay,  I::zeros,         swiglu | bias, {{"model.layers.{}.mlp.up_proj.bias"}}},
   {"layers.{}.mlp.down.weight",       S::layer,                   R::mlp_out,            P::weight, {D::hidden, D::ffn},           Sh::row,        G::decay,     I::normal_output, swiglu, {{"model.layers.{}.mlp.down_proj.weight"}}},
   {"layers.{}.mlp.down.bias",         S::layer,                   R::mlp_out,            P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         swiglu | bias, {{"model.layers.{}.mlp.down_proj.bias"}}},
//  LoRA adapters (peft.kind=lora), one per adapted linear: A [rank, in] (kaiming-uniform), B [out, rank] (zeros), so
//  step 0 is the base model. They shard with their base: column-parallel base (q|k|v, fc1, gate|up): A replicated, B
//  split by output rows (B of q|k|v and of gate|up is a pack, as the base weight); row-parallel base (proj, fc2, down):
//  A split by input columns, B replicated. Adapters have no HF name (PEFT export is its own format).
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
   {"final_norm.bias",                 S::head,                    R::final_norm,         P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias},
   {"lm_head.weight",                  S::head,                    R::lm_head,            P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        needs_untied, {{"lm_head.weight"}}},
};
// clang-format on

// The RoPE keys of both architectures (transformers' RoPE utilities read them alike). rope_theta
// is written both where transformers < 5 reads it and in rope_parameters (5.x); llama3 scaling is
// written in rope_parameters (what transformers 5 saves) and as the top-level rope_scaling object
// transformers 4 reads (transformers 5 reads that one first: the same values). Import reads them
// as a whole (HfArchitecture::rope_scaling; hf/hf_config.cpp): rope_theta from rope_parameters
// where it has one, else from the top level.
std::vector<HfConfigKey> rope_keys(double default_theta) {
  using F = HfField;
  return {
      {.key = "rope_theta", .field = F::rope_theta, .fallback = default_theta, .in_rope_parameters = true},
      {.key = "rope_parameters.rope_type", .field = F::rope_type, .io = hf_write},
      {.key = "rope_parameters.rope_theta", .field = F::rope_theta, .io = hf_write},
      {.key = "rope_parameters.factor", .field = F::rope_factor, .io = hf_write, .scaled_only = true},
      {.key = "rope_parameters.low_freq_factor", .field = F::rope_low_freq_factor, .io = hf_write, .scaled_only = true},
      {.key = "rope_parameters.high_freq_factor",
       .field = F::rope_high_freq_factor,
       .io = hf_write,
       .scaled_only = true},
      {.key = "rope_parameters.original_max_position_embeddings",
       .field = F::rope_original_max_positions,
       .io = hf_write,
       .scaled_only = true},
      {.key = "rope_scaling.rope_type", .field = F::rope_type, .io = hf_write, .scaled_only = true},
      {.key = "rope_scaling.factor", .field = F::rope_factor, .io = hf_write, .scaled_only = true},
      {.key = "rope_scaling.low_freq_factor", .field = F::rope_low_freq_factor, .io = hf_write, .scaled_only = true},
      {.key = "rope_scaling.high_freq_factor", .field = F::rope_high_freq_factor, .io = hf_write, .scaled_only = true},
      {.key = "rope_scaling.original_max_position_embeddings",
       .field = F::rope_original_max_positions,
       .io = hf_write,
       .scaled_only = true},
  };
}

// transformers' LlamaConfig: the keys export writes (in this order) and import checks, with the
// defaults LlamaConfig gives an absent key.
HfArchitecture llama() {
  HfArchitecture h{.model_type = "llama",
                   .class_name = "LlamaForCausalLM",
                   .base_prefix = "model.",
                   .flags = {.layernorm = false, .gelu = false, .learned_positions = false},
                   .fixed = flag_norm | flag_activation | flag_positions,
                   .computes = "rmsnorm, swiglu, rope",
                   .weights_before_biases = true,
                   .rope_scaling = true};
  using F = HfField;
  h.config = {
      {.key = "vocab_size", .field = F::vocab, .no_default = true},
      {.key = "hidden_size", .field = F::hidden, .fallback = 4096},
      {.key = "intermediate_size", .field = F::ffn, .fallback = 11008},
      {.key = "num_hidden_layers", .field = F::layers, .fallback = 32},
      {.key = "num_attention_heads", .field = F::heads, .fallback = 32},
      {.key = "num_key_value_heads", .field = F::kv_heads, .fallback = 1, .times = "num_attention_heads"},
      {.key = "head_dim", .field = F::head_dim, .fallback = 1, .times = "hidden_size", .over = "num_attention_heads"},
      {.key = "hidden_act", .value = "\"silu\"", .accepted = {"\"silu\""}, .why = "the engine's SwiGLU uses silu"},
      {.key = "max_position_embeddings", .field = F::max_positions, .io = hf_write},
      {.key = "rms_norm_eps", .field = F::norm_eps, .fallback = 1e-6},
  };
  for (HfConfigKey& k : rope_keys(10000.0)) h.config.push_back(k);
  h.config.insert(h.config.end(), {
                                      {.key = "attention_bias", .field = F::bias, .fallback = 0},
                                      {.key = "mlp_bias", .field = F::bias, .fallback = 0},
                                      {.key = "attention_dropout", .io = hf_write, .value = "0.0"},
                                      {.key = "pretraining_tp", .io = hf_write, .value = "1"},
                                      {.key = "initializer_range", .field = F::init_std, .io = hf_write},
                                      {.key = "tie_word_embeddings", .field = F::tied, .fallback = 0},
                                      {.key = "use_cache", .io = hf_write, .value = "true"},
                                  });
  return h;
}

// transformers' MistralConfig (Mistral 7B v0.1-v0.3): Llama's tensors and names, computed alike
// (RMSNorm, SwiGLU, RoPE with rotate-half pairs, GQA), without biases (its linears have none, so
// model.bias=true has no Mistral equivalent) and with sliding_window, whose default (4096) is a
// window: an absent key is one. The engine has no sliding-window attention; import accepts only
// null or a window no position can reach past (hf/hf_config.cpp says why that is full attention).
HfArchitecture mistral() {
  HfArchitecture h{.model_type = "mistral",
                   .class_name = "MistralForCausalLM",
                   .base_prefix = "model.",
                   .flags = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false},
                   .fixed = flag_norm | flag_activation | flag_positions | flag_bias,
                   .computes = "rmsnorm, swiglu, rope, no biases",
                   .weights_before_biases = true,
                   .rope_scaling = true,
                   .names_column = 0};
  using F = HfField;
  h.config = {
      {.key = "vocab_size", .field = F::vocab, .no_default = true},
      {.key = "hidden_size", .field = F::hidden, .fallback = 4096},
      {.key = "intermediate_size", .field = F::ffn, .fallback = 14336},
      {.key = "num_hidden_layers", .field = F::layers, .fallback = 32},
      {.key = "num_attention_heads", .field = F::heads, .fallback = 32},
      {.key = "num_key_value_heads", .field = F::kv_heads, .fallback = 8},
      {.key = "head_dim", .field = F::head_dim, .fallback = 1, .times = "hidden_size", .over = "num_attention_heads"},
      {.key = "hidden_act", .value = "\"silu\"", .accepted = {"\"silu\""}, .why = "the engine's SwiGLU uses silu"},
      {.key = "max_position_embeddings", .field = F::max_positions, .io = hf_write},
      {.key = "rms_norm_eps", .field = F::norm_eps, .fallback = 1e-6},
  };
  for (HfConfigKey& k : rope_keys(10000.0)) h.config.push_back(k);
  h.config.insert(h.config.end(), {
                                      {.key = "sliding_window", .field = F::sliding_window, .fallback = 4096},
                                      {.key = "attention_dropout", .io = hf_write, .value = "0.0"},
                                      {.key = "initializer_range", .field = F::init_std, .io = hf_write},
                                      {.key = "tie_word_embeddings", .field = F::tied, .fallback = 0},
                                      {.key = "use_cache", .io = hf_write, .value = "true"},
                                  });
  return h;
}

}  // namespace

const Family& llama_family() {
  static const Family f{
      .arch = "llama",
      .summary = "Llama: rmsnorm, swiglu, rope, grouped-query attention, no biases, untied head by default",
      .defaults = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false, .tied = false},
      .fixed = flag_activation | flag_positions | flag_qk_norm,
      .tensors = kTable,
      .hf = {llama(), mistral()},
      // HF Llama's module names: o_proj and down_proj are whole linears; q|k|v and gate|up are fused
      // here, so their HF parts adapt only together.
      .lora_names = {{"o_proj", lora_proj}, {"down_proj", lora_mlp_out}},
      .lora_groups = {{{"q_proj", "k_proj", "v_proj"}, lora_qkv, "qkv"},
                      {{"gate_proj", "up_proj"}, lora_mlp_in, "fc1"}},
  };
  return f;
}

}  // namespace recipe::core
