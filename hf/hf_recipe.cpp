// config.json → recipe settings, read off the family descriptors (see hf_recipe.hpp). No family is
// named here.
#include "hf/hf_recipe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "family/registry.hpp"

namespace recipe::core::hf {

namespace {

using json = nlohmann::json;

// The flags an HF architecture fixes (its block: the function it computes) and their recipe keys;
// biases and tying are config fields (HfField::bias, tied).
struct FlagKey {
  ArchFlag flag;
  const char* key;
  const char* on;
  const char* off;
};
constexpr FlagKey kBlockFlags[] = {
    {flag_norm, "model.norm", "layernorm", "rmsnorm"},
    {flag_activation, "model.activation", "gelu", "swiglu"},
    {flag_positions, "model.position_embedding", "learned", "rope"},
};

// config.json's value at `key` ("a.b": key b of object a), or in "rope_parameters" where the key
// lives there (transformers 5); nullptr when absent or null.
const json* config_value(const json& config, const HfConfigKey& k) {
  std::string key = k.key;
  const json* obj = &config;
  if (k.in_rope_parameters) {
    const auto dot = key.rfind('.');
    if (dot != std::string::npos) key = key.substr(dot + 1);
    if (config.contains("rope_parameters") && config["rope_parameters"].is_object() &&
        config["rope_parameters"].contains(key))
      obj = &config["rope_parameters"];
  } else if (const auto dot = key.find('.'); dot != std::string::npos) {
    const std::string outer = key.substr(0, dot);
    if (!config.contains(outer) || !config[outer].is_object()) return nullptr;
    obj = &config[outer];
    key = key.substr(dot + 1);
  }
  if (!obj->contains(key) || (*obj)[key].is_null()) return nullptr;
  return &(*obj)[key];
}

const HfConfigKey* find_key(const HfArchitecture& h, const char* key) {
  for (const HfConfigKey& k : h.config)
    if (std::string(key) == k.key) return &k;
  return nullptr;
}

}  // namespace

RecipeSettings model_settings(const json& config) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    throw std::invalid_argument("config.json has no \"model_type\"; it is not a transformers model config");
  const std::string mt = config["model_type"].get<std::string>();
  const Family* fam = nullptr;
  const HfArchitecture* h = nullptr;
  std::string known;
  for (const Family* f : families())
    for (const HfArchitecture& a : f->hf) {
      known += (known.empty() ? "\"" : ", \"") + std::string(a.model_type) + "\"";
      if (!fam && mt == a.model_type) fam = f, h = &a;
    }
  if (!fam)
    throw std::invalid_argument("config.json has model_type \"" + mt + "\": no model family of the engine reads it (" +
                                known + " do)");

  RecipeSettings out;
  out.emplace_back("model.arch", fam->arch);
  for (const FlagKey& f : kBlockFlags)
    if (h->fixed & f.flag) out.emplace_back(f.key, flag_value(h->flags, f.flag) ? f.on : f.off);

  // An integer key's value, or (absent) its default, as hf_config.cpp reads them.
  auto int_or = [&](const char* key) -> int64_t {
    const HfConfigKey* k = find_key(*h, key);
    const json* v = k ? config_value(config, *k) : (config.contains(key) ? &config[key] : nullptr);
    if (v && v->is_number_integer()) return v->get<int64_t>();
    return k ? int64_t(k->fallback) : 0;
  };
  std::set<std::string> done;
  for (const HfConfigKey& k : h->config) {
    if (k.field == HfField::none) continue;
    const bool real = hf_field_is_real(k.field), boolean = hf_field_is_boolean(k.field);
    if (!real && !boolean && !hf_field_is_integer(k.field)) continue;  // read as a whole below
    const std::string key = hf_field_recipe_key(k.field);
    if (done.count(key)) continue;
    json value;
    if (const json* v = config_value(config, k)) {
      // A value of the wrong type is left out: the import's check names it.
      if (boolean ? !v->is_boolean() : real ? !v->is_number() : !v->is_number_integer()) continue;
      value = real ? json(v->get<double>()) : *v;
    } else if ((k.io & hf_check) && !k.no_default) {
      if (boolean) {
        value = k.fallback != 0;
      } else if (real) {
        value = k.fallback;
      } else {
        int64_t v = int64_t(k.fallback);
        if (k.times) v *= int_or(k.times);
        if (k.over) {
          const int64_t d = int_or(k.over);
          v = d > 0 ? v / d : 0;
        }
        value = v;
      }
    } else {
      continue;
    }
    out.emplace_back(key, value);
    done.insert(key);
  }
  for (auto& kv : rope_scaling_settings(config)) out.push_back(std::move(kv));
  // The HF architecture export is to write, where it is not the family's first (Mistral's).
  if (h != &fam->hf.front()) out.emplace_back("model.hf_architecture", mt);
  return out;
}

std::string eod_token_of(const json& generation_config, const json& tokenizer) {
  if (!generation_config.is_object() || !generation_config.contains("eos_token_id")) return "";
  json eos = generation_config["eos_token_id"];
  if (eos.is_array() && !eos.empty()) eos = eos.front();
  if (!eos.is_number_integer() || !tokenizer.is_object() || !tokenizer.contains("added_tokens") ||
      !tokenizer["added_tokens"].is_array())
    return "";
  for (const json& t : tokenizer["added_tokens"])
    if (t.is_object() && t.value("id", int64_t(-1)) == eos.get<int64_t>() && t.contains("content") &&
        t["content"].is_string())
      return t["content"].get<std::string>();
  return "";
}

namespace {

std::string lua_string(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

std::string lua_value(const json& v) {
  if (v.is_string()) return lua_string(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    char b[40];
    const double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 1e15) {  // 500000.0, not 5e+05
      std::snprintf(b, sizeof b, "%.1f", d);
      return b;
    }
    std::snprintf(b, sizeof b, "%.17g", d);
    std::string s = b;
    // Shortest text that reads back the same double, and a float literal (Lua's 1.0, not 1).
    for (int prec = 1; prec <= 17; ++prec) {
      std::snprintf(b, sizeof b, "%.*g", prec, v.get<double>());
      if (std::strtod(b, nullptr) == v.get<double>()) {
        s = b;
        break;
      }
    }
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  if (v.is_array()) {
    std::string r = "{ ";
    for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + lua_value(v[i]);
    return r + " }";
  }
  return "nil";
}

}  // namespace

std::string lua_recipe(const RecipeSettings& settings, const std::string& base, const std::string& comment) {
  std::string text;
  size_t at = 0;
  while (at < comment.size()) {
    size_t nl = comment.find('\n', at);
    if (nl == std::string::npos) nl = comment.size();
    text += "-- " + comment.substr(at, nl - at) + "\n";
    at = nl + 1;
  }
  text += "return " + (base.empty() ? std::string() : base + " ") + "{\n";
  // Top-level keys first, then one table per section in the order sections first appear.
  std::vector<std::string> sections;
  for (const auto& [key, v] : settings) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) {
      text += "  " + key + " = " + lua_value(v) + ",\n";
    } else if (std::find(sections.begin(), sections.end(), key.substr(0, dot)) == sections.end()) {
      sections.push_back(key.substr(0, dot));
    }
  }
  for (const std::string& s : sections) {
    text += "  " + s + " = {\n";
    for (const auto& [key, v] : settings)
      if (key.size() > s.size() && key.compare(0, s.size() + 1, s + ".") == 0)
        text += "    " + key.substr(s.size() + 1) + " = " + lua_value(v) + ",\n";
    text += "  },\n";
  }
  return text + "}\n";
}

}  // namespace recipe::core::hf
