// config.json both ways, read off the family's HF architecture (family/family.hpp's HfConfigKey
// list): which architecture a shape exports as, the config.json export writes, and what an imported
// config.json says that the recipe does not. No family is named here.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "family/registry.hpp"
#include "hf/hf_convert.hpp"
#include "hf/hf_recipe.hpp"

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
    case HfField::rope_type:
      return "model.rope_scaling";
    case HfField::rope_factor:
      return "model.rope_scaling_factor";
    case HfField::rope_low_freq_factor:
      return "model.rope_scaling_low_freq_factor";
    case HfField::rope_high_freq_factor:
      return "model.rope_scaling_high_freq_factor";
    case HfField::rope_original_max_positions:
      return "model.rope_scaling_original_max_positions";
    case HfField::sliding_window:
      return "model.max_position_embeddings";
    case HfField::none:
      break;
  }
  return "?";
}

enum class Kind { integer, real, boolean, window, rope };
Kind kind_of(HfField f) {
  switch (f) {
    case HfField::norm_eps:
    case HfField::rope_theta:
    case HfField::init_std:
      return Kind::real;
    case HfField::bias:
    case HfField::tied:
      return Kind::boolean;
    case HfField::sliding_window:
      return Kind::window;
    case HfField::rope_type:
    case HfField::rope_factor:
    case HfField::rope_low_freq_factor:
    case HfField::rope_high_freq_factor:
    case HfField::rope_original_max_positions:
      return Kind::rope;  // read as a whole by check_rope_scaling
    default:
      return Kind::integer;
  }
}

// A float field (ArchShape holds eps and θ as float) as the double config.json should hold: the
// shortest decimal that reads back as this float (1e-5f → 1e-05, not 9.999999747378752e-06), so an
// imported 1e-05 exports as 1e-05 and transformers reads the value the recipe states.
double float_as_written(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
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
      return float_as_written(s.norm_eps);
    case HfField::rope_theta:
      return float_as_written(s.rope_theta);
    case HfField::init_std:
      return s.init_std;
    case HfField::bias:
      return s.bias;
    case HfField::tied:
      return s.tied;
    case HfField::rope_type:
      return s.rope_scaling == RopeScaling::llama3 ? "llama3" : "default";
    case HfField::rope_factor:
      return s.rope_factor;
    case HfField::rope_low_freq_factor:
      return s.rope_low_freq_factor;
    case HfField::rope_high_freq_factor:
      return s.rope_high_freq_factor;
    case HfField::rope_original_max_positions:
      return s.rope_original_max_positions;
    case HfField::sliding_window:
      return nullptr;  // no window: full causal attention
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

std::string num(double v) {
  std::ostringstream m;
  m << v;
  return m.str();
}

// config.json's RoPE scaling against the shape's (HfArchitecture::rope_scaling says where it is).
// transformers 5 takes the top-level "rope_scaling" object where there is one (transformers 4's
// spelling) and "rope_parameters" otherwise; the type is "rope_type" or the older "type"; an
// absent type is "default"; llama3's original_max_position_embeddings defaults to
// max_position_embeddings. Every other rope_type scales positions in a way the engine does not
// compute, and is refused by name.
struct RopeParams {
  const char* where = "rope_parameters";  // the object they were read from
  json params = json::object();
  std::string type = "default";
  std::string error;  // rope_scaling is neither an object nor null
};
RopeParams rope_params(const nlohmann::json& config) {
  RopeParams r;
  if (config.contains("rope_scaling") && config["rope_scaling"].is_object() && !config["rope_scaling"].empty()) {
    r.params = config["rope_scaling"];
    r.where = "rope_scaling";
  } else if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) {
    r.params = config["rope_parameters"];
  } else if (config.contains("rope_scaling") && !config["rope_scaling"].is_null() &&
             !config["rope_scaling"].is_object()) {
    r.error = "rope_scaling is " + config["rope_scaling"].dump() + " in config.json, not an object or null";
  }
  for (const char* k : {"rope_type", "type"})
    if (r.params.contains(k) && r.params[k].is_string()) {
      r.type = r.params[k].get<std::string>();
      break;
    }
  return r;
}

// llama3's parameters: config.json's key, the recipe key, the shape's value.
struct Llama3Param {
  const char* key;
  const char* ours;
};
constexpr Llama3Param kLlama3Params[] = {
    {"factor", "model.rope_scaling_factor"},
    {"low_freq_factor", "model.rope_scaling_low_freq_factor"},
    {"high_freq_factor", "model.rope_scaling_high_freq_factor"},
    {"original_max_position_embeddings", "model.rope_scaling_original_max_positions"},
};
// A llama3 parameter as config.json gives it (original_max_position_embeddings defaults to
// max_position_embeddings).
std::optional<double> llama3_param(const json& config, const json& params, const std::string& key) {
  if (params.contains(key) && params[key].is_number()) return params[key].get<double>();
  if (key == "original_max_position_embeddings" && config.contains("max_position_embeddings") &&
      config["max_position_embeddings"].is_number())
    return config["max_position_embeddings"].get<double>();
  return std::nullopt;
}

void check_rope_scaling(const nlohmann::json& config, const ArchShape& s, std::vector<std::string>& bad) {
  const RopeParams rp = rope_params(config);
  if (!rp.error.empty()) {
    bad.push_back(rp.error);
    return;
  }
  const char* where = rp.where;
  const json& params = rp.params;
  const std::string& type = rp.type;
  // partial_rotary_factor < 1 rotates only part of each head: not computed here.
  for (const json* o : {static_cast<const json*>(&params), &config})
    if (o->contains("partial_rotary_factor") && (*o)["partial_rotary_factor"].is_number() &&
        (*o)["partial_rotary_factor"].get<double>() != 1.0)
      bad.push_back("partial_rotary_factor is " + (*o)["partial_rotary_factor"].dump() +
                    " in config.json; the engine rotates whole heads (1.0) only");
  const bool ours_scaled = s.rope_scaling == RopeScaling::llama3;
  if (type == "default") {
    if (ours_scaled)
      bad.push_back(std::string(where) +
                    " has rope_type \"default\" in config.json (no scaling), the recipe has "
                    "model.rope_scaling=\"llama3\": drop model.rope_scaling and its rope_scaling_* keys");
    return;
  }
  if (type != "llama3") {
    bad.push_back(std::string(where) + ".rope_type is \"" + type +
                  "\" in config.json: the engine computes RoPE scaling \"llama3\" (Llama 3.1) only, not " + type +
                  " (nor linear, dynamic, yarn, longrope); this model cannot be imported");
    return;
  }
  if (!ours_scaled) {
    bad.push_back(std::string(where) +
                  ".rope_type is \"llama3\" in config.json, the recipe has model.rope_scaling=\"none\": set "
                  "model.rope_scaling=\"llama3\" with its rope_scaling_* keys from config.json (the llama3_1_8b "
                  "preset has Llama 3.1's)");
    return;
  }
  const double mine[] = {s.rope_factor, s.rope_low_freq_factor, s.rope_high_freq_factor,
                         double(s.rope_original_max_positions)};
  for (size_t i = 0; i < std::size(kLlama3Params); ++i) {
    const Llama3Param& p = kLlama3Params[i];
    const std::optional<double> theirs = llama3_param(config, params, p.key);
    if (!theirs) {
      bad.push_back(std::string(where) + "." + p.key + " is missing in config.json (rope_type \"llama3\" needs it)");
      continue;
    }
    if (std::fabs(*theirs - mine[i]) > 1e-9 * std::max(std::fabs(*theirs), std::fabs(mine[i])))
      bad.push_back(std::string(where) + "." + p.key + " is " + num(*theirs) + " in config.json, the recipe has " +
                    p.ours + "=" + num(mine[i]));
  }
}

}  // namespace

const HfArchitecture& hf_architecture(const ModelShape& s) {
  const Family& fam = *s.arch.family;
  if (fam.hf.empty())
    throw std::invalid_argument(std::string("model.arch=") + fam.arch +
                                " has no Hugging Face architecture to read or write");
  const HfArchitecture& h = fam.hf.at(size_t(s.arch.hf));
  check_expressible(s.arch, h);
  return h;
}

int hf_names_column(const ModelShape& s) {
  const HfArchitecture& h = hf_architecture(s);
  return h.names_column >= 0 ? h.names_column : s.arch.hf;
}

nlohmann::ordered_json make_config(const ModelShape& s, ckpt::DType dtype) {
  const HfArchitecture& h = hf_architecture(s);
  nlohmann::ordered_json c;
  c["architectures"] = {h.class_name};
  c["model_type"] = h.model_type;
  const bool scaled = s.arch.rope_scaling != RopeScaling::none;
  for (const HfConfigKey& k : h.config) {
    if (!(k.io & hf_write) || (k.scaled_only && !scaled)) continue;
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
  const HfArchitecture& ours = fam.hf.at(size_t(s.arch.hf));
  if (mt == ours.model_type) return s.arch.hf;
  // Another architecture of the same family: the model would compute alike, but export would
  // write the recipe's, so the recipe must name config.json's (model.hf_architecture).
  for (const HfArchitecture& h : fam.hf)
    if (mt == h.model_type) {
      bad.push_back("model_type is \"" + mt + "\" in config.json, the recipe's model.hf_architecture is \"" +
                    ours.model_type + "\": set model.hf_architecture=\"" + mt + "\" (so that export writes " +
                    h.class_name + " again)");
      return -1;
    }
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
                " model (model.arch=" + fam.arch + ", which reads " + ours.model_type +
                "): use a recipe of the same architecture (model.arch=" + other->arch + ")");
  return -1;
}

std::vector<std::string> config_mismatches(const nlohmann::json& config, const ModelShape& s) {
  std::vector<std::string> bad;
  const int column = hf_column(config, s, bad);
  if (column < 0) return bad;
  const HfArchitecture& h = s.arch.family->hf[size_t(column)];
  check_expressible(s.arch, h);
  if (h.rope_scaling) check_rope_scaling(config, s.arch, bad);

  // The integer a key holds, or (absent) its default.
  auto int_or = [&](const char* key) -> int64_t {
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
    const HfConfigKey* k = find_key(h, key);
    return k ? int64_t(k->fallback) : 0;
  };
  for (const HfConfigKey& k : h.config) {
    if (!(k.io & hf_check)) continue;
    const json* obj = &config;
    const std::string name = k.in_rope_parameters ? last_name(k.key) : std::string(k.key);
    if (k.in_rope_parameters && config.contains("rope_parameters") && config["rope_parameters"].is_object() &&
        config["rope_parameters"].contains(name))
      obj = &config["rope_parameters"];
    const bool given = obj->contains(name) && !(*obj)[name].is_null();

    if (k.field == HfField::none) {
      const json theirs = given ? (*obj)[name] : json::parse(k.value);
      auto accepted = [&](const json& v) {
        for (const char* a : k.accepted)
          if (v == json::parse(a)) return true;
        return false;
      };
      bool ok = !given && k.each;  // an absent list: transformers derives it
      if (given && k.each && theirs.is_array()) {
        ok = true;
        for (const json& v : theirs) ok = ok && accepted(v);
      } else if (!k.each) {
        ok = accepted(theirs);
      }
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
      case Kind::rope:
        break;  // check_rope_scaling
      case Kind::window: {
        // A sliding window lets query position q see keys k with q − k < window (transformers'
        // sliding_window_overlay: k > q − window). Positions run below max_position_embeddings
        // (the resolver bounds seq_length by it), so q − k ≤ max_positions − 1: a window of at
        // least max_positions hides no key and is exactly full causal attention. A smaller one
        // would hide keys, and the engine has no sliding-window attention.
        if (obj->contains(name) && (*obj)[name].is_null()) break;  // null: no window
        int64_t window = int64_t(k.fallback);
        if (given) {
          if (!(*obj)[name].is_number_integer()) {
            bad.push_back(name + " is " + (*obj)[name].dump() + " in config.json, not an integer or null");
            break;
          }
          window = (*obj)[name].get<int64_t>();
        }
        if (window < s.arch.max_positions)
          bad.push_back(name + " is " + std::to_string(window) +
                        (given ? "" : " (" + std::string(h.model_type) + "'s default for an absent key)") +
                        " in config.json, below the recipe's " + mine + std::to_string(s.arch.max_positions) +
                        ": the engine has no sliding-window attention; import a model with sliding_window null "
                        "(Mistral 7B v0.2 and later), or lower model.max_position_embeddings to " +
                        std::to_string(window) + " (the window then covers every position)");
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

// hf_recipe.hpp: config.json → recipe keys, through the tables above.
const char* hf_field_recipe_key(HfField f) { return recipe_key(f); }
bool hf_field_is_real(HfField f) { return kind_of(f) == Kind::real; }
bool hf_field_is_boolean(HfField f) { return kind_of(f) == Kind::boolean; }
bool hf_field_is_integer(HfField f) { return kind_of(f) == Kind::integer; }

std::vector<std::pair<std::string, nlohmann::json>> rope_scaling_settings(const nlohmann::json& config) {
  const RopeParams rp = rope_params(config);
  if (!rp.error.empty() || rp.type != "llama3") return {};  // none, or refused by the import's check
  std::vector<std::pair<std::string, nlohmann::json>> out{{"model.rope_scaling", "llama3"}};
  for (const Llama3Param& p : kLlama3Params)
    if (const auto v = llama3_param(config, rp.params, p.key))
      out.emplace_back(p.ours, std::string(p.key) == "original_max_position_embeddings" ? json(int64_t(*v)) : json(*v));
  return out;
}

}  // namespace recipe::core::hf
