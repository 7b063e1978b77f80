// Per-rank memory estimate of a resolved plan: what the most loaded pipeline stage holds on one
// rank. Used by the resolver's "fits the device" check and shown in resolved.toml's [derived].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsl/plan.hpp"

namespace recipe::dsl {

// Needs the plan's derived shape values (head_dim, ffn, padded vocab, dp, num_micro_batches).
MemoryEstimate estimate_memory(const Plan& plan);

// Estimate of one pipeline stage (0 = first, holds the embedding; pp-1 = last, holds the head).
MemoryEstimate estimate_stage_memory(const Plan& plan, int stage);

// Layers held by each pipeline stage: parallelism.layers_per_stage, or an even split (the first
// stages take the remainder).
std::vector<int> stage_layer_counts(const Plan& plan);

// "1.27 TiB", "79.6 GiB", "312.0 MiB".
std::string format_bytes(double bytes);

// "weights 12.1 GiB + gradients 8.0 GiB + optimizer 16.1 GiB + activations 3.2 GiB + workspace
//  0.6 GiB = 40.0 GiB"
std::string describe_memory(const MemoryEstimate& m);

}  // namespace recipe::dsl
