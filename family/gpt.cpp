// The GPT family (model.arch = "gpt"): Megatron's GPT model. Its defaults are GPT-2/GPT-3's block
// (LayerNorm, learned positions, GELU fc1/fc2, biases, tied head), and like Megatron's GPTModel it
// computes every mix of those flags (RMSNorm, RoPE, SwiGLU gate|up/down, no biases, untied), so its
// table holds every row and the flags pick them (see tensor_table.hpp for what each column means).
// It reads and writes Hugging Face GPT-2 (GPT2LMHeadModel), which computes only the default block.
//
// Row order is module order and matters: within each decay group it is the flat buffer order, and
// it is GPT-2's HF tensor order. Adjacent rows with the same role and part are a pack (q|k|v,
// gate|up); GPT-2's c_attn is the q|k|v pack under one HF name, stored transposed like every
// GPT-2 Conv1D weight.
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

constexpr unsigned bias = needs_bias, gelu = needs_gelu, swiglu = needs_swiglu;
constexpr unsigned l_qkv = needs_lora_qkv, l_proj = needs_lora_proj, l_in = needs_lora_mlp_in,
                   l_out = needs_lora_mlp_out;

// One row per line, wider than the usual 120 columns on purpose: the table is read by its columns.
// clang-format off
const std::vector<TensorDecl> kTable = {
//  name                               scope                       role                   part       dims                           shard           decay         init              requires                 GPT-2 HF name (, transposed)
   {"embedding.word.weight",           S::embedding_and_tied_head, R::word_embedding,     P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        always, {{"transformer.wte.weight"}}},
   {"embedding.position.weight",       S::embedding,               R::position_embedding, P::weight, {D::max_positions, D::hidden}, Sh::replicated, G::embedding, I::normal,        needs_learned_positions, {{"transformer.wpe.weight"}}},
   {"layers.{}.attention_norm.weight", S::layer,                   R::attention_norm,     P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"transformer.h.{}.ln_1.weight"}}},
   {"layers.{}.attention_norm.bias",   S::layer,                   R::attention_norm,     P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias, {{"transformer.h.{}.ln_1.bias"}}},
   {"layers.{}.attention.q.weight",    S::layer,                   R::qkv,                P::weight, {D::q_dim, D::hidden},         Sh::column,     G::decay,     I::normal,        always, {{"transformer.h.{}.attn.c_attn.weight", true}}},
   {"layers.{}.attention.k.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"transformer.h.{}.attn.c_attn.weight", true}}},
   {"layers.{}.attention.v.weight",    S::layer,                   R::qkv,                P::weight, {D::kv_dim, D::hidden},        Sh::column,     G::decay,     I::normal,        always, {{"transformer.h.{}.attn.c_attn.weight", true}}},
   {"layers.{}.attention.q.bias",      S::layer,                   R::qkv,                P::bias,   {D::q_dim},                    Sh::column,     G::no_decay,  I::zeros,         bias, {{"transformer.h.{}.attn.c_attn.bias"}}},
   {"layers.{}.attention.k.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         bias, {{"transformer.h.{}.attn.c_attn.bias"}}},
   {"layers.{}.attention.v.bias",      S::layer,                   R::qkv,                P::bias,   {D::kv_dim},                   Sh::column,     G::no_decay,  I::zeros,         bias, {{"transformer.h.{}.attn.c_attn.bias"}}},
   {"layers.{}.attention.proj.weight", S::layer,                   R::attention_out,      P::weight, {D::hidden, D::q_dim},         Sh::row,        G::decay,     I::normal_output, always, {{"transformer.h.{}.attn.c_proj.weight", true}}},
   {"layers.{}.attention.proj.bias",   S::layer,                   R::attention_out,      P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         bias, {{"transformer.h.{}.attn.c_proj.bias"}}},
   {"layers.{}.mlp_norm.weight",       S::layer,                   R::mlp_norm,           P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"transformer.h.{}.ln_2.weight"}}},
   {"layers.{}.mlp_norm.bias",         S::layer,                   R::mlp_norm,           P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias, {{"transformer.h.{}.ln_2.bias"}}},
   {"layers.{}.mlp.fc1.weight",        S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        gelu, {{"transformer.h.{}.mlp.c_fc.weight", true}}},
   {"layers.{}.mlp.fc1.bias",          S::layer,                   R::mlp_in,             P::bias,   {D::ffn},                      Sh::column,     G::no_decay,  I::zeros,         gelu | bias, {{"transformer.h.{}.mlp.c_fc.bias"}}},
   {"layers.{}.mlp.fc2.weight",        S::layer,                   R::mlp_out,            P::weight, {D::hidden, D::ffn},           Sh::row,        G::decay,     I::normal_output, gelu, {{"transformer.h.{}.mlp.c_proj.weight", true}}},
   {"layers.{}.mlp.fc2.bias",          S::layer,                   R::mlp_out,            P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         gelu | bias, {{"transformer.h.{}.mlp.c_proj.bias"}}},
   {"layers.{}.mlp.gate.weight",       S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu},
   {"layers.{}.mlp.up.weight",         S::layer,                   R::mlp_in,             P::weight, {D::ffn, D::hidden},           Sh::column,     G::decay,     I::normal,        swiglu},
   {"layers.{}.mlp.gate.bias",         S::layer,                   R::mlp_in,             P::bias,   {D::ffn},                      Sh::column,     G::no_decay,  I::zeros,         swiglu | bias},
   {"layers.{}.mlp.up.bias",           S::layer,                   R::mlp_in,             P::bias,   {D::ffn},                      Sh::column,     G::no_decay,  I::zeros,         swiglu | bias},
   {"layers.{}.mlp.down.weight",       S::layer,                   R::mlp_out,            P::weight, {D::hidden, D::ffn},           Sh::row,        G::decay,     I::normal_output, swiglu},
   {"layers.{}.mlp.down.bias",         S::layer,                   R::mlp_out,            P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         swiglu | bias},
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
   {"layers.{}.mlp.fc1.lora_a.weight",     S::layer,             R::mlp_in,             P::lora_a, {D::lora_rank, D::hidden},     Sh::replicated, G::decay,     I::kaiming_uniform, gelu | l_in},
   {"layers.{}.mlp.fc1.lora_b.weight",     S::layer,             R::mlp_in,             P::lora_b, {D::ffn, D::lora_rank},        Sh::column,     G::decay,     I::zeros,         gelu | l_in},
   {"layers.{}.mlp.fc2.lora_a.weight",     S::layer,             R::mlp_out,            P::lora_a, {D::lora_rank, D::ffn},        Sh::row,        G::decay,     I::kaiming_uniform, gelu | l_out},
   {"layers.{}.mlp.fc2.lora_b.weight",     S::layer,             R::mlp_out,            P::lora_b, {D::hidden, D::lora_rank},     Sh::replicated, G::decay,     I::zeros,         gelu | l_out},
   {"layers.{}.mlp.gate_up.lora_a.weight", S::layer,             R::mlp_in,             P::lora_a, {D::lora_rank, D::hidden},     Sh::replicated, G::decay,     I::kaiming_uniform, swiglu | l_in},
   {"layers.{}.mlp.gate.lora_b.weight",    S::layer,             R::mlp_in,             P::lora_b, {D::ffn, D::lora_rank},        Sh::column,     G::decay,     I::zeros,         swiglu | l_in},
   {"layers.{}.mlp.up.lora_b.weight",      S::layer,             R::mlp_in,             P::lora_b, {D::ffn, D::lora_rank},        Sh::column,     G::decay,     I::zeros,         swiglu | l_in},
   {"layers.{}.mlp.down.lora_a.weight",    S::layer,             R::mlp_out,            P::lora_a, {D::lora_rank, D::ffn},        Sh::row,        G::decay,     I::kaiming_uniform, swiglu | l_out},
   {"layers.{}.mlp.down.lora_b.weight",    S::layer,             R::mlp_out,            P::lora_b, {D::hidden, D::lora_rank},     Sh::replicated, G::decay,     I::zeros,         swiglu | l_out},
   {"final_norm.weight",               S::head,                    R::final_norm,         P::weight, {D::hidden},                   Sh::replicated, G::no_decay,  I::ones,          always, {{"transformer.ln_f.weight"}}},
   {"final_norm.bias",                 S::head,                    R::final_norm,         P::bias,   {D::hidden},                   Sh::replicated, G::no_decay,  I::zeros,         needs_norm_bias, {{"transformer.ln_f.bias"}}},
   {"lm_head.weight",                  S::head,                    R::lm_head,            P::weight, {D::padded_vocab, D::hidden},  Sh::vocab_rows, G::embedding, I::normal,        needs_untied, {{"lm_head.weight"}}},
};
// clang-format on

// transformers' GPT2Config: the keys export writes (in this order) and import checks, with the
// defaults GPT2Config gives an absent key.
HfArchitecture gpt2() {
  HfArchitecture h{.model_type = "gpt2",
                   .class_name = "GPT2LMHeadModel",
                   .base_prefix = "transformer.",
                   .flags = {.layernorm = true, .gelu = true, .learned_positions = true, .bias = true},
                   .fixed = flag_norm | flag_activation | flag_positions | flag_bias,
                   .computes = "layernorm, gelu, learned positions, biases",
                   .mha_only = true,
                   .head_dim_from_hidden = true};
  using F = HfField;
  const char* rescale = "the engine scales scores by 1/sqrt(head_dim)";
  h.config = {
      {.key = "vocab_size", .field = F::vocab, .no_default = true},
      {.key = "n_positions", .field = F::max_positions, .fallback = 1024},
      {.key = "n_ctx", .field = F::max_positions, .io = hf_write},
      {.key = "n_embd", .field = F::hidden, .fallback = 768},
      {.key = "n_layer", .field = F::layers, .fallback = 12},
      {.key = "n_head", .field = F::heads, .fallback = 12},
      {.key = "n_inner", .field = F::ffn, .fallback = 4, .times = "n_embd"},
      {.key = "activation_function",
       .value = "\"gelu_new\"",
       .accepted = {"\"gelu_new\"", "\"gelu_pytorch_tanh\"", "\"gelu_fast\""},
       .why = "the engine computes the tanh approximation of GELU (gelu_new)"},
      {.key = "layer_norm_epsilon", .field = F::norm_eps, .fallback = 1e-5},
      // The engine trains without dropout.
      {.key = "resid_pdrop", .io = hf_write, .value = "0.0"},
      {.key = "embd_pdrop", .io = hf_write, .value = "0.0"},
      {.key = "attn_pdrop", .io = hf_write, .value = "0.0"},
      {.key = "scale_attn_weights", .value = "true", .accepted = {"true"}, .why = rescale},
      {.key = "scale_attn_by_inverse_layer_idx",
       .value = "false",
       .accepted = {"false"},
       .why = "the engine scales scores by 1/sqrt(head_dim) only"},
      {.key = "reorder_and_upcast_attn", .io = hf_write, .value = "false"},
      {.key = "initializer_range", .field = F::init_std, .io = hf_write},
      {.key = "tie_word_embeddings", .field = F::tied, .fallback = 1},
      {.key = "use_cache", .io = hf_write, .value = "true"},
  };
  return h;
}

}  // namespace

const Family& gpt_family() {
  static const Family f{
      .arch = "gpt",
      .summary = "GPT-2/GPT-3 (Megatron GPT): layernorm, gelu, learned positions, biases, tied head by default",
      .defaults = {.layernorm = true, .gelu = true, .learned_positions = true, .bias = true, .tied = true},
      .fixed = flag_qk_norm,  // every mix but qk-norm (its table has no q/k norm rows)
      .tensors = kTable,
      .hf = {gpt2()},
      // GPT-2's module names; c_proj names both the attention output and fc2, as in HF PEFT.
      .lora_names = {{"c_attn", lora_qkv}, {"c_fc", lora_mlp_in}, {"c_proj", lora_proj | lora_mlp_out}},
  };
  return f;
}

}  // namespace recipe::core
