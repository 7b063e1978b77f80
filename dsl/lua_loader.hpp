// Internal to dsl/: runs Lua recipes in a sandbox and turns what they return into a config tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/dsl.hpp"
#include "dsl/isolated_eval.hpp"

namespace recipe::dsl::load_detail {

// Caps on one recipe evaluation (the recipe, the presets it builds on and the modules it requires).
// The first two are the sandbox's own (messages with file:line); the evaluation runs in a child
// process bounded by `process` as well, which also stops what Lua's hook cannot see (C functions,
// finalizers): dsl/isolated_eval.hpp.
struct LuaLimits {
  std::size_t memory_bytes = std::size_t{256} << 20;
  std::uint64_t instructions = 50'000'000;
  EvalBounds process = {};
};

// A .lua recipe file. Values it sets get origin `path:line`; values from presets `preset:<name>:line`.
ConfigTree load_lua_file(const std::string& path, const std::vector<std::string>& search_path,
                         const LuaLimits& limits = {});

// A preset by name (`<name>.lua` on the search path); its values get origin `preset:<name>:line`.
ConfigTree load_lua_preset(const std::string& name, const std::vector<std::string>& search_path,
                           const LuaLimits& limits = {});

}  // namespace recipe::dsl::load_detail
