// The sections of check_relations (resolve_checks.cpp), one job each, in the order it calls them:
// that order is the order of the violations a resolve reports. Internal to dsl/.
#pragma once

#include "dsl/resolve_internal.hpp"

namespace recipe::dsl::detail {

// Any plan, also one whose sizes are not positive (relations_run.cpp).
void check_eval_batches(ResolveContext& ctx);  // eval_samples in whole micro-batches per DP rank
void check_device(ResolveContext& ctx);        // the device exists here; the executor reaches the nodes

// Only where ctx.shape_ok: these divide by sizes.
bool check_attention_shape(ResolveContext& ctx);              // heads | hidden, kv | heads, RoPE, positions;
                                                              // true where num_kv_heads is valid
void check_tensor_parallel(ResolveContext& ctx, bool kv_ok);  // tp divides, SP, TP communication overlap
void check_context_parallel(ResolveContext& ctx);             // seq % (2·cp)
void check_pipeline(ResolveContext& ctx);                     // pp, virtual_pp, layer splits
void check_world_size(ResolveContext& ctx);                   // world = tp·pp·cp·dp, supplied by the executor
void check_batches(ResolveContext& ctx);                      // global batch in micro-batches × dp; 1F1B groups
void check_schedule(ResolveContext& ctx);                     // warmup against decay and max_steps
void check_peft(ResolveContext& ctx);                         // LoRA targets, rank, mode; finetune's weights
void check_data(ResolveContext& ctx);                         // dataset paths, chat template, tokenizer files
void check_advice(ResolveContext& ctx);                       // warnings: settings without effect

}  // namespace recipe::dsl::detail
