// Per-rank memory estimate of a resolved plan: what the most loaded pipeline stage holds on one
// rank. Used by the resolver's "fits the device" check and shown in resolved.toml's [derived].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::plan {

// Needs the plan's derived shape values (head_dim, ffn, padded vocab, dp, num_micro_batches).
MemoryEstimate estimate_memory(const Plan& plan);

// Estimate of one pipeline stage (0 = first, holds the embedding; pp-1 = last, holds the head).
MemoryEstimate estimate_stage_memory(const Plan& plan, int stage);

// Bytes of the activation arenas of one pipeline stage's model chunks on one rank: the activation
// declaration (family/activations.hpp) summed exactly as core/model/model.cpp carves and allocates
// it, so this is the arena's allocation to the byte.
int64_t activation_arena_bytes(const Plan& plan, int stage);

// Bytes of the CUDA backend's own workspace for this plan (the scratch of reductions, cuDNN
// attention and GEMM algorithm timing; see kernels::BackendOptions::workspace_bytes): room for the
// f32 accumulators of one micro-batch's attention gradients on one rank (rows × (q + 2·kv) × 4 B)
// plus 16 MiB, or what cuDNN's fused attention backward needs (with context parallelism plus the
// ring blocks' compact results), at least 64 MiB, in whole MiB. train() creates the backend with it, so this estimate
// and the engine's allocation are the same number.
int64_t cuda_workspace_bytes(const Plan& plan);

// Rows per chunk of the classifier (logits → loss → dlogits → gradients, chunk by chunk): as few
// chunks as fit logits of at most max(room_bytes, 256 MiB), all of equal size but the last. Each
// chunk's weight-gradient GEMM reads and writes the whole f32 [vocab, hidden] gradient, so fewer
// chunks are faster; room_bytes is what the layers' transient buffers hold anyway.
int64_t classifier_chunk_rows(int64_t rows, int64_t padded_vocab, int64_t elem_bytes, int64_t room_bytes);

// The chunk rows of one rank of this plan: micro_batch_size × seq_length rows, the rank's vocabulary
// shard, the backend's activation element size (CPU f32, CUDA bf16, whatever trainer.precision says)
// and the transient region the layers' buffers need anyway. The resolver stores it as
// trainer.classifier_chunk_rows; core's activation arena carves the logits chunk with it.
int64_t classifier_chunk_rows(const Plan& plan);

// Layers held by each virtual pipeline stage (model chunk), in model order: pp·virtual_pp entries,
// stage k of pp holding entries k, k+pp, ... (pp entries without virtual_pp).
// parallelism.layers_per_stage, else parallelism.pipeline_split's (plan/pipeline_split.hpp).
std::vector<int> stage_layer_counts(const Plan& plan);

// The pipeline bubble: the idle fraction of a step against the pipeline's compute,
// (pp-1)/(virtual_pp·num_micro_batches) (Megatron; 0 without pipeline stages).
double pipeline_bubble(const Plan& plan);

// "1.27 TiB", "79.6 GiB", "312.0 MiB".
std::string format_bytes(double bytes);

// "weights 12.1 GiB + gradients 8.0 GiB + optimizer 16.1 GiB + activations 3.2 GiB + workspace
//  0.6 GiB = 40.0 GiB"
std::string describe_memory(const MemoryEstimate& m);

}  // namespace recipe::plan
