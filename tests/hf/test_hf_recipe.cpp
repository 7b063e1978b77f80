// ckpt import's model.lua (hf/hf_recipe.cpp): the recipe keys written for published config.json
// files (tests/data/hf_configs/), including the parts read as a whole: Llama 3.1's RoPE scaling and
// the HF architecture export writes (Mistral's).
#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include "hf/hf_recipe.hpp"

TEST_SUITE_BEGIN("hf");

namespace {

std::map<std::string, nlohmann::json> settings_of(const std::string& file) {
  std::ifstream in(std::string(RECIPE_SOURCE_DIR) + "/tests/data/hf_configs/" + file);
  REQUIRE(in.good());
  std::map<std::string, nlohmann::json> out;
  for (auto& [k, v] : recipe::core::hf::model_settings(nlohmann::json::parse(in))) out[k] = v;
  return out;
}

}  // namespace

TEST_CASE("ckpt import's model settings: Llama 3.1's llama3 scaling, Llama 3.2's tying, Mistral's architecture") {
  auto l31 = settings_of("llama31_8b_instruct.json");
  CHECK(l31["model.arch"] == "llama");
  CHECK(l31["model.hidden_size"] == 4096);
  CHECK(l31["model.rope_scaling"] == "llama3");
  CHECK(l31["model.rope_scaling_factor"].get<double>() == 8.0);
  CHECK(l31["model.rope_scaling_low_freq_factor"].get<double>() == 1.0);
  CHECK(l31["model.rope_scaling_high_freq_factor"].get<double>() == 4.0);
  CHECK(l31["model.rope_scaling_original_max_positions"] == 8192);
  CHECK(l31["model.max_position_embeddings"] == 131072);  // not overwritten by another field
  CHECK(l31.count("model.hf_architecture") == 0);         // the family's first: llama

  auto l32 = settings_of("llama32_1b.json");
  CHECK(l32["model.tie_embeddings"] == true);
  CHECK(l32["model.rope_scaling_factor"].get<double>() == 32.0);

  auto mistral = settings_of("mistral_7b_v03.json");
  CHECK(mistral["model.arch"] == "llama");
  CHECK(mistral["model.hf_architecture"] == "mistral");
  CHECK(mistral["model.max_position_embeddings"] == 32768);  // sliding_window (null) writes nothing
  CHECK(mistral.count("model.rope_scaling") == 0);

  auto smol = settings_of("smollm2_135m.json");
  CHECK(smol["model.tie_embeddings"] == true);
  CHECK(smol["model.rope_theta"].get<double>() == 100000.0);
}

TEST_SUITE_END();
