// A ModelShape (family/shape.hpp) read once from a resolved plan. The derived fields
// (head_dim, num_kv_heads, ffn_hidden_size, padded_vocab_size, max_position_embeddings) are taken as
// the resolver filled them; a plan built in code gets them from tests/core/core_test_util.hpp's
// fill_derived (tests) or dsl::resolve.
#pragma once

#include <string>

#include "family/shape.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

// Throws std::invalid_argument naming the plan field and its value when an invariant that buffer
// sizes depend on does not hold (kv heads dividing heads, padded vocab, position table length).
ModelShape model_shape(const plan::Plan& plan);

}  // namespace recipe::core
