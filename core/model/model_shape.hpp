// A ModelShape (core/model/family/shape.hpp) read once from the plan. Derived plan fields the
// resolver normally fills (head_dim, num_kv_heads, ffn_hidden_size, padded_vocab_size,
// max_position_embeddings) are recomputed here when left at 0, with the resolver's rules, so a
// hand-built plan (tests, tools) is usable too.
#pragma once

#include <string>

#include "core/model/family/shape.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

// Throws std::invalid_argument naming the plan field, its value and a fix.
ModelShape model_shape(const plan::Plan& plan);

}  // namespace recipe::core
