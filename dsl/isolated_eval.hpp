// Internal to dsl/: runs a recipe evaluation in a forked child process under a wall-clock, CPU and
// address-space bound, and brings back the config tree it built (as JSON over a pipe) or its error
// text. The Lua sandbox's instruction hook and allocator cap stop what runs as Lua bytecode; C
// functions (a backtracking string.find on a long string, table.sort with a comparator that
// never settles) and finalizers run outside the hook, so only a process bound stops them all.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "dsl/dsl.hpp"

namespace recipe::dsl::load_detail {

struct EvalBounds {
  double wall_seconds = 30;                         // then the child is killed
  std::size_t memory_bytes = std::size_t{1} << 30;  // address space the child may add to ours
};

// Calls `evaluate` in a child process and returns its tree. A RecipeError (or any exception) of
// `evaluate` comes back as a RecipeError with the same text; a child that runs past the bounds
// or dies is reported as "<label>: recipe evaluation exceeded N s" / "... M MiB" / "... crashed".
ConfigTree evaluate_isolated(const std::string& label, const EvalBounds& bounds,
                             const std::function<ConfigTree()>& evaluate);

}  // namespace recipe::dsl::load_detail
