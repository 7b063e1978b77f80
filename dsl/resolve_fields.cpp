// Config tree → plan::Plan: every key read with its type, unknown and derived keys reported with
// suggestions, enum-like strings checked against their choices.
#include <algorithm>

#include "dsl/plan_fields.hpp"
#include "dsl/resolve_internal.hpp"
#include "dsl/foreign_keys.hpp"
#include "dsl/suggest.hpp"

namespace recipe::dsl::detail {

using json = nlohmann::ordered_json;

namespace {

// A recipe of 100,000 unknown keys gets the first ones reported and a count of the rest: each
// report costs a "did you mean" search, and nobody reads past the first screen.
constexpr int kMaxUnknownKeysReported = 50;

// A key as shown in a message: a fuzzed key may be a megabyte long.
std::string shown_key(const std::string& key) { return key.size() <= 200 ? key : key.substr(0, 200) + "..."; }

std::vector<std::string> section_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& f : plan_fields())
    if (f.section == section) keys.push_back(f.key);
  return keys;
}

// Full-path suggestions for an unknown `section.key`: close keys of the same section first, else the
// same or a close key in another section ("trainer.tp" → "parallelism.tp").
std::vector<std::string> suggest_paths(const std::string& section, const std::string& key) {
  // A NeMo / Hugging Face name of one of our settings: our key, whatever the spelling distance.
  if (const std::string_view ours = foreign_key_path(key); !ours.empty()) return {std::string(ours)};
  std::vector<std::string> out;
  if (!section.empty())
    for (const auto& k : suggest(key, section_keys(section))) out.push_back(section + "." + k);
  if (!out.empty()) return out;
  std::vector<std::string> keys;
  for (const auto& f : plan_fields())
    if (f.section != section && !f.section.empty()) keys.push_back(f.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> close;
  if (std::find(keys.begin(), keys.end(), key) != keys.end())
    close.push_back(key);
  else
    close = suggest(key, keys, 2);
  for (const auto& k : close)
    for (const auto& f : plan_fields())
      if (f.key == k && f.section != section && !f.section.empty()) out.push_back(f.path());
  if (out.size() > 3) out.resize(3);
  return out;
}

void read_value(ResolveContext& ctx, const FieldInfo& field, const json& value) {
  const std::string path = field.path();
  // A string outside an enum key's choices is reported here, before set: an enum member cannot hold
  // it, and the plan keeps the default so derived values stay meaningful.
  if (!field.allowed.empty() && value.is_string()) {
    const std::string v = value.get<std::string>();
    if (std::find(field.allowed.begin(), field.allowed.end(), v) == field.allowed.end()) {
      ctx.set_paths.insert(path);
      ctx.bad_paths.insert(path);
      ctx.violation(path,
                    path + "=\"" + v + "\" is not one of " + join_or(field.allowed) + did_you_mean(v, field.allowed),
                    "use one of " + join_or(field.allowed));
      field.set(ctx.plan(), field.get(plan::Plan{}));
      return;
    }
  }
  if (auto error = field.set(ctx.plan(), value)) {
    ctx.bad_paths.insert(path);
    std::string fix;
    if (field.type == FieldType::Int && value.is_string()) fix = "write the number without quotes";
    if (field.type == FieldType::Bool && value.is_string()) fix = "write true or false without quotes";
    if (!field.allowed.empty()) fix = "use one of " + join_or(field.allowed);
    ctx.violation(path, path + " " + *error, fix);
    return;
  }
  ctx.set_paths.insert(path);
}

void read_section(ResolveContext& ctx, const std::string& section, const json& table) {
  if (!table.is_object()) {
    if (table.is_array() && table.empty()) return;  // an empty Lua table
    ctx.bad_paths.insert(section);
    ctx.violation(section, section + " must be a table of keys, got " + describe_value(table),
                  "write " + section + " = { key = value, ... }");
    return;
  }
  for (const auto& [key, value] : table.items()) {
    const std::string path = section + "." + key;
    if (const FieldInfo* field = find_field(path)) {
      read_value(ctx, *field, value);
    } else if (const DerivedFieldInfo* derived = find_derived_field(path)) {
      ctx.violation(path, path + " is derived (" + path + " = " + derived->formula + ") and cannot be set",
                    "remove " + path + " from the recipe; set the keys it is computed from");
    } else if (++ctx.unknown_keys <= kMaxUnknownKeysReported) {
      const auto close = suggest_paths(section, key);
      ctx.violation(path, "unknown key " + shown_key(path) + format_did_you_mean(close),
                    close.empty() ? "remove it; `recipe keys` lists every key (docs/recipes.md too)"
                                  : "rename it to " + close.front());
    }
  }
}

}  // namespace

void read_tree(ResolveContext& ctx) {
  const json& root = ctx.tree.root;
  ctx.plan().source = ctx.tree.source;
  if (!root.is_object()) {
    ctx.violation("", "a recipe must be a table of sections, got " + describe_value(root),
                  "return { model = {...}, ... }");
    ctx.shape_ok = false;
    return;
  }
  const auto& sections = plan_sections();
  for (const auto& [key, value] : root.items()) {
    if (key == "derived") continue;  // informational only (to_toml writes it; the TOML loader drops it)
    if (key == "preset") {
      // The TOML loader consumes `preset`; a Lua table that sets it would silently resolve to defaults.
      ctx.violation("preset",
                    "preset = " + describe_value(value) + " is not read from a Lua recipe; a Lua recipe builds on a " +
                        "preset by calling it",
                    "write `return preset \"<name>\" { ... }` (`recipe list` shows the presets)");
      continue;
    }
    if (key == "source") {
      // A resolved plan remembers the recipe it came from (to_toml writes it).
      if (value.is_string())
        ctx.plan().source = value.get<std::string>();
      else
        ctx.violation("source", "source must be a string, got " + describe_value(value));
      continue;
    }
    if (const FieldInfo* field = find_field(key); field && field->section.empty()) {
      read_value(ctx, *field, value);
      continue;
    }
    if (std::find(sections.begin(), sections.end(), key) != sections.end()) {
      read_section(ctx, key, value);
      continue;
    }
    if (key == "memory") {
      ctx.violation(key, "memory is derived (the resolver's per-rank memory estimate) and cannot be set",
                    "remove the memory table; set executor.device_memory to state the device size");
      continue;
    }
    if (++ctx.unknown_keys > kMaxUnknownKeysReported) continue;
    std::vector<std::string> names = sections;
    names.push_back("mode");
    auto close = suggest(key, names);
    if (close.empty()) close = suggest_paths("", key);
    ctx.violation(key, "unknown top-level key " + shown_key(key) + format_did_you_mean(close),
                  "top-level keys are mode and the sections " + join_or(sections));
  }
  if (ctx.unknown_keys > kMaxUnknownKeysReported)
    ctx.violation("",
                  "... and " + std::to_string(ctx.unknown_keys - kMaxUnknownKeysReported) +
                      " more unknown keys (the first " + std::to_string(kMaxUnknownKeysReported) + " are listed above)",
                  "`recipe keys` lists every key");
}

}  // namespace recipe::dsl::detail
