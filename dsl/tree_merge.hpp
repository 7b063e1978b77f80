// Internal to dsl/: operations on config trees shared by the Lua and TOML loaders and overrides.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "dsl/dsl.hpp"

namespace recipe::dsl::load_detail {

using Json = nlohmann::ordered_json;

// Deepest nesting of tables a recipe may have (TOML tables and dotted keys, Lua tables, merges):
// real recipes use 3; the bound keeps every tree walk's recursion shallow.
inline constexpr int kMaxTreeDepth = 64;

// Adds `key` to `object`, which must not hold it yet (a TOML or Lua table's keys are unique).
// ordered_json's operator[] searches the keys one by one; appending keeps a table of N keys O(N).
void append_new_key(Json& object, std::string key, Json value);

// Recipe text is UTF-8: a config tree becomes JSON and TOML, which hold nothing else.
bool is_utf8(const std::string& s);

// "a.b" + "c" → "a.b.c"; "" + "c" → "c".
std::string join_path(const std::string& prefix, const std::string& key);

// Lua tables have no order, so every loader puts keys in one canonical order, which makes trees from
// different sources comparable with ==: `mode`, then the plan::Plan sections in plan::Plan order, then any other
// top-level key; keys inside a section sorted by name.
void canonicalize(Json& root);

// Leaves are scalars and arrays (an array is replaced as a whole, never merged); objects are walked.
void for_each_leaf(const Json& node, const std::function<void(const std::string& path, const Json& value)>& fn,
                   const std::string& prefix = "");

// Deep-merge `over` into `base.root`: objects merge key by key (an empty object changes nothing),
// scalars and arrays replace. Leaves taken from `over` get their origin from `over_origins`.
void merge_into(ConfigTree& base, const Json& over, const std::map<std::string, Origin>& over_origins);

// Forget origins of paths that are no longer leaves of the tree (replaced by a merge or override).
void prune_origins(ConfigTree& tree);

}  // namespace recipe::dsl::load_detail
