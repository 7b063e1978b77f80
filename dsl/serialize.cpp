// plan::Plan → recipe-key tree → TOML (the run dir's resolved.toml), JSON, or a Lua recipe. Every key is
// written with its resolved value, so the output re-resolves to the identical plan on its own; the
// derived values ride along for humans in a `derived` table that the resolver ignores.
#include <charconv>
#include <cmath>
#include <sstream>

#include <toml++/toml.h>

#include "dsl/dsl.hpp"
#include "plan/model_size.hpp"
#include "dsl/plan_fields.hpp"

namespace recipe::dsl {

using json = nlohmann::ordered_json;

namespace {

json derived_json(const plan::Plan& p) {
  json d = json::object();
  d["head_dim"] = p.model.head_dim;
  d["padded_vocab_size"] = p.model.padded_vocab_size;
  d["num_params"] = p.model.num_params;
  d["num_params_unpadded"] = p.model.num_params > 0 ? count_params(p.model, p.model.vocab_size) : 0;
  d["num_non_embedding_params"] = p.model.num_non_embedding_params;
  if (p.peft.kind == plan::PeftKind::lora) d["trainable_params"] = lora_trainable_params(p);
  d["flops_per_token"] = p.model.flops_per_token;
  d["world_size"] = p.parallelism.world_size;
  d["dp"] = p.parallelism.dp;
  d["rank_order"] = p.parallelism.rank_order;
  d["stage_num_layers"] = p.parallelism.stage_num_layers;
  d["pipeline_bubble"] = p.parallelism.pipeline_bubble;
  d["workspace_bytes"] = p.kernels.workspace_bytes;
  d["num_micro_batches"] = p.trainer.num_micro_batches;
  d["eval_micro_batches"] = p.trainer.eval_micro_batches;
  d["tokens_per_step"] = p.trainer.tokens_per_step;
  d["classifier_chunk_rows"] = p.trainer.classifier_chunk_rows;
  d["device_memory_gib"] = p.executor.device_memory_gib;
  json mem = json::object();
  mem["weights"] = p.memory.weights;
  mem["gradients"] = p.memory.gradients;
  mem["optimizer"] = p.memory.optimizer;
  mem["activations"] = p.memory.activations;
  mem["workspace"] = p.memory.workspace;
  mem["total"] = p.memory.total;
  d["memory_bytes_per_rank"] = mem;
  return d;
}

toml::array to_toml_array(const json& a);

toml::table to_toml_table(const json& o) {
  toml::table t;
  for (const auto& [k, v] : o.items()) {
    if (v.is_object())
      t.insert_or_assign(k, to_toml_table(v));
    else if (v.is_array())
      t.insert_or_assign(k, to_toml_array(v));
    else if (v.is_boolean())
      t.insert_or_assign(k, v.get<bool>());
    else if (v.is_number_integer())
      t.insert_or_assign(k, v.get<int64_t>());
    else if (v.is_number_float())
      t.insert_or_assign(k, v.get<double>());
    else if (v.is_string())
      t.insert_or_assign(k, v.get<std::string>());
  }
  return t;
}

toml::array to_toml_array(const json& a) {
  toml::array arr;
  for (const auto& v : a) {
    if (v.is_object())
      arr.push_back(to_toml_table(v));
    else if (v.is_array())
      arr.push_back(to_toml_array(v));
    else if (v.is_boolean())
      arr.push_back(v.get<bool>());
    else if (v.is_number_integer())
      arr.push_back(v.get<int64_t>());
    else if (v.is_number_float())
      arr.push_back(v.get<double>());
    else if (v.is_string())
      arr.push_back(v.get<std::string>());
  }
  return arr;
}

// ---- Lua ----

bool is_lua_identifier(const std::string& s) {
  static const char* keywords[] = {"and",      "break",  "do",   "else", "elseif", "end",  "false", "for",
                                   "function", "goto",   "if",   "in",   "local",  "nil",  "not",   "or",
                                   "repeat",   "return", "then", "true", "until",  "while"};
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  for (const char* k : keywords)
    if (s == k) return false;
  return true;
}

std::string lua_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03d", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// A Lua float literal that reads back as exactly `v` and stays a float (Lua 5.4 has integers too).
std::string lua_float(double v) {
  if (std::isnan(v)) return "(0/0)";
  if (std::isinf(v)) return v > 0 ? "(1/0)" : "(-1/0)";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void write_lua(std::ostream& os, const json& v, int indent) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  if (v.is_object()) {
    if (v.empty()) {
      os << "{}";
      return;
    }
    os << "{\n";
    for (const auto& [k, e] : v.items()) {
      os << pad << "  " << (is_lua_identifier(k) ? k : "[" + lua_string(k) + "]") << " = ";
      write_lua(os, e, indent + 1);
      os << ",\n";
    }
    os << pad << "}";
  } else if (v.is_array()) {
    os << "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) os << ", ";
      write_lua(os, v[i], indent + 1);
    }
    os << "}";
  } else if (v.is_boolean()) {
    os << (v.get<bool>() ? "true" : "false");
  } else if (v.is_number_integer()) {
    os << v.get<int64_t>();
  } else if (v.is_number_float()) {
    os << lua_float(v.get<double>());
  } else if (v.is_string()) {
    os << lua_string(v.get<std::string>());
  } else {
    os << "nil";
  }
}

// The tree a resolved plan is written as: its source, then every recipe key.
json full_tree(const plan::Plan& plan) {
  json tree = json::object();
  if (!plan.source.empty()) tree["source"] = plan.source;
  const json keys = plan_to_tree(plan);
  for (const auto& [k, v] : keys.items()) tree[k] = v;
  return tree;
}

}  // namespace

json plan_to_tree(const plan::Plan& plan) {
  json tree = json::object();
  for (const auto& field : plan_fields()) {
    if (field.section.empty())
      tree[field.key] = field.get(plan);
    else
      tree[field.section][field.key] = field.get(plan);
  }
  return tree;
}

std::string to_toml(const plan::Plan& plan) {
  toml::table table = to_toml_table(full_tree(plan));
  table.insert_or_assign("derived", to_toml_table(derived_json(plan)));
  std::ostringstream os;
  os << "# Resolved recipe plan" << (plan.source.empty() ? "" : " of " + plan.source)
     << ". Every key is explicit, so this file re-resolves to the same plan on its own;\n"
     << "# [derived] shows the computed values and is ignored when the file is loaded.\n\n";
  os << table << "\n";
  return os.str();
}

std::string to_json(const plan::Plan& plan) {
  json tree = full_tree(plan);
  tree["derived"] = derived_json(plan);
  return tree.dump(2) + "\n";
}

std::string to_lua(const plan::Plan& plan) {
  std::ostringstream os;
  os << "-- Resolved recipe plan" << (plan.source.empty() ? "" : " of " + plan.source) << "; every key is explicit.\n";
  os << "-- Derived: " << derived_json(plan).dump() << "\n";
  os << "return ";
  write_lua(os, full_tree(plan), 0);
  os << "\n";
  return os.str();
}

plan::Plan load_resolved_plan(const std::string& resolved_toml_path, const ExecutorFacts& facts) {
  ConfigTree tree = load_recipe(resolved_toml_path);
  ResolveResult result = resolve(tree, facts);
  if (!result.ok())
    throw RecipeError(resolved_toml_path + ": the resolved plan no longer resolves\n" +
                      format_violations(result.violations));
  return std::move(result.plan);
}

}  // namespace recipe::dsl
