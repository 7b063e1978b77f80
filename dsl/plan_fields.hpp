// The one table of recipe keys. Reading a config tree into a plan::Plan, unknown-key detection, writing a
// plan back out (TOML/JSON/Lua) and the recipe reference in docs/ all walk this list, so a key added
// to plan.hpp needs exactly one line in plan_fields.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.hpp"

namespace recipe::dsl {

enum class FieldType {
  Int,    // JSON integer (an integral float such as Lua's 1e3 is accepted)
  Float,  // any number; written back as a float
  Bool,
  String,
  IntList,     // [1, 2, 3]
  StringList,  // ["a", "b"]
  StringMap,   // { KEY = "value" }; numbers and booleans are stored as their text
  Blend,       // flat list [w1, "prefix1", w2, "prefix2", ...]
};

// "an integer", "a float", "a list of strings", ... as used in type-error messages.
std::string_view field_type_name(FieldType type);

struct FieldInfo {
  std::string section;  // "model", ...; "" for top-level keys (`mode`)
  std::string key;      // "num_layers"
  FieldType type;
  std::string doc;                   // one line for docs/recipes.md and `recipe keys`
  std::vector<std::string> allowed;  // an enum key's spellings (plan/enums.hpp); empty = free text

  std::string path() const { return section.empty() ? key : section + "." + key; }
  // The value in a plan, as a config-tree value (what a recipe would write).
  std::function<nlohmann::ordered_json(const plan::Plan&)> get;
  // Stores a tree value into the plan. Returns the type error ("must be an integer, got \"ten\"",
  // without the path) and leaves the plan unchanged when the value has the wrong shape.
  std::function<std::optional<std::string>(plan::Plan&, const nlohmann::ordered_json&)> set;
};

// Every recipe key, grouped by section in plan.hpp order, `mode` first.
const std::vector<FieldInfo>& plan_fields();
const FieldInfo* find_field(std::string_view path);

// The recipe sections in order: model, data, optimizer, ..., experiment.
const std::vector<std::string>& plan_sections();

// Values the resolver computes; a recipe that sets one gets a violation quoting `formula`.
struct DerivedFieldInfo {
  std::string path;     // "model.head_dim"
  std::string formula;  // "model.hidden_size / model.num_attention_heads"
};
const std::vector<DerivedFieldInfo>& derived_fields();
const DerivedFieldInfo* find_derived_field(std::string_view path);

// Short human text of a tree value for messages: "ten" quoted, 3, 2.5, true, a list, a table.
std::string describe_value(const nlohmann::ordered_json& value);

}  // namespace recipe::dsl
