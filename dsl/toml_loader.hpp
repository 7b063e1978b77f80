// Internal to dsl/: TOML recipes (and resolved.toml files) → config tree, with exact origins.
#pragma once

#include <string>
#include <vector>

#include "dsl/dsl.hpp"

namespace recipe::dsl::load_detail {

// A .toml recipe: optional top-level `preset = "name"` (loaded first, the TOML merged over it) and
// `mode`, then one table per plan::Plan section. A `[derived]` table (written into resolved.toml) is
// dropped; any other key is kept for the resolver to judge.
ConfigTree load_toml_file(const std::string& path, const std::vector<std::string>& search_path);

}  // namespace recipe::dsl::load_detail
