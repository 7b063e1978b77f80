// Megatron-style initialization, a pure function of (seed, parameter name, global element index):
// normal(0, init_std) for weights and embeddings, normal(0, init_std/sqrt(2·layers)) for output
// projections (attention.proj, mlp.fc2, mlp.down), zeros for biases, ones for norm weights.
#pragma once

#include <cstdint>

#include "core/model/param_store.hpp"

namespace recipe::core {

// Values of local elements [first, first+count) of one parameter.
void init_values(const ParamSpec& p, uint64_t seed, int64_t first, int64_t count, float* out);

// Fills every parameter's master weights, refreshes the compute copy, zeroes grads (the optimizer
// state is the optimizer's: zero when it is made).
// Host staging is chunked (a few MiB), so any model size works without a host copy of it. The
// FP8 region (frozen weights held only in FP8) is not written: init_params registers the seeded
// init as its source (ParamStore::set_fp8_source), which Model::quantize_frozen_base reads.
void init_params(ParamStore& store, uint64_t seed);

}  // namespace recipe::core
