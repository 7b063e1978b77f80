// The numbers that define a decoder model's tensors (dimensions and which parts it has). A plain
// struct with no dependencies, so the tensor tables (and the plan's parameter counting, which
// iterates them) can use it without linking the core; core/model/model_shape.hpp reads it from a
// plan.
#pragma once

#include <cstdint>

namespace recipe::core {

// The linears a LoRA adapter can sit on, as the block fuses them (q|k|v one linear, gate|up one).
enum LoraTarget : unsigned {
  lora_qkv = 1u << 0,
  lora_proj = 1u << 1,
  lora_mlp_in = 1u << 2,   // fc1, or the gate|up pack
  lora_mlp_out = 1u << 3,  // fc2, or down
};

struct ModelShape {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  int vocab = 0, padded_vocab = 0, max_positions = 0, seq = 0;
  bool layernorm = true;          // false: RMSNorm
  bool gelu = true;               // false: SwiGLU (gate/up/down)
  bool learned_positions = true;  // false: RoPE
  bool bias = true;               // biases in linears (and LayerNorm)
  bool tied = true;               // logits use embedding.word.weight
  // Sequences hold several samples (data.kind=sft with data.pack): RoPE and attention take each
  // token's position inside its sample (Model::load_split_tokens), so no attention crosses a sample.
  bool packed = false;
  // Packed: the most samples one row holds, its padding counted as one (data.max_samples_per_pack
  // + 1); attention's per-sample work (cuDNN's ragged graphs) is sized by it.
  int max_samples = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  double init_std = 0.02;
  // Rows per classifier chunk on this rank: the resolver's trainer.classifier_chunk_rows (the
  // activation arena's logits chunk; it depends on the micro-batch, tp and the recompute level).
  int64_t classifier_chunk_rows = 0;
  // Sequence parallelism (parallelism.sequence_parallel, Megatron): the residual stream's N = B·T
  // token rows are split over this many TP ranks (the TP size), rank r holding the contiguous rows
  // [r·N/sp, (r+1)·N/sp); 1 = not split. It changes activations and communication only, never a
  // parameter (core/model/linear.hpp).
  int sequence_parallel = 1;
  // parallelism.tp_comm_overlap: the sequence-parallel collectives pipelined with the linears'
  // GEMMs, or without sequence parallelism the row-parallel forward's all-reduce pipelined with
  // its GEMM in tp_overlap_chunks row chunks (parallelism.tp_overlap_chunks; core/model/linear.hpp).
  bool tp_comm_overlap = false;
  int tp_overlap_chunks = 2;
  // LoRA (peft.kind=lora): the adapter rank (0 = no adapters, every tensor trains), which linears
  // carry adapters (LoraTarget bits) and the scale of the adapter path (alpha/rank, or
  // alpha/sqrt(rank) with rsLoRA). With adapters, only the adapters train (trainable()).
  int lora_rank = 0;
  unsigned lora_targets = 0;
  float lora_scale = 0.f;
  // Adapter dropout (peft.dropout) on the adapter input in training, and the seed its masks are
  // keyed by (trainer.seed); see core/model/linear.hpp.
  float lora_dropout = 0.f;
  uint64_t lora_dropout_seed = 0;
  // FP8 (trainer.precision = fp8): which linears run in FP8 (LoraTarget bits; 0 = none) and the
  // gradients' format (E5M2, else E4M3; activations and weights are E4M3). See core/model/linear.hpp.
  unsigned fp8_linears = 0;
  // peft.base_fp8_only (LoRA in FP8): the FP8 linears whose frozen base weight is held only in FP8,
  // quantized once at init/load (LoraTarget bits, a subset of fp8_linears; 0 = every FP8 linear
  // keeps its compute-dtype weight and casts it each pass). See core/model/linear.hpp.
  unsigned fp8_frozen = 0;
  bool fp8_grad_e5m2 = true;
  bool fp8_fast_accum_forward = true;
  // Delayed scaling (fp8.scaling = "delayed"): steps of amax history per FP8 tensor (0: current
  // scaling, tensorwise), and whether the scale comes from the newest amax instead of the max.
  int fp8_history_len = 0;
  bool fp8_amax_most_recent = false;

  int64_t q_dim() const { return int64_t(heads) * head_dim; }
  int64_t kv_dim() const { return int64_t(kv_heads) * head_dim; }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  int64_t fc_in_rows() const { return gelu ? ffn : 2 * int64_t(ffn); }  // fc1 or [gate|up]
  bool norm_bias() const { return layernorm && bias; }
  bool lora() const { return lora_rank > 0; }
};

}  // namespace recipe::core
