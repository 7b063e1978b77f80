// config.json both ways, read off the family's HF architecture (family/family.hpp's HfConfigKey
// list): which architecture a shape exports as, the config.json export writes, and what an imported
// config.json says that the recipe does not. No family is named here.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "family/registry.hpp"
#include "hf/hf_convert.hpp"

namespace recipe::core::hf {

namespace {

using json = nlohmann::json;

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string r;
  for (size_t i = 0; i < items.size(); ++i) r += (i ? sep : "") + items[i];
  return r;
}

// The recipe key of each flag, and the value words it takes (true, false).
struct FlagKey {
  ArchFlag flag;
  const char* key;
  const char* on;
  const char* off;
};
constexpr FlagKey kFlagKeys[] = {
    {flag_norm, "model.norm", "layernorm", "rmsnorm"},
    {flag_activation, "model.activation", "gelu", "swiglu"},
    {flag_positions, "model.position_embedding", "learned", "rope"},
    {flag_bias, "model.bias", "true", "false"},
    {flag_tied, "model.tie_embeddings", "true", "false"},
    {flag_qk_norm, "model.qk_norm", "true", "false"},
};

std::string flag_setting(const FlagKey& k, const ArchFlags& f) {
  return std::string(k.key) + "=" + (flag_value(f, k.flag) ? k.on : k.off);
}

// The recipe key an HF config field reads.
const char* recipe_key(HfField f) {
  switch (f) {
    case HfField::vocab:
      return "model.vocab_size";
    case HfField::hidden:
      return "model.hidden_size";
    case HfField::layers:
      return "model.num_layers";
    case HfField::heads:
      return "model.num_attention_heads";
    case HfField::kv_heads:
      return "model.num_kv_heads";
    case HfField::head_dim:
      return "model.head_dim";
    case HfField::ffn:
      return "model.ffn_hidden_size";
    case HfField::max_positions:
      return "model.max_position_embeddings";
    case HfField::norm_eps:
      return "model.norm_eps";
    case HfField::rope_theta:
      return "model.rope_theta";
    case HfField::init_std:
      return "model.init_std";
    case HfField::bias:
      return "model.bias";
    case HfField::tied:
      return "model.tie_embeddings";
    case HfField::none:
      break;
  }
  return "?";
}

enum class Kind { integer, real, boolean };
Kind kind_of(HfField f) {
  switch (f) {
    case HfField::norm_eps:
    case HfField::rope_theta:
    case HfField::init_std:
      return Kind::real;
    case HfField::bias:
    case HfField::tied:
      return Kind::boolean;
    default:
      return Kind::integer;
  }
}

// The shape's value of a field, as config.json holds it.
nlohmann::ordered_json field_value(const ArchShape& s, HfField f) {
  switch (f) {
    case HfField::vocab:
      return s.vocab;
    case HfField::hidden:
      return s.hidden;
    case HfField::layers:
      return s.layers;
    case HfField::heads:
      return s.heads;
    case HfField::kv_heads:
      return s.kv_heads;
    case HfField::head_dim:
      return s.head_dim;
    case HfField::ffn:
      return s.ffn;
    case HfField::max_positions:
      return s.max_positions;
    case HfField::norm_eps:
      return double(s.norm_eps);
    case HfField::rope_theta:
      return double(s.rope_theta);
    case HfField::init_std:
      return s.init_std;
    case HfField::bias:
      return s.bias;
    case HfField::tied:
      return s.tied;
    case HfField::none:
      break;
  }
  return nullptr;
}

// "a.b" → "b"
std::string last_name(const char* key) {
  const std::string k = key;
  const auto dot = k.rfind('.');
  return dot == std::string::npos ? k : k.substr(dot + 1);
}

// What `s` has that `h` cannot express; the flags of its block first (norm, activation, positions:
// a different function altogether), then the rest.
void check_expressible(const ArchShape& s, const HfArchitecture& h) {
  const ArchFlags have = flags_of(s);
  const Family& fam = *s.family;
  unsigned wrong = 0;
  for (ArchFlag f : kArchFlags)
    if ((h.fixed & f) && flag_value(have, f) != flag_value(h.flags, f)) wrong |= f;
  const unsigned block = flag_norm | flag_activation | flag_positions;
  if (wrong & block) {
    std::vector<std::string> set;
    for (const FlagKey& k : kFlagKeys)
      if (k.flag & block) set.push_back(flag_setting(k, have));
    throw std::invalid_argument(join(set, ", ") +
                                " match no Hugging Face architecture that computes the same function: model.arch=" +
                                fam.arch + " reads and writes " + h.model_type + ", which computes " + h.computes +
                                "; set those flags (or leave them to the family), or pick the model.arch whose "
                                "architecture computes these");
  }
  std::vector<std::string> problems;
  for (const FlagKey& k : kFlagKeys)
    if (wrong & k.flag)
      problems.push_back(flag_setting(k, have) + " (" + h.model_type + " computes " + flag_setting(k, h.flags) + ")");
  if (h.mha_only && s.kv_heads != s.heads)
    problems.push_back("model.num_kv_heads=" + std::to_string(s.kv_heads) + " < num_attention_heads=" +
                       std::to_string(s.heads) + " (" + h.model_type + " has no grouped-query attention)");
  if (h.head_dim_from_hidden && int64_t(s.head_dim) * s.heads != s.hidden)
    problems.push_back("model.head_dim=" + std::to_string(s.head_dim) + " with " + std::to_string(s.heads) +
                       " heads is not hidden_size=" + std::to_string(s.hidden) + " (" + h.model_type +
                       " derives head_dim = hidden / heads)");
  if (!problems.empty())
    throw std::invalid_argument(std::string("this ") + fam.arch + " model has no Hugging Face " + h.model_type +
                                " equivalent: " + join(problems, "; "));
}

const HfConfigKey* find_key(const HfArchitecture& h, const std::string& key) {
  for (const HfConfigKey& k : h.config)
    if (key == k.key) return &k;
  return nullptr;
}

}  // namespace

const HfArchitecture& hf_architecture(const ModelShape& s) {
  const Family& fam = *s.arch.family;
  if (fam.hf.empty())
    throw std::invalid_argument(std::string("model.arch=") + fam.arch +
                                " has no Hugging Face architecture to read or write");
  check_expressible(s.arch, fam.hf.front());
  return fam.hf.front();
}

nlohmann::ordered_json make_config(const ModelShape& s, ckpt::DType dtype) {
  const HfArchitecture& h = hf_architecture(s);
  nlohmann::ordered_json c;
  c["architectures"] = {h.class_name};
  c["model_type"] = h.model_type;
  for (const HfConfigKey& k : h.config) {
    if (!(k.io & hf_write)) continue;
    const nlohmann::ordered_json v =
        k.field == HfField::none ? nlohmann::ordered_json::parse(k.value) : field_value(s.arch, k.field);
    const std::string key = k.key;
    const auto dot = key.find('.');
    if (dot == std::string::npos)
      c[key] = v;
    else
      c[key.substr(0, dot)][key.substr(dot + 1)] = v;
  }
  const char* torch_dtype = dtype == ckpt::DType::bf16 ? "bfloat16" : "float32";
  c["torch_dtype"] = torch_dtype;  // transformers < 5
  c["dtype"] = torch_dtype;        // transformers 5
  return c;
}

int hf_column(const nlohmann::json& config, const ModelShape& s, std::vector<std::string>& bad) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    throw std::invalid_argument("config.json has no \"model_type\"; it is not a transformers model config");
  const std::string mt = config["model_type"].get<std::string>();
  const Family& fam = *s.arch.family;
  for (size_t i = 0; i < fam.hf.size(); ++i)
    if (mt == fam.hf[i].model_type) return int(i);
  std::vector<std::string> known;
  const Family* other = nullptr;
  for (const Family* f : families())
    for (const HfArchitecture& h : f->hf) {
      known.push_back(std::string("\"") + h.model_type + "\"");
      if (mt == h.model_type) other = f;
    }
  if (!other)
    throw std::invalid_argument("config.json has model_type \"" + mt + "\": only " + join(known, " and ") +
                                " models can be imported (other architectures compute something the engine does not)");
  bad.push_back("model_type is \"" + mt + "\" in config.json, the recipe describes a " + fam.arch +
                " model (model.arch=" + fam.arch + ", which reads " + fam.hf.front().model_type +
                "): use a recipe of the same architecture (model.arch=" + other->arch + ")");
  return -1;
}

std::vector<std::string> config_mismatches(const nlohmann::json& config, const ModelShape& s) {
  std::vector<std::string> bad;
  const int column = hf_column(config, s, bad);
  if (column < 0) return bad;
  const HfArchitecture& h = s.arch.family->hf[size_t(column)];
  check_expressible(s.arch, h);

  // The integer a key holds, or (absent) its default.
  auto int_or = [&](const char* key) -> int64_t {
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
    const HfConfigKey* k = find_key(h, key);
    return k ? int64_t(k->fallback) : 0;
  };
  for (const HfConfigKey& k : h.config) {
    if (!(k.io & hf_check)) continue;
    const json* obj = &config;
    if (k.in_rope_parameters && config.contains("rope_parameters") && config["rope_parameters"].is_object())
      obj = &config["rope_parameters"];
    const std::string name = k.in_rope_parameters ? last_name(k.key) : std::string(k.key);
    const bool given = obj->contains(name) && !(*obj)[name].is_null();

    if (k.field == HfField::none) {
      const json theirs = given ? (*obj)[name] : json::parse(k.value);
      bool ok = false;
      for (const char* a : k.accepted) ok = ok || theirs == json::parse(a);
      if (!ok) bad.push_back(std::string(k.key) + " is " + theirs.dump() + " in config.json; " + k.why);
      continue;
    }
    const json ours = field_value(s.arch, k.field);
    const std::string mine = std::string(recipe_key(k.field)) + "=";
    switch (kind_of(k.field)) {
      case Kind::integer: {
        std::optional<int64_t> theirs;
        if (!k.no_default) {
          int64_t v = int64_t(k.fallback);
          if (k.times) v *= int_or(k.times);
          if (k.over) {
            const int64_t d = int_or(k.over);
            v = d > 0 ? v / d : 0;
          }
          theirs = v;
        }
        if (given) {
          if (!(*obj)[name].is_number_integer()) {
            bad.push_back(std::string(k.key) + " is " + (*obj)[name].dump() + " in config.json, not an integer");
            break;
          }
          theirs = (*obj)[name].get<int64_t>();
        }
        if (theirs && *theirs != ours.get<int64_t>())
          bad.push_back(std::string(k.key) + " is " + std::to_string(*theirs) + " in config.json, the recipe has " +
                        mine + std::to_string(ours.get<int64_t>()));
        break;
      }
      case Kind::real: {
        double theirs = k.fallback;
        if (given) {
          if (!(*obj)[name].is_number()) {
            bad.push_back(name + " is " + (*obj)[name].dump() + " in config.json, not a number");
            break;
          }
          theirs = (*obj)[name].get<double>();
        }
        const double o = ours.get<double>();
        if (std::fabs(theirs - o) > 1e-6 * std::max(std::fabs(theirs), std::fabs(o))) {
          std::ostringstream m;
          m << name << " is " << theirs << " in config.json, the recipe has " << mine << o;
          bad.push_back(m.str());
        }
        break;
      }
      case Kind::boolean: {
        bool theirs = k.fallback != 0;
        if (obj->contains(name) && (*obj)[name].is_boolean()) theirs = (*obj)[name].get<bool>();
        if (theirs != ours.get<bool>())
          bad.push_back(std::string(k.key) + " is " + (theirs ? "true" : "false") + " in config.json, the recipe has " +
                        mine + (ours.get<bool>() ? "true" : "false"));
        break;
      }
    }
  }
  return bad;
}

}  // namespace recipe::core::hf
