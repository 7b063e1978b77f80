// The execution shape of a model: its architecture (family/arch_shape.hpp: the family, dimensions
// and flags that define its tensors) and how this run executes it (sequence, packing, sequence
// parallelism and its overlap, LoRA, FP8). Read once from a resolved plan by model_shape(), the one
// translation from the plan. The derived fields (head_dim, num_kv_heads, ffn_hidden_size,
// padded_vocab_size, max_position_embeddings) are taken as the resolver filled them; a plan built in
// code gets them from tests/core/core_test_util.hpp's fill_derived (tests) or dsl::resolve.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "family/arch_shape.hpp"
#include "family/tensor_table.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

struct ModelShape {
  ArchShape arch;
  int seq = 0;
  // Sequences hold several samples (data.kind=sft with data.pack): RoPE and attention take each
  // token's position inside its sample (Model::load_split_tokens), so no attention crosses a sample.
  bool packed = false;
  // Packed: the most samples one row holds, its padding counted as one (data.max_samples_per_pack
  // + 1); attention's per-sample work (cuDNN's ragged graphs) is sized by it.
  int max_samples = 0;
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

  bool lora() const { return lora_rank > 0; }
  Adapters adapters() const { return {lora_rank, lora_targets}; }
};

// Throws std::invalid_argument naming the plan field and its value when an invariant that buffer
// sizes depend on does not hold (kv heads dividing heads, padded vocab, position table length), or
// when model.arch names no family or a flag its family does not compute.
ModelShape model_shape(const plan::Plan& plan);

// The tensor table read for a model: its architecture with its adapters (family/tensor_table.hpp).
inline std::span<const TensorDecl> tensor_table(const ModelShape& s) { return tensor_table(s.arch); }
inline bool present(const TensorDecl& d, const ModelShape& s) { return present(d, s.arch, s.adapters()); }
inline bool trainable(const TensorDecl& d, const ModelShape& s) { return trainable(d, s.adapters()); }
inline std::vector<int64_t> global_shape(const TensorDecl& d, const ModelShape& s) {
  return global_shape(d, s.arch, s.adapters());
}
inline int64_t global_numel(const TensorDecl& d, const ModelShape& s) { return global_numel(d, s.arch, s.adapters()); }

}  // namespace recipe::core
