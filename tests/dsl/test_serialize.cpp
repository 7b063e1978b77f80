// resolved.toml / JSON / Lua: every key written, and what is written re-resolves to the same plan.
#include <filesystem>
#include <fstream>
#include <random>

#include "dsl/plan_fields.hpp"
#include "helpers.hpp"
#include "scratch_files.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("recipe_dsl_resolve_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return path / name;
  }
};

struct Sample {
  const char* name;
  json tree;
  ExecutorFacts facts;
};

std::vector<Sample> samples() {
  ExecutorFacts h100 = gpu_facts(1, 4, true, 79.6, "NVIDIA H100 80GB HBM3");
  return {
      {"tiny gpt", tiny_gpt(), {}},
      {"gpt 345m", gpt3_345m(), {}},
      {"llama3 70b on 4x8", llama3_70b(), gpu_facts(4, 8)},
      // peft.kind stays "none" (LoRA is rejected until it is implemented); its other keys still round-trip.
      {"peft keys + blend + executor tables", with(llama3_8b(), json::parse(R"({
         "mode": "finetune",
         "peft": {"kind": "none", "rank": 8, "alpha": 16.0, "target_modules": ["qkv", "fc2"]},
         "data": {"kind": "indexed", "blend": [0.7, "data/wiki \"text\"", 0.2, "data/code", 0.1, "d/x"],
                  "tokenizer": "sentencepiece", "tokenizer_model": "tok.model"},
         "optimizer": {"lr": 3e-5, "min_lr": 3e-6, "eps": 1e-8},
         "trainer": {"global_batch_size": 8, "recompute": "full"},
         "parallelism": {"tp": 4, "sequence_parallel": false, "layers_per_stage": [32]},
         "checkpoint": {"load": "runs/base/checkpoints", "save_interval": 50},
         "executor": {"kind": "slurm", "gpus_per_node": 4, "partition": "gpu", "time": "2-00:00:00",
                      "env": {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 4},
                      "mca": {"btl": "^openib"}, "sbatch_directives": ["--constraint=h100"]}})")),
       h100},
  };
}

}  // namespace

TEST_CASE("dsl_resolve: to_toml → toml++ → tree → resolve gives the identical to_toml") {
  const ScratchFiles files;  // the datasets, tokenizer and checkpoint the samples name
  for (const auto& s : samples()) {
    CAPTURE(s.name);
    const auto first = resolve_json(s.tree, s.facts);
    REQUIRE_MESSAGE(first.ok(), report(first));
    const std::string toml_text = to_toml(first.plan);
    CHECK(toml_text.find("[derived]") != std::string::npos);
    const toml::table parsed = toml::parse(toml_text);
    const auto second = resolve(tree_of(toml_to_json(parsed), "resolved.toml"), s.facts);
    REQUIRE_MESSAGE(second.ok(), report(second));
    CHECK(to_toml(second.plan) == toml_text);
    CHECK(plan_to_tree(second.plan) == plan_to_tree(first.plan));
    CHECK(second.plan.source == "test_recipe");
  }
}

TEST_CASE("dsl_resolve: resolved TOML writes floats as floats and every key") {
  const auto r = resolve_json(tiny_gpt());
  REQUIRE(r.ok());
  const std::string text = to_toml(r.plan);
  const toml::table t = toml::parse(text);
  CHECK(t["optimizer"]["clip_grad"].is_floating_point());
  CHECK(t["optimizer"]["lr"].is_floating_point());
  CHECK(t["model"]["num_layers"].is_integer());
  CHECK(t["model"]["ffn_hidden_size"].value<int64_t>() == 256);  // derived default written concretely
  CHECK(t["parallelism"]["dp"].value<int64_t>() == 1);
  CHECK(t["trainer"]["device"].value<std::string>() == "cpu");
  CHECK(t["derived"]["head_dim"].value<int64_t>() == 16);
  CHECK(t["derived"]["memory_bytes_per_rank"]["total"].value<int64_t>() == r.plan.memory.total);
  for (const auto& f : plan_fields()) {
    CAPTURE(f.path());
    if (f.section.empty())
      CHECK(t.contains(f.key));
    else
      CHECK(t[f.section][f.key]);
  }
}

TEST_CASE("dsl_resolve: to_json carries the keys and the derived values") {
  const auto r = resolve_json(gpt3_345m());
  REQUIRE(r.ok());
  const json j = json::parse(to_json(r.plan));
  CHECK(j["model"]["num_layers"] == 24);
  CHECK(j["derived"]["num_params"] == 354871296);
  CHECK(j["derived"]["num_params_unpadded"] == 354823168);
  CHECK(j["derived"]["padded_vocab_size"] == 50304);
  CHECK(j["source"] == "test_recipe");
}

TEST_CASE("dsl_resolve: to_lua, to_toml files load back through the loaders to the same plan") {
  const ScratchFiles files;  // the datasets, tokenizer and checkpoint the samples name
  TempDir dir;
  for (const auto& s : samples()) {
    CAPTURE(s.name);
    const auto first = resolve_json(s.tree, s.facts);
    REQUIRE(first.ok());
    const std::string expected = to_toml(first.plan);

    const auto lua_file = dir.write("plan.lua", to_lua(first.plan));
    const auto from_lua = resolve(load_recipe(lua_file.string()), s.facts);
    REQUIRE_MESSAGE(from_lua.ok(), report(from_lua));
    CHECK(to_toml(from_lua.plan) == expected);

    const auto toml_file = dir.write("resolved.toml", expected);
    const recipe::plan::Plan loaded = load_resolved_plan(toml_file.string(), s.facts);
    CHECK(to_toml(loaded) == expected);
  }
}

TEST_CASE("dsl_resolve: a resolved plan read back does not warn about keys it sets only by being complete") {
  TempDir dir;
  // A bf16 plan: its resolved.toml still writes the fp8 section and peft.base_fp8_only.
  const auto first = resolve_json(tiny_gpt());
  REQUIRE(first.ok());
  const auto file = dir.write("resolved.toml", to_toml(first.plan));
  const auto again = resolve(load_recipe(file.string()), {});
  REQUIRE_MESSAGE(again.ok(), report(again));
  for (const std::string& w : again.warnings) CHECK_MESSAGE(w.find("has no effect") == std::string::npos, w);
  // The same keys written by a person still warn.
  const auto written = dir.write("mine.toml",
                                 "[model]\narch = \"gpt\"\nnum_layers = 2\nhidden_size = 64\n"
                                 "num_attention_heads = 4\nvocab_size = 256\nseq_length = 32\n"
                                 "[fp8]\nscaling = \"delayed\"\n");
  const auto mine = resolve(load_recipe(written.string()), {});
  bool warned = false;
  for (const std::string& w : mine.warnings)
    warned = warned || w.find("the fp8 section has no effect") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("dsl_resolve: load_resolved_plan throws with the violations when the plan no longer resolves") {
  TempDir dir;
  const auto r = resolve_json(llama3_70b(), gpu_facts(4, 8));
  REQUIRE(r.ok());
  const auto file = dir.write("resolved.toml", to_toml(r.plan));
  CHECK_NOTHROW(load_resolved_plan(file.string(), gpu_facts(4, 8)));
  try {
    load_resolved_plan(file.string(), gpu_facts(4, 6));
    FAIL("expected a RecipeError");
  } catch (const RecipeError& e) {
    const std::string what = e.what();
    CHECK(what.find("resolved.toml") != std::string::npos);
    CHECK(what.find("parallelism.dp") != std::string::npos);
  }
}

TEST_CASE("dsl_resolve: every preset resolves identically from Lua and from its TOML twin") {
  const auto presets = list_presets();
  CHECK(presets.size() >= 4);
  ExecutorFacts facts;  // as `recipe validate` on a machine without a GPU
  for (const auto& name : presets) {
    CAPTURE(name);
    const fs::path twin = fs::path(RECIPE_SOURCE_DIR) / "examples" / "toml" / (name + ".toml");
    REQUIRE_MESSAGE(fs::exists(twin), twin.string());
    const auto from_lua = resolve(load_recipe(name), facts);
    const auto from_toml = resolve(load_recipe(twin.string()), facts);
    CHECK(from_lua.violations.size() == from_toml.violations.size());
    // Sources differ by nature (preset name vs file path); everything else must match.
    recipe::plan::Plan a = from_lua.plan, b = from_toml.plan;
    b.source = a.source;
    CHECK(to_toml(a) == to_toml(b));
  }
}

TEST_SUITE_END();
