// The recipe of a downloaded Hugging Face model, for `recipe ckpt import DIR`: config.json read
// through the family descriptors (family/family.hpp: the family whose HF architecture has
// config.json's model_type, and that architecture's config keys ↔ ArchShape fields, the table
// hf_config.cpp writes and checks config.json with), so a family added to the registry is covered
// without a line here. What is written holds only recipe keys the engine computes:
//
//   model.arch                 the family
//   model.norm/activation/     the flags the HF architecture fixes (RMSNorm, SwiGLU, RoPE for Llama)
//     position_embedding
//   model.<field>              every config.json key of the architecture that maps to a model
//                              field (vocab_size, hidden_size, ..., rope_theta, tie_embeddings), or
//                              the default transformers' config class gives it when absent
//   model.seq_length           min(max_position_embeddings, 4096): a training choice, in the file to change
//   data.tokenizer(_model)     "hf" and the tokenizer.json copied beside the checkpoint
//   data.eod_token             the token of generation_config.json's (first) eos_token_id, where
//                              tokenizer.json has it as an added token
//   mode, checkpoint.load      a fine-tune of the imported checkpoint
//
// Whatever config.json asks for that the engine does not compute (rope scaling, another
// activation) is no key here: the import's check (config_mismatches) refuses it by name.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "family/family.hpp"

namespace recipe::core::hf {

// Defined in hf_config.cpp beside the tables they read: the recipe key of a config field, and
// whether it holds a real number, a boolean or an integer (the others, RoPE scaling and the
// sliding window, are read as a whole: rope_scaling_settings, and the import's check).
const char* hf_field_recipe_key(HfField f);
bool hf_field_is_real(HfField f);
bool hf_field_is_boolean(HfField f);
bool hf_field_is_integer(HfField f);
// config.json's RoPE scaling as recipe keys (model.rope_scaling = "llama3" and its rope_scaling_*
// keys), read as the import reads it; empty without scaling or for one the import refuses.
std::vector<std::pair<std::string, nlohmann::json>> rope_scaling_settings(const nlohmann::json& config);

// A recipe as an ordered list of dotted keys and values ("model.hidden_size" → 4096).
using RecipeSettings = std::vector<std::pair<std::string, nlohmann::json>>;

// The model.* settings config.json describes (arch, flags, every mapped field). Throws
// std::invalid_argument when config.json has no model_type or one no family reads.
RecipeSettings model_settings(const nlohmann::json& config);

// The token data.eod_token should name: generation_config.json's eos_token_id (its first, when a
// list) looked up among tokenizer.json's added tokens; "" when either file lacks it.
std::string eod_token_of(const nlohmann::json& generation_config, const nlohmann::json& tokenizer);

// A Lua recipe: `return <base> { section = { key = value, ... }, ... }` (base "" → a plain table),
// preceded by `comment` (each line prefixed with "-- ").
std::string lua_recipe(const RecipeSettings& settings, const std::string& base, const std::string& comment);

}  // namespace recipe::core::hf
