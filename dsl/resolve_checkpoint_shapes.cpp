// checkpoint.load against the plan's model, before launch (DESIGN.md: validates ⇒ runs): every
// tensor the model has must be in the checkpoint with the plan's global shape, and every weight of
// the checkpoint must have a place in the model — the rule the core applies when it loads
// (core/train/checkpointing.cpp read_weights), checked here from the checkpoint's metadata.json so
// a mismatch is exit 1 at validate / --dry-run, not an error after a job was queued. The core
// still verifies the files in full (shards, CRCs) when it reads them.
//
// What is tolerated, as the core tolerates it: the word embedding and an untied lm_head
// (Shard::vocab_rows) saved with another vocabulary padding (another TP size) when the
// checkpoint's vocab_size (common.json "model") is the plan's; LoRA adapters a fine-tune starts
// (mode=finetune: they keep their init); optimizer state and FP8 histories (not weights).
//
// The message names the tensors, both shapes and the key to change. The keys come from the dims of
// the tensors that differ (family/tensor_table.hpp: Dim::hidden → model.hidden_size, ...); where the
// checkpoint holds the plan it was saved with (plan.toml: every checkpoint recipe writes, imports
// included) the keys are those whose values differ, with the checkpoint's value as the fix.
//
// The metadata.json layout read here (checkpoint/checkpoint.hpp): {"tensors": {name:
// {"global_shape": [...], ...}}, "base": {"path", "hash"}} — the dsl does not link the checkpoint
// library (CMakeLists.txt), as resolve_files.cpp parses the .idx headers itself.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "dsl/resolve_internal.hpp"
#include "family/tensor_table.hpp"
#include "plan/lora.hpp"
#include "plan/model_family.hpp"
#include "plan/model_size.hpp"

namespace recipe::dsl::detail {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // what plan_to_tree gives
using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::optional<json> read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// The checkpoint's tensors (its own, then its base's for the names it lacks) and its vocab_size;
// a message when metadata.json cannot be read.
struct Saved {
  std::map<std::string, Shape> shapes;
  int64_t vocab = -1;
  std::string error;
};

void add_tensors(const json& meta, Saved& s) {
  if (!meta.contains("tensors") || !meta["tensors"].is_object()) return;
  for (const auto& [name, t] : meta["tensors"].items()) {
    if (!t.is_object() || !t.contains("global_shape") || !t["global_shape"].is_array() || s.shapes.count(name))
      continue;
    Shape shape;
    for (const json& d : t["global_shape"])
      if (d.is_number_integer()) shape.push_back(d.get<int64_t>());
    s.shapes[name] = shape;
  }
}

Saved read_saved(const fs::path& dir) {
  Saved s;
  const auto meta = read_json(dir / "metadata.json");
  if (!meta || !meta->is_object() || !meta->contains("tensors")) {
    s.error = (dir / "metadata.json").string() + " does not parse as a recipe checkpoint's metadata";
    return s;
  }
  add_tensors(*meta, s);
  if (meta->contains("base") && (*meta)["base"].is_object() && (*meta)["base"].contains("path") &&
      (*meta)["base"]["path"].is_string()) {
    const fs::path base = (*meta)["base"]["path"].get<std::string>();
    const auto base_meta = read_json(base / "metadata.json");
    if (!base_meta) {
      s.error = dir.string() + " holds only adapters and its base " + base.string() +
                " is missing or broken (no readable metadata.json)";
      return s;
    }
    add_tensors(*base_meta, s);
  }
  if (const auto common = read_json(dir / "common.json"))
    if (common->contains("model") && (*common)["model"].is_object() && (*common)["model"].contains("vocab_size") &&
        (*common)["model"]["vocab_size"].is_number_integer())
      s.vocab = (*common)["model"]["vocab_size"].get<int64_t>();
  return s;
}

// The tensors of the plan's model: name → (global shape, its table row).
struct Expected {
  Shape shape;
  const core::TensorDecl* decl;
};

std::map<std::string, Expected> expected_tensors(const plan::Plan& p) {
  const core::ArchShape s = plan::model_table_shape(p.model);
  core::Adapters a;
  if (p.peft.kind == plan::PeftKind::lora && p.peft.rank > 0) {
    a.rank = p.peft.rank;
    a.targets = plan::lora_targets(plan::model_family(p.model), p.peft.target_modules).mask;
  }
  std::map<std::string, Expected> out;
  for (const core::TensorDecl& d : core::tensor_table(s)) {
    if (!core::present(d, s, a)) continue;
    const Shape shape = core::global_shape(d, s, a);
    if (d.scope == core::Scope::layer)
      for (int l = 0; l < s.layers; ++l) out[core::tensor_name(d, l)] = {shape, &d};
    else
      out[core::tensor_name(d)] = {shape, &d};
  }
  return out;
}

// The recipe keys a dim of a tensor's shape is made of.
std::vector<std::string> keys_of(core::Dim d) {
  switch (d) {
    case core::Dim::hidden:
      return {"model.hidden_size"};
    case core::Dim::q_dim:
      return {"model.num_attention_heads", "model.head_dim"};
    case core::Dim::kv_dim:
      return {"model.num_kv_heads", "model.head_dim"};
    case core::Dim::ffn:
      return {"model.ffn_hidden_size"};
    case core::Dim::padded_vocab:
      return {"model.vocab_size"};
    case core::Dim::max_positions:
      return {"model.max_position_embeddings", "model.seq_length"};
    case core::Dim::lora_rank:
      return {"peft.rank"};
  }
  return {};
}

bool is_adapter_name(const std::string& n) {
  return n.find(".lora_a.") != std::string::npos || n.find(".lora_b.") != std::string::npos;
}

// A TOML value as JSON (what plan_to_tree gives for the same key).
std::optional<json> toml_to_json(const toml::node& n) {
  if (auto v = n.value<int64_t>(); v && n.is_integer()) return json(*v);
  if (n.is_floating_point()) return json(*n.value<double>());
  if (n.is_boolean()) return json(*n.value<bool>());
  if (n.is_string()) return json(*n.value<std::string>());
  if (const toml::array* arr = n.as_array()) {
    json a = json::array();
    for (const toml::node& e : *arr) {
      auto v = toml_to_json(e);
      if (!v) return std::nullopt;
      a.push_back(*v);
    }
    return a;
  }
  return std::nullopt;
}

bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y));
  }
  return a == b;
}

std::string shown(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// "section.key" → the checkpoint's plan.toml value where it differs from this plan's.
std::map<std::string, json> differing_keys(const fs::path& plan_toml, const plan::Plan& p) {
  std::map<std::string, json> out;
  toml::table saved;
  try {
    saved = toml::parse_file(plan_toml.string());
  } catch (const std::exception&) {
    return out;
  }
  const json now = plan_to_tree(p);
  for (const char* section : {"model", "peft"}) {
    const toml::table* t = saved[section].as_table();
    if (!t || !now.contains(section)) continue;
    for (const auto& [k, node] : *t) {
      const std::string key(k.str());
      if (!now[section].contains(key)) continue;
      const auto was = toml_to_json(node);
      if (was && !same_value(*was, now[section][key])) out[std::string(section) + "." + key] = *was;
    }
  }
  return out;
}

}  // namespace

void check_checkpoint_shapes(ResolveContext& ctx, const fs::path& ckpt, const std::string& load) {
  const plan::Plan& p = ctx.plan();
  if (!ctx.shape_ok) return;
  for (const std::string& b : ctx.bad_paths)
    if (b.starts_with("model.") || b.starts_with("peft.")) return;  // the model is not known yet
  const Saved saved = read_saved(ckpt);
  if (!saved.error.empty()) {
    ctx.violation("checkpoint.load", "checkpoint.load=\"" + load + "\": " + saved.error,
                  "point checkpoint.load at a complete checkpoint (`recipe ckpt verify` checks one)");
    return;
  }
  std::map<std::string, Expected> want;
  try {
    want = expected_tensors(p);
  } catch (const std::exception&) {
    return;  // no family: model.arch's own check reports it
  }

  std::vector<std::string> lines;  // one per tensor that does not fit
  std::set<std::string> keys;      // the recipe keys those tensors' dims and presence depend on
  bool layers_differ = false, parts_differ = false, adapters_differ = false;
  for (const auto& [name, e] : want) {
    auto it = saved.shapes.find(name);
    if (it == saved.shapes.end()) {
      if (e.decl->part == core::Part::lora_a || e.decl->part == core::Part::lora_b) {
        if (p.mode == plan::Mode::finetune) continue;  // a fine-tune starts its adapters
        adapters_differ = true;
      } else {
        (e.decl->scope == core::Scope::layer ? layers_differ : parts_differ) = true;
      }
      lines.push_back(name + " is missing there (" + shape_str(e.shape) + " here)");
      continue;
    }
    const Shape& have = it->second;
    if (have == e.shape) continue;
    const bool rows_only = e.decl->shard == core::Shard::vocab_rows && have.size() == e.shape.size() && !have.empty() &&
                           std::equal(have.begin() + 1, have.end(), e.shape.begin() + 1);
    if (rows_only && saved.vocab == p.model.vocab_size && have[0] >= p.model.vocab_size)
      continue;  // the same vocabulary padded for another TP size: the load pads or trims it
    lines.push_back(name + " is " + shape_str(have) + " there, " + shape_str(e.shape) + " here");
    for (size_t d = 0; d < e.decl->dims.size() && d < have.size(); ++d)
      if (d >= e.shape.size() || have.size() != e.shape.size() || have[d] != e.shape[d])
        for (const std::string& k : keys_of(e.decl->dims[d])) keys.insert(k);
    if (have.size() != e.shape.size())
      for (core::Dim dim : e.decl->dims)
        for (const std::string& k : keys_of(dim)) keys.insert(k);
  }
  for (const auto& [name, shape] : saved.shapes) {
    if (want.count(name) || name.starts_with("optimizer.") || name.starts_with("fp8.")) continue;
    const bool adapter = is_adapter_name(name);
    (adapter ? adapters_differ : name.starts_with("layers.") ? layers_differ : parts_differ) = true;
    lines.push_back(name + " " + shape_str(shape) + (adapter ? " (a LoRA adapter)" : "") +
                    " has no place in this plan's model");
  }
  if (lines.empty()) return;
  if (layers_differ) keys.insert("model.num_layers");
  if (parts_differ)
    for (const char* k : {"model.arch", "model.norm", "model.activation", "model.position_embedding", "model.bias",
                          "model.tie_embeddings"})
      keys.insert(k);
  if (adapters_differ)
    for (const char* k : {"peft.kind", "peft.rank", "peft.target_modules"}) keys.insert(k);

  std::string tensors;
  for (size_t i = 0; i < lines.size() && i < 4; ++i) tensors += (i ? "; " : "") + lines[i];
  if (lines.size() > 4) tensors += "; and " + std::to_string(lines.size() - 4) + " more";
  const std::string head = "checkpoint.load=\"" + load + "\" does not fit this plan's model (" +
                           std::to_string(lines.size()) + " tensor" + (lines.size() == 1 ? "" : "s") + "): " + tensors;

  // With the checkpoint's plan: the keys that differ, the candidates first.
  const fs::path plan_toml = ckpt / "plan.toml";
  const std::map<std::string, json> differ = differing_keys(plan_toml, p);
  std::vector<std::pair<std::string, json>> named;
  for (const auto& [k, v] : differ)
    if (keys.count(k)) named.emplace_back(k, v);
  if (named.empty() && !keys.empty())
    for (const auto& [k, v] : differ)  // a key the dims do not name (an option a family added)
      if (k != "model.seq_length" && k != "model.init_std") named.emplace_back(k, v);
  if (!named.empty()) {
    for (const auto& [k, v] : named)
      ctx.violation(k,
                    head + ". The checkpoint's model has " + k + "=" + shown(v) + " (its " + plan_toml.string() + ")",
                    "set " + k + "=" + shown(v) +
                        " (the checkpoint's model; parallelism may differ), or load a checkpoint of this model");
    return;
  }
  std::string which;
  for (const std::string& k : keys) which += (which.empty() ? "" : ", ") + k;
  ctx.violation("checkpoint.load", head,
                which.empty()
                    ? "use the model.* and peft.* settings the checkpoint was saved with"
                    : "set " + which + " to the checkpoint's model (its shapes above" +
                          (fs::exists(plan_toml) ? std::string(", its plan in ") + plan_toml.string() : std::string()) +
                          "), or load a checkpoint of this model");
}

}  // namespace recipe::dsl::detail
