// Llama 3.1/3.2/3.3, Mistral and SmolLM2 through the llama family (issue 34):
//   - the tiny fixtures of tests/data/hf_families (llama3 RoPE scaling, tied, MistralForCausalLM,
//     SmolLM2's form) import and give transformers' logits; negative controls show that the RoPE
//     scaling and θ really enter (the same weights without them give other logits);
//   - the published config.json of Llama-3.1-8B-Instruct, Llama-3.2-1B, Mistral-7B-v0.3 and
//     SmolLM2-135M match their presets, and the config.json export writes reads as the same model;
//   - an imported fixture exports back to the same tensors and config (tied, Mistral, llama3);
//   - refusals, each naming the key and the fix: yarn and other rope types, a sliding window below
//     max positions (also the Mistral default for an absent key), llama3 keys without
//     model.rope_scaling, a Mistral config.json under a recipe that exports Llama.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model_shape.hpp"
#include "dsl/dsl.hpp"
#include "hf/hf_convert.hpp"
#include "hf/hf_safetensors.hpp"
#include "tests/core/data/temp_dir.hpp"
#include "tests/hf/family_fixture.hpp"

TEST_SUITE_BEGIN("hf");

using namespace recipe;
using recipe::data::testing::TempDir;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kData = std::string(RECIPE_SOURCE_DIR) + "/tests/data/";

json read_json(const std::string& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p);
  return json::parse(in);
}

// A factory preset resolved as `recipe validate` would (its own layout, H100s), plus overrides.
plan::Plan preset_plan(const std::string& name, const std::vector<std::string>& overrides = {}) {
  dsl::ConfigTree t = dsl::load_recipe(name);
  if (t.root.value("mode", "") == "finetune") t.root["checkpoint"]["allow_random_init"] = true;
  dsl::apply_overrides(t, overrides);
  dsl::ExecutorFacts facts;
  facts.planning = true;
  facts.has_gpu = true;
  facts.gpu_name = "NVIDIA H100 80GB HBM3";
  facts.gpu_memory_gib = 79.1;
  const dsl::ResolveResult r = dsl::resolve(t, facts);
  INFO(dsl::format_violations(r.violations));
  REQUIRE(r.ok());
  return r.plan;
}

std::string violations_of(const std::string& name, const std::vector<std::string>& overrides) {
  dsl::ConfigTree t = dsl::load_recipe(name);
  dsl::apply_overrides(t, overrides);
  dsl::ExecutorFacts facts;
  facts.planning = true;
  return dsl::format_violations(dsl::resolve(t, facts).violations);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// The value transformers reads for a RoPE parameter: rope_scaling first (transformers 4's object,
// which transformers 5 also prefers), then rope_parameters, then the top level.
json rope_value(const json& c, const std::string& key) {
  for (const char* obj : {"rope_scaling", "rope_parameters"})
    if (c.contains(obj) && c[obj].is_object() && c[obj].contains(key)) return c[obj][key];
  if (key == "rope_type") return "default";  // transformers' value for an absent type
  return c.value(key, json());
}

}  // namespace

TEST_CASE("family fixtures: llama3-scaled, tied, Mistral and SmolLM2 models give transformers' logits") {
  for (const char* name : {"llama31_tiny", "llama32_tiny_tied", "mistral_tiny", "smollm2_tiny"}) {
    CAPTURE(name);
    test::check_family_fixture(name);
  }
}

TEST_CASE("family fixtures, negative controls: without the RoPE scaling or θ the logits leave the bound") {
  // llama31_tiny's scaling changes 7 of its 8 pair frequencies (tests/reference/family_fixtures.py).
  const test::FamilyFixtureRun unscaled =
      test::family_fixture_diff("llama31_tiny", [](plan::Plan& p) { p.model.rope_scaling = plan::RopeScaling::none; });
  MESSAGE("llama31_tiny without rope scaling: max |logit difference| " << unscaled.logit_error);
  CHECK(unscaled.logit_error > 0.05);
  CHECK(unscaled.logprob_error > 0.05);
  // Llama 3.2's factor 32, read as Llama 3.1's 8.
  const test::FamilyFixtureRun factor8 =
      test::family_fixture_diff("llama32_tiny_tied", [](plan::Plan& p) { p.model.rope_scaling_factor = 8.0; });
  CHECK(factor8.logit_error > 0.01);
  // Mistral's θ = 1e6 read as Llama's default 10000.
  const test::FamilyFixtureRun theta =
      test::family_fixture_diff("mistral_tiny", [](plan::Plan& p) { p.model.rope_theta = 10000.0; });
  CHECK(theta.logit_error > 0.05);
}

TEST_CASE("an imported fixture exports back to its tensors and config (llama3 scaling, tied, Mistral)") {
  for (const char* name : {"llama31_tiny", "llama32_tiny_tied", "mistral_tiny"}) {
    CAPTURE(name);
    const std::string dir = kData + "hf_families/" + name;
    const json original = read_json(dir + "/config.json");
    plan::Plan plan;
    // The fixture's plan, as family_fixture.cpp builds it, through the import it checks.
    test::family_fixture_diff(name, [&](plan::Plan& p) { plan = p; });
    TempDir tmp;
    core::hf::ImportOptions io;
    io.checkpoints_dir = tmp / "imported";
    const core::hf::ImportResult ir = core::hf::import_checkpoint(dir, plan, io);
    core::hf::ExportOptions eo;
    eo.out_dir = tmp / "hf";
    const core::hf::ExportResult er = core::hf::export_checkpoint(ir.checkpoint_dir, core::model_shape(plan), eo);
    CHECK(er.model_type == original["model_type"].get<std::string>());

    const ckpt::hf::HfTensorFiles want(dir), got(tmp / "hf");
    CHECK(got.names() == want.names());
    for (const std::string& t : want.names()) {
      CAPTURE(t);
      REQUIRE(got.find(t));
      CHECK(got.read_f32(t) == want.read_f32(t));
    }
    if (original["tie_word_embeddings"] == true) CHECK_FALSE(got.find("lm_head.weight"));

    const json exported = read_json(tmp / "hf/config.json");
    CHECK(exported["architectures"] == original["architectures"]);
    for (const char* key : {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                            "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "hidden_act"}) {
      CAPTURE(key);
      CHECK(exported[key] == original[key]);
    }
    for (const char* key : {"rope_type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
                            "original_max_position_embeddings"}) {
      CAPTURE(key);
      CHECK(rope_value(exported, key) == rope_value(original, key));
    }
    CHECK(core::hf::config_mismatches(exported, core::model_shape(plan)).empty());
  }
}

TEST_CASE("published config.json of Llama 3.1/3.2, Mistral 7B v0.3 and SmolLM2 match their presets both ways") {
  const struct {
    const char* file;
    const char* preset;
  } cases[] = {{"llama31_8b_instruct.json", "llama3_1_8b"},
               {"llama32_1b.json", "llama3_2_1b"},
               {"mistral_7b_v03.json", "mistral_7b"},
               {"smollm2_135m.json", "smollm2_135m"}};
  for (const auto& c : cases) {
    CAPTURE(c.file);
    const json published = read_json(kData + "hf_configs/" + c.file);
    const core::ModelShape shape = core::model_shape(preset_plan(c.preset));
    CHECK(joined(core::hf::config_mismatches(published, shape)) == "");

    const nlohmann::ordered_json made = core::hf::make_config(shape, ckpt::DType::bf16);
    const json exported = json::parse(made.dump());
    CHECK(joined(core::hf::config_mismatches(exported, shape)) == "");
    CHECK(exported["architectures"] == published["architectures"]);
    for (const char* key : {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
                            "rms_norm_eps", "tie_word_embeddings", "hidden_act", "initializer_range"}) {
      CAPTURE(key);
      CHECK(exported[key] == published[key]);
    }
    for (const char* key :
         {"rope_type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      CAPTURE(key);
      CHECK(rope_value(exported, key) == rope_value(published, key));
    }
    CHECK(rope_value(exported, "rope_theta").get<double>() == published["rope_theta"].get<double>());
    if (published.contains("sliding_window")) CHECK(exported["sliding_window"].is_null());
  }
}

TEST_CASE("import refuses RoPE types and sliding windows the engine does not compute, naming them") {
  const json llama31 = read_json(kData + "hf_configs/llama31_8b_instruct.json");
  const core::ModelShape l31 = core::model_shape(preset_plan("llama3_1_8b"));

  SUBCASE("yarn, linear, dynamic, longrope: refused by name, in either spelling") {
    for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
      CAPTURE(type);
      json c = llama31;
      c["rope_scaling"]["rope_type"] = type;
      const std::string m = joined(core::hf::config_mismatches(c, l31));
      CHECK(m.find(std::string("rope_scaling.rope_type is \"") + type + "\" in config.json") != std::string::npos);
      CHECK(m.find("\"llama3\" (Llama 3.1) only") != std::string::npos);
      json t5 = llama31;  // transformers 5's spelling
      t5.erase("rope_scaling");
      t5["rope_parameters"] = {{"rope_type", type}, {"rope_theta", 500000.0}, {"factor", 8.0}};
      CHECK(joined(core::hf::config_mismatches(t5, l31)).find(std::string("rope_parameters.rope_type is \"") + type) !=
            std::string::npos);
    }
  }
  SUBCASE("the older \"type\" key is read too") {
    json c = llama31;
    c["rope_scaling"].erase("rope_type");
    c["rope_scaling"]["type"] = "llama3";
    CHECK(core::hf::config_mismatches(c, l31).empty());
    c["rope_scaling"]["type"] = "dynamic";
    CHECK(joined(core::hf::config_mismatches(c, l31)).find("is \"dynamic\"") != std::string::npos);
  }
  SUBCASE("llama3 parameters that differ from the recipe's are listed with both values") {
    json c = llama31;
    c["rope_scaling"]["factor"] = 32.0;
    c["rope_scaling"]["original_max_position_embeddings"] = 4096;
    const std::string m = joined(core::hf::config_mismatches(c, l31));
    CHECK(m.find("rope_scaling.factor is 32 in config.json, the recipe has model.rope_scaling_factor=8") !=
          std::string::npos);
    CHECK(m.find("original_max_position_embeddings is 4096 in config.json, the recipe has "
                 "model.rope_scaling_original_max_positions=8192") != std::string::npos);
  }
  SUBCASE("a llama3 config.json under a recipe without scaling, and the reverse") {
    const core::ModelShape plain = core::model_shape(preset_plan("llama3_8b"));
    CHECK(
        joined(core::hf::config_mismatches(llama31, plain))
            .find("rope_scaling.rope_type is \"llama3\" in config.json, the recipe has model.rope_scaling=\"none\"") !=
        std::string::npos);
    json c = llama31;
    c.erase("rope_scaling");
    CHECK(joined(core::hf::config_mismatches(c, l31)).find("the recipe has model.rope_scaling=\"llama3\"") !=
          std::string::npos);
  }
  SUBCASE("partial rotary factors are refused") {
    json c = llama31;
    c["partial_rotary_factor"] = 0.5;
    CHECK(joined(core::hf::config_mismatches(c, l31)).find("partial_rotary_factor is 0.5") != std::string::npos);
  }

  const json mistral = read_json(kData + "hf_configs/mistral_7b_v03.json");
  const core::ModelShape m7 = core::model_shape(preset_plan("mistral_7b"));
  SUBCASE("a sliding window below max positions is refused; one covering every position is full attention") {
    json c = mistral;
    c["sliding_window"] = 4096;
    const std::string m = joined(core::hf::config_mismatches(c, m7));
    CHECK(m.find("sliding_window is 4096 in config.json, below the recipe's model.max_position_embeddings=32768") !=
          std::string::npos);
    CHECK(m.find("no sliding-window attention") != std::string::npos);
    c.erase("sliding_window");  // MistralConfig's default is a 4096 window
    CHECK(joined(core::hf::config_mismatches(c, m7))
              .find("sliding_window is 4096 (mistral's default for an absent key)") != std::string::npos);
    c["sliding_window"] = 32768;
    CHECK(core::hf::config_mismatches(c, m7).empty());
    // The same config under a recipe with 4096 positions: the window covers them all.
    c["sliding_window"] = 4096;
    c["max_position_embeddings"] = 4096;
    const core::ModelShape short_ctx =
        core::model_shape(preset_plan("mistral_7b", {"model.max_position_embeddings=4096", "model.seq_length=4096"}));
    CHECK(core::hf::config_mismatches(c, short_ctx).empty());
  }
  SUBCASE("a Mistral config.json under a recipe that exports Llama, and the reverse") {
    const core::ModelShape as_llama = core::model_shape(preset_plan("mistral_7b", {"model.hf_architecture=llama"}));
    CHECK(joined(core::hf::config_mismatches(mistral, as_llama))
              .find("model_type is \"mistral\" in config.json, the recipe's model.hf_architecture is \"llama\": set "
                    "model.hf_architecture=\"mistral\"") != std::string::npos);
    CHECK(joined(core::hf::config_mismatches(llama31, m7)).find("set model.hf_architecture=\"llama\"") !=
          std::string::npos);
  }
  SUBCASE("Mistral has no biases: the resolver refuses them, and export refuses a plan built past it") {
    CHECK(violations_of("mistral_7b", {"model.bias=true"})
              .find("model.bias=true: model.hf_architecture=\"mistral\" computes model.bias=false only") !=
          std::string::npos);
    plan::Plan p = preset_plan("mistral_7b");
    p.model.bias = true;
    CHECK_THROWS_WITH_AS(core::hf::hf_architecture(core::model_shape(p)),
                         doctest::Contains("model.bias=true (mistral computes"), std::invalid_argument);
  }
}

TEST_CASE(
    "the resolver refuses llama3 keys without model.rope_scaling, bad llama3 values and unknown HF architectures") {
  const std::string stray = violations_of("llama3_8b", {"model.rope_scaling_factor=8"});
  CHECK(stray.find("model.rope_scaling_factor is set but model.rope_scaling=\"none\"") != std::string::npos);
  CHECK(stray.find("set model.rope_scaling=\"llama3\"") != std::string::npos);

  const std::string missing = violations_of("llama3_8b", {"model.rope_scaling=llama3"});
  CHECK(missing.find("model.rope_scaling_factor=0 must be positive with model.rope_scaling=\"llama3\"") !=
        std::string::npos);
  CHECK(missing.find("model.rope_scaling_original_max_positions=0 must be positive") != std::string::npos);

  const std::string inverted =
      violations_of("llama3_1_8b", {"model.rope_scaling_low_freq_factor=4", "model.rope_scaling_high_freq_factor=1"});
  CHECK(inverted.find("model.rope_scaling_low_freq_factor=4 must be below model.rope_scaling_high_freq_factor=1") !=
        std::string::npos);

  const std::string too_long = violations_of("llama3_1_8b", {"model.max_position_embeddings=8192"});
  CHECK(too_long.find(
            "model.rope_scaling_original_max_positions=8192 must be below model.max_position_embeddings=8192") !=
        std::string::npos);

  const std::string learned = violations_of("gpt_tiny", {"model.rope_scaling=llama3"});
  CHECK(learned.find("model.rope_scaling=\"llama3\" scales RoPE, but model.position_embedding=\"learned\"") !=
        std::string::npos);

  const std::string arch = violations_of("llama3_8b", {"model.hf_architecture=qwen2"});
  CHECK(arch.find("model.hf_architecture=\"qwen2\" is no Hugging Face architecture of model.arch=\"llama\"") !=
        std::string::npos);
  CHECK(arch.find("\"llama\", \"mistral\"") != std::string::npos);
}

TEST_SUITE_END();
