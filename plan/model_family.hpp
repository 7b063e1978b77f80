// The model family model.arch selects (family/registry.hpp).
#pragma once

#include "family/family.hpp"
#include "plan/plan.hpp"

namespace recipe::plan {

// Throws std::logic_error when no family is registered under the arch's name (a test holds
// plan::Arch and the registry to each other, so this is a programming error).
const core::Family& model_family(const ModelConfig& m);

}  // namespace recipe::plan
