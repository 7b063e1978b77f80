// The factory presets: listed, loadable, equal to their TOML twins, with the values the docs promise.
#include <algorithm>
#include <filesystem>

#include "helpers.hpp"
#include "plan/model_size.hpp"
#include "temp_recipes.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using recipe::dsl::test::recipe_error_of;
using recipe::dsl::test::ScopedEnv;
using recipe::dsl::test::source_dir;

namespace {

const std::vector<std::string> kFactoryPresets = {
    "gpt3_125m",        "gpt3_1p3b",        "gpt3_345m",         "gpt_tiny",         "gpt_tiny_lora",
    "llama3_1_8b",      "llama3_1_8b_lora", "llama3_2_1b",       "llama3_2_1b_lora", "llama3_2_3b",
    "llama3_2_3b_lora", "llama3_3_70b",     "llama3_3_70b_lora", "llama3_70b",       "llama3_70b_lora",
    "llama3_8b",        "llama3_8b_lora",   "llama_tiny",        "llama_tiny_lora",  "mistral_7b",
    "mistral_7b_lora",  "qwen2_5_0_5b",     "qwen2_5_0_5b_lora", "qwen2_5_1_5b",     "qwen2_5_7b",
    "qwen2_5_7b_lora",  "qwen3_0_6b",       "qwen3_0_6b_lora",   "qwen3_8b",         "qwen3_8b_lora",
    "smollm2_135m",     "smollm2_135m_lora"};

}  // namespace

TEST_CASE("list_presets shows the factory presets, sorted, without _building blocks") {
  ScopedEnv no_path("RECIPE_PATH", std::nullopt);
  auto presets = list_presets();
  CHECK(std::is_sorted(presets.begin(), presets.end()));
  for (const auto& name : kFactoryPresets) CHECK(std::count(presets.begin(), presets.end(), name) == 1);
  for (const auto& name : presets) CHECK(name.front() != '_');
}

TEST_CASE("every preset loads to the same tree as its TOML twin in examples/toml") {
  ScopedEnv no_path("RECIPE_PATH", std::nullopt);
  auto presets = list_presets();
  REQUIRE(presets.size() >= kFactoryPresets.size());
  for (const auto& name : presets) {
    CAPTURE(name);
    const std::string twin = source_dir() + "/examples/toml/" + name + ".toml";
    REQUIRE(std::filesystem::exists(twin));
    ConfigTree from_lua = load_recipe(name);
    ConfigTree from_toml = load_recipe(twin);
    // dump() also tells 1 from 1.0 (== on json values compares numbers by value).
    CHECK(from_lua.root.dump(2) == from_toml.root.dump(2));
    CHECK(from_lua.source == name);
    CHECK(from_toml.source == twin);
    CHECK(from_lua.root["experiment"]["name"] == name);
  }
}

TEST_CASE("every factory preset validates with no warnings at its documented layout") {
  ScopedEnv no_path("RECIPE_PATH", std::nullopt);
  for (const auto& name : list_presets()) {
    CAPTURE(name);
    ConfigTree t = load_recipe(name);
    // A fine-tune preset documents `checkpoint.load=<base>`; here the base is random on purpose.
    if (t.root.value("mode", "") == "finetune") t.root["checkpoint"]["allow_random_init"] = true;
    // The layout its executor section states (`recipe validate <preset>`), on H100s for GPU presets.
    const auto ex = t.root.value("executor", nlohmann::ordered_json::object());
    ExecutorFacts facts;
    facts.planning = true;
    facts.nodes = ex.value("nodes", 1);
    facts.gpus_per_node = ex.value("gpus_per_node", t.root["trainer"].value("device", "") == "cpu" ? 0 : 1);
    facts.has_gpu = facts.gpus_per_node > 0;
    facts.visible_gpus = facts.gpus_per_node;
    if (facts.has_gpu) {
      facts.gpu_name = "NVIDIA H100 80GB HBM3";
      facts.gpu_memory_gib = 79.1;
    }
    const ResolveResult r = resolve(t, facts);
    // Keys this version cannot execute yet (LoRA under tp/pp) are their own, documented refusal.
    CHECK_MESSAGE(recipe::dsl::test::ok_but_unexecutable(r), format_violations(r.violations));
    for (const auto& w : r.warnings) FAIL_CHECK(name << ": " << w);
  }
}

TEST_CASE("gpt3_345m is the benchmark workload") {
  ConfigTree t = load_recipe("gpt3_345m");
  const auto& m = t.root["model"];
  CHECK(m["arch"] == "gpt");
  CHECK(m["num_layers"] == 24);
  CHECK(m["hidden_size"] == 1024);
  CHECK(m["num_attention_heads"] == 16);
  CHECK(m["ffn_hidden_size"] == 4096);
  CHECK(m["seq_length"] == 1024);
  CHECK(m["vocab_size"] == 50257);
  CHECK(m["position_embedding"] == "learned");
  CHECK(m["activation"] == "gelu");
  CHECK(m["tie_embeddings"] == true);
  CHECK(m["bias"] == true);
  CHECK(t.root["trainer"]["precision"] == "bf16");
  CHECK(t.root["trainer"]["micro_batch_size"] == 4);
  CHECK(t.root["trainer"]["max_steps"] == 100);
  CHECK(t.root["data"]["kind"] == "mock");
  CHECK(t.root["data"]["fixed_batch"] == true);
  CHECK(t.root["optimizer"]["lr"].get<double>() == doctest::Approx(3e-4));
  CHECK(t.root["optimizer"]["min_lr"].is_number_float());
  CHECK(t.root["optimizer"]["weight_decay"].get<double>() == doctest::Approx(0.1));
  CHECK(t.root["optimizer"]["beta2"].get<double>() == doctest::Approx(0.95));
  CHECK(t.root["optimizer"]["clip_grad"].get<double>() == doctest::Approx(1.0));
  CHECK(t.root["schedule"]["warmup_steps"] == 10);
  CHECK_FALSE(t.root.contains("mode"));
}

TEST_CASE("llama presets: architecture and layout") {
  ConfigTree tiny = load_recipe("llama_tiny");
  CHECK(tiny.root["model"]["arch"] == "llama");
  CHECK(tiny.root["model"]["num_kv_heads"] == 2);
  CHECK(tiny.root["model"]["ffn_hidden_size"] == 176);
  CHECK(tiny.root["model"]["tie_embeddings"] == false);
  CHECK(tiny.root["trainer"]["device"] == "cpu");  // inherited from gpt_tiny
  CHECK(tiny.root["trainer"]["max_steps"] == 200);

  ConfigTree big = load_recipe("llama3_70b");
  CHECK(big.root["model"]["num_layers"] == 80);
  CHECK(big.root["model"]["rope_theta"].get<double>() == doctest::Approx(500000.0));
  CHECK(big.root["parallelism"]["tp"] == 8);
  CHECK(big.root["parallelism"]["pp"] == 4);
  CHECK(big.root["parallelism"]["zero1"] == true);
  CHECK(big.root["trainer"]["recompute"] == "full");
  CHECK(big.root["executor"]["nodes"] == 8);  // dp = 2, so ZeRO-1 shards something
  CHECK(big.root["executor"]["gpus_per_node"] == 8);

  ConfigTree lora = load_recipe("llama3_70b_lora");
  CHECK(lora.root["mode"] == "finetune");
  CHECK(lora.root["peft"]["kind"] == "lora");
  CHECK(lora.root["peft"]["target_modules"] == nlohmann::ordered_json({"qkv", "proj", "fc1", "fc2"}));
  CHECK(lora.root["model"]["num_layers"] == 80);  // built on llama3_70b
  CHECK(lora.root["experiment"]["name"] == "llama3_70b_lora");
}

TEST_CASE("qwen2 presets: Qwen2.5's config.json values and its published parameter counts") {
  ScopedEnv no_path("RECIPE_PATH", std::nullopt);
  // Parameters as transformers counts them (model.num_parameters()), q/k/v biases included.
  const struct {
    const char* name;
    int hidden, layers, heads, kv_heads, ffn, vocab;
    bool tied;
    int64_t params;
  } sizes[] = {{"qwen2_5_0_5b", 896, 24, 14, 2, 4864, 151936, true, 494032768},
               {"qwen2_5_1_5b", 1536, 28, 12, 2, 8960, 151936, true, 1543714304},
               {"qwen2_5_7b", 3584, 28, 28, 4, 18944, 152064, false, 7615616512}};
  for (const auto& q : sizes) {
    CAPTURE(q.name);
    ConfigTree t = load_recipe(q.name);
    const auto& m = t.root["model"];
    CHECK(m["arch"] == "qwen2");
    CHECK(m["hidden_size"] == q.hidden);
    CHECK(m["num_layers"] == q.layers);
    CHECK(m["num_attention_heads"] == q.heads);
    CHECK(m["num_kv_heads"] == q.kv_heads);
    CHECK(m["ffn_hidden_size"] == q.ffn);
    CHECK(m["vocab_size"] == q.vocab);
    CHECK(m["tie_embeddings"] == q.tied);
    CHECK(m["rope_theta"].get<double>() == 1e6);
    CHECK(m["norm_eps"].get<double>() == 1e-6);
    CHECK(m["max_position_embeddings"] == 32768);
    ExecutorFacts facts;
    facts.planning = true;
    facts.nodes = 1;
    facts.gpus_per_node = facts.visible_gpus = 8;
    facts.has_gpu = true;
    facts.gpu_name = "NVIDIA H100 80GB HBM3";
    facts.gpu_memory_gib = 79.1;
    const ResolveResult r = resolve(t, facts);
    REQUIRE_MESSAGE(r.violations.empty(), format_violations(r.violations));
    CHECK(r.plan.model.padded_vocab_size == q.vocab);  // no padding rows to count
    CHECK(r.plan.model.num_params == q.params);
  }
  ConfigTree lora = load_recipe("qwen2_5_7b_lora");
  CHECK(lora.root["mode"] == "finetune");
  CHECK(lora.root["model"]["num_layers"] == 28);  // built on qwen2_5_7b
  CHECK(lora.root["parallelism"]["tp"] == 1);
}

TEST_CASE("Llama 3.1/3.2/3.3, Mistral and SmolLM2 presets: the published config.json shapes") {
  // The values of each model's config.json on the Hugging Face hub (tests/data/hf_configs holds four
  // of them, and tests/hf/test_family_llama31.cpp matches those key by key).
  struct Shape {
    const char* preset;
    int layers, hidden, heads, kv, ffn, vocab, max_pos;
    double theta;
    bool tied;
    const char* scaling;
    double factor;
  };
  const Shape shapes[] = {
      {"llama3_1_8b", 32, 4096, 32, 8, 14336, 128256, 131072, 500000.0, false, "llama3", 8.0},
      {"llama3_2_1b", 16, 2048, 32, 8, 8192, 128256, 131072, 500000.0, true, "llama3", 32.0},
      {"llama3_2_3b", 28, 3072, 24, 8, 8192, 128256, 131072, 500000.0, true, "llama3", 32.0},
      {"llama3_3_70b", 80, 8192, 64, 8, 28672, 128256, 131072, 500000.0, false, "llama3", 8.0},
      {"mistral_7b", 32, 4096, 32, 8, 14336, 32768, 32768, 1000000.0, false, nullptr, 0},
      {"smollm2_135m", 30, 576, 9, 3, 1536, 49152, 8192, 100000.0, true, nullptr, 0},
  };
  for (const Shape& s : shapes) {
    for (const std::string& name : {std::string(s.preset), std::string(s.preset) + "_lora"}) {
      CAPTURE(name);
      const ConfigTree t = load_recipe(name);
      const auto& m = t.root["model"];
      CHECK(m["arch"] == "llama");
      CHECK(m["num_layers"] == s.layers);
      CHECK(m["hidden_size"] == s.hidden);
      CHECK(m["num_attention_heads"] == s.heads);
      CHECK(m["num_kv_heads"] == s.kv);
      CHECK(m["ffn_hidden_size"] == s.ffn);
      CHECK(m["vocab_size"] == s.vocab);
      CHECK(m["max_position_embeddings"] == s.max_pos);
      CHECK(m["rope_theta"].get<double>() == s.theta);
      CHECK(m["tie_embeddings"] == s.tied);
      CHECK(m["norm_eps"].get<double>() == 1e-5);
      if (s.scaling) {
        CHECK(m["rope_scaling"] == s.scaling);
        CHECK(m["rope_scaling_factor"].get<double>() == s.factor);
        CHECK(m["rope_scaling_low_freq_factor"].get<double>() == 1.0);
        CHECK(m["rope_scaling_high_freq_factor"].get<double>() == 4.0);
        CHECK(m["rope_scaling_original_max_positions"] == 8192);
      } else {
        CHECK_FALSE(m.contains("rope_scaling"));
      }
      CHECK(m.value("hf_architecture", "") == (std::string(s.preset) == "mistral_7b" ? "mistral" : ""));
      CHECK(t.root["experiment"]["name"] == name);
    }
  }
  CHECK(load_recipe("smollm2_135m_lora").root["trainer"]["device"] == "cpu");
}

// The published shapes of Qwen3-0.6B and Qwen3-8B (their config.json on the Hugging Face hub), and
// the parameter counts that follow from them at the unpadded vocabulary (0.6B counts its tied
// embedding once): 596,049,920 (0.44B without the embedding) and 8,190,735,360 (6.95B without
// the two embeddings), as Qwen3's model cards say.
TEST_CASE("qwen3 presets: the published shapes") {
  struct Shape {
    const char* name;
    int layers, hidden, heads, kv, ffn;
    bool tied;
    int64_t params;
  };
  for (const Shape& s : {Shape{"qwen3_0_6b", 28, 1024, 16, 8, 3072, true, 596049920},
                         Shape{"qwen3_8b", 36, 4096, 32, 8, 12288, false, 8190735360}}) {
    CAPTURE(s.name);
    ConfigTree t = load_recipe(s.name);
    const auto& m = t.root["model"];
    CHECK(m["arch"] == "qwen3");
    CHECK(m["num_layers"] == s.layers);
    CHECK(m["hidden_size"] == s.hidden);
    CHECK(m["num_attention_heads"] == s.heads);
    CHECK(m["num_kv_heads"] == s.kv);
    CHECK(m["head_dim"] == 128);
    CHECK(m["ffn_hidden_size"] == s.ffn);
    CHECK(m["vocab_size"] == 151936);
    CHECK(m["max_position_embeddings"] == 40960);
    CHECK(m["rope_theta"].get<double>() == 1000000.0);
    CHECK(m["norm_eps"].get<double>() == doctest::Approx(1e-6));
    CHECK(m["qk_norm"] == true);
    CHECK(m["bias"] == false);
    CHECK(m["tie_embeddings"] == s.tied);
    ExecutorFacts facts;
    facts.planning = true;
    facts.nodes = 1;
    facts.gpus_per_node = facts.visible_gpus = t.root["executor"].value("gpus_per_node", 1);
    facts.has_gpu = true;
    facts.gpu_name = "NVIDIA H100 80GB HBM3";
    facts.gpu_memory_gib = 79.1;
    const ResolveResult r = resolve(t, facts);
    CHECK(r.plan.model.head_dim == 128);
    CHECK(recipe::plan::count_params(r.plan.model, r.plan.model.vocab_size) == s.params);
  }
}

TEST_CASE("the example recipes load") {
  ConfigTree from_preset = load_recipe(source_dir() + "/examples/gpt_tiny_from_preset.toml");
  CHECK(from_preset.root["model"]["num_layers"] == 4);
  CHECK(from_preset.root["model"]["vocab_size"] == 256);  // from the preset
  CHECK_FALSE(from_preset.root.contains("preset"));

  ConfigTree wiki = load_recipe(source_dir() + "/examples/wiki.lua");
  CHECK(wiki.root["data"]["blend"] == nlohmann::ordered_json({0.7, "data/wiki_text", 0.3, "data/code_text"}));
  CHECK(wiki.root["model"]["num_layers"] == 24);
  CHECK(wiki.root["schedule"]["warmup_steps"] == 200);
}

TEST_CASE("an unknown preset name gets suggestions") {
  ScopedEnv no_path("RECIPE_PATH", std::nullopt);
  CHECK(recipe_error_of([] { load_recipe("gpt3_354m"); }) ==
        "unknown preset 'gpt3_354m'; did you mean 'gpt3_345m'? (recipe list shows all)");
  std::string far = recipe_error_of([] { load_recipe("completely_different"); });
  CHECK(far == "unknown preset 'completely_different' (recipe list shows all)");
  CHECK(recipe_error_of([] { load_recipe("nowhere/x.lua"); }) == "no such recipe file: nowhere/x.lua");
  CHECK(recipe_error_of([] { load_recipe("nowhere.toml"); }) == "no such recipe file: nowhere.toml");
}

TEST_SUITE_END();
