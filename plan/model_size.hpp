// Parameter and FLOP counts of the model a plan describes. Needs the resolved model shape
// (head_dim, num_kv_heads, ffn_hidden_size and padded_vocab_size filled in). The counts are sums
// over the family's tensor table (family/), the same rows the parameter layout lays out.
#pragma once

#include <cstdint>

#include "family/arch_shape.hpp"
#include "plan/plan.hpp"

namespace recipe::plan {

// One transformer block's parameters, split the way tensor parallelism shards them.
struct LayerParams {
  int64_t sharded = 0;     // split over TP ranks: linear weights, column-parallel biases
  int64_t replicated = 0;  // held whole by every TP rank: norms, row-parallel output biases
  int64_t total() const { return sharded + replicated; }
};
LayerParams layer_params(const ModelConfig& m);

// The model's tensor-table shape (family/shape.hpp), read leniently: what the plan's counting and
// the block linear list (family/linears.hpp) are derived from.
core::ArchShape model_table_shape(const ModelConfig& m);

// Word embedding of `vocab` rows (the padded vocab is what gets allocated).
int64_t word_embedding_params(const ModelConfig& m, int64_t vocab);
int64_t position_embedding_params(const ModelConfig& m);  // learned positions only
int64_t final_norm_params(const ModelConfig& m);

// All parameters with a vocabulary of `vocab` rows; a tied head is counted once.
int64_t count_params(const ModelConfig& m, int64_t vocab);

// The parameters a token is multiplied by (PaLM/Megatron MFU convention): all of them minus the
// input lookups — the word embedding of an untied model and learned positions. A tied embedding
// counts once, as the output head.
int64_t matmul_params(const ModelConfig& m);

// Training FLOPs per token, fwd + bwd: 6·matmul_params + 12·L·(heads·head_dim)·S, the weights'
// matmuls plus the attention score and context matmuls (PaLM appendix B, Megatron; causal masking
// not discounted). Every MFU the engine shows uses this number.
double training_flops_per_token(const ModelConfig& m);
// The same for the plan's run. With LoRA the frozen base's matmuls run forward and backward for the
// input gradient only (4 FLOPs per parameter: no weight gradient), the adapters 6 per parameter, and
// attention as in pretraining; counting 6 per base parameter would overstate a LoRA run's MFU by half.
double training_flops_per_token(const Plan& plan);

// LoRA adapters' parameters (the trainable ones of a LoRA run): the adapter rows of the family's
// tensor table (A [rank, in], B [out, rank] per adapted linear, as the model fuses its linears:
// q|k|v, gate|up), all layers; 0 without LoRA.
int64_t lora_trainable_params(const Plan& plan);
// One layer's adapter parameters, split the way tensor parallelism shards them.
LayerParams lora_layer_params(const Plan& plan);
// The widest input (A's in-features) of an adapted linear on one TP rank of `tp`: what the adapter
// dropout's shared [rows, in] scratch is sized by (0 without LoRA).
int64_t lora_widest_input(const Plan& plan, int tp);

}  // namespace recipe::plan
