// Qwen2 (model.arch = "qwen2", family/qwen2.cpp) against transformers: the qwen2_tiny fixtures
// (tests/reference/family_fixtures.py: q/k/v biases random, untied and tied) give transformers'
// logits through the HF import; the same weights without their q/k/v biases do not (the negative
// control); import → export reproduces every tensor bitwise and config.json's keys; config.json
// values the engine does not compute (sliding windows, YaRN, dropout) are refused by name.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model/model_shape.hpp"
#include "core/model/param_layout.hpp"
#include "family/registry.hpp"
#include "plan/lora.hpp"
#include "hf/hf_convert.hpp"
#include "hf/hf_peft.hpp"
#include "hf/hf_safetensors.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"
#include "tests/hf/family_fixture.hpp"

TEST_SUITE_BEGIN("hf");

using namespace recipe;
using recipe::data::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(RECIPE_SOURCE_DIR) + "/tests/data/hf_families/";

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p.string());
  return nlohmann::json::parse(in);
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  std::ofstream out(p);
  out << j.dump(2);
}

// The fixture's model as a recipe would describe it (what family_fixture.cpp builds from its config).
plan::Plan qwen2_tiny_plan(bool tied) {
  plan::Plan p = test::llama_tiny_plan();
  auto& m = p.model;
  m.arch = plan::Arch::qwen2;
  m.vocab_size = 128;
  m.ffn_hidden_size = 96;
  m.seq_length = 12;
  m.max_position_embeddings = 64;
  m.rope_theta = 1e6;
  m.norm_eps = 1e-6;
  m.init_std = 0.15;
  m.tie_embeddings = tied;
  m.bias = false;
  test::fill_derived(p);
  return p;
}

}  // namespace

TEST_CASE("qwen2: the fixtures give transformers' logits (untied and tied, q/k/v biases)") {
  test::check_family_fixture("qwen2_tiny");
  test::check_family_fixture("qwen2_tiny_tied");
}

TEST_CASE("qwen2: the same weights without the q/k/v biases miss transformers' logits (negative control)") {
  // The fixture read as a Llama (no biases): the q/k/v bias tensors are left unread, everything else
  // is imported as before.
  TempDir dir;
  const fs::path src = kFixtures + "qwen2_tiny", hf = dir / "as_llama";
  fs::create_directories(hf);
  fs::copy_file(src / "model.safetensors", hf / "model.safetensors");
  nlohmann::json cfg = read_json(src / "config.json");
  cfg["model_type"] = "llama";
  cfg["architectures"] = {"LlamaForCausalLM"};
  cfg["attention_bias"] = false;
  for (const char* k : {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}) cfg.erase(k);
  write_json(hf / "config.json", cfg);
  const test::FamilyFixtureRun run = test::run_family_fixture(hf.string(), (src / "expected.json").string());
  INFO("without q/k/v biases: max |logit − transformers'| " << run.logit_error);
  CHECK(run.logit_error > 100 * test::family_fixture_bound());
  CHECK(run.logprob_error > 100 * test::family_fixture_bound());
}

TEST_CASE("qwen2: the table has q/k/v biases and no other linear or norm bias, whatever model.bias says") {
  const core::ModelShape s = core::model_shape(qwen2_tiny_plan(false));
  CHECK(s.arch.family == &core::qwen2_family());
  CHECK_FALSE(s.arch.bias);
  const core::ParamLayout L = core::build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  std::vector<std::string> biases;
  for (const core::ParamSpec& p : L.params)
    if (p.name.find(".bias") != std::string::npos && p.name.rfind("layers.0.", 0) == 0) biases.push_back(p.name);
  CHECK(biases == std::vector<std::string>{"layers.0.attention.q.bias", "layers.0.attention.k.bias",
                                           "layers.0.attention.v.bias"});
  // They are a pack, column-sharded with their weights: under TP 2 each rank holds its heads' rows.
  const core::ParamLayout L2 = core::build_param_layout(s, plan::OptimizerConfig{}, 2, 1);
  for (const core::ParamSpec& p : L2.params) {
    if (p.name == "layers.1.attention.q.bias") CHECK(p.local_shape == std::vector<int64_t>{32});
    if (p.name == "layers.1.attention.k.bias") CHECK(p.local_shape == std::vector<int64_t>{16});
  }
  // The parameter count (plan/model_size.cpp) counts them: 2 layers × (64 + 32 + 32).
  plan::Plan with = qwen2_tiny_plan(false);
  plan::Plan without = with;
  without.model.arch = plan::Arch::llama;
  test::fill_derived(without);
  CHECK(with.model.num_params - without.model.num_params == 2 * (64 + 32 + 32));
}

TEST_CASE("qwen2: import → export reproduces every tensor bitwise and config.json's keys") {
  for (const bool tied : {false, true}) {
    CAPTURE(tied);
    const fs::path src = kFixtures + (tied ? "qwen2_tiny_tied" : "qwen2_tiny");
    TempDir dir;
    plan::Plan p = qwen2_tiny_plan(tied);
    p.model.make_vocab_size_divisible_by = 96;  // padded to 192: export trims the rows import added
    test::fill_derived(p);
    core::hf::ImportOptions io;
    io.checkpoints_dir = dir / "imported";
    const core::hf::ImportResult ir = core::hf::import_checkpoint(src.string(), p, io);
    CHECK(ir.model_type == "qwen2");
    CHECK(ir.unused.empty());
    core::hf::ExportOptions eo;
    eo.out_dir = dir / "exported";
    const core::hf::ExportResult er = core::hf::export_checkpoint(ir.checkpoint_dir, core::model_shape(p), eo);
    CHECK(er.model_type == "qwen2");

    const ckpt::hf::HfTensorFiles theirs(src.string()), ours(eo.out_dir);
    // 1 embedding + 2 × (norm, q, k, v weights and biases, o, norm, gate, up, down) + final norm
    // (+ lm_head untied).
    CHECK(er.tensors == 1 + 2 * 12 + 1 + (tied ? 0 : 1));
    for (const core::hf::TensorSpec& t : core::hf::tensor_specs(core::model_shape(p))) {
      CAPTURE(t.hf_name);
      REQUIRE(theirs.find(t.hf_name));
      REQUIRE(ours.find(t.hf_name));
      CHECK(ours.find(t.hf_name)->shape == theirs.find(t.hf_name)->shape);
      CHECK(ours.read_f32(t.hf_name) == theirs.read_f32(t.hf_name));
    }
    const nlohmann::json want = read_json(src / "config.json"), got = read_json(fs::path(eo.out_dir) / "config.json");
    CHECK(got["architectures"] == want["architectures"]);
    for (const char* k :
         {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "hidden_act", "max_position_embeddings", "tie_word_embeddings", "use_sliding_window",
          "attention_dropout", "initializer_range", "use_cache"}) {
      CAPTURE(k);
      CHECK(got[k] == want[k]);
    }
    // The engine holds the norm epsilon in f32 (ArchShape::norm_eps): 1e-6 comes back as its f32 value.
    CHECK(got["rms_norm_eps"].get<double>() == doctest::Approx(want["rms_norm_eps"].get<double>()).epsilon(1e-7));
    CHECK(got["rope_parameters"] == want["rope_parameters"]);
    CHECK(got["rope_theta"] == want["rope_parameters"]["rope_theta"]);
    CHECK(got["head_dim"] == 16);
    // And the export reads back as the same model.
    CHECK(core::hf::config_mismatches(got, core::model_shape(p)).empty());
    // With RECIPE_HF_CHECK_DIR set, the export stays for transformers to load
    // (tests/reference/family_fixtures.py --check-export DIR <fixture>).
    if (const char* root = std::getenv("RECIPE_HF_CHECK_DIR"); root && *root) {
      const fs::path keep = fs::path(root) / src.filename();
      fs::remove_all(keep);
      fs::create_directories(keep);
      for (const auto& e : fs::directory_iterator(eo.out_dir)) fs::copy_file(e.path(), keep / e.path().filename());
      MESSAGE("left " << keep.string() << " for tests/reference/family_fixtures.py --check-export");
    }
  }
}

TEST_CASE("qwen2: config.json values the engine does not compute are refused by name") {
  const core::ModelShape s = core::model_shape(qwen2_tiny_plan(false));
  const nlohmann::json base = read_json(kFixtures + "qwen2_tiny/config.json");
  CHECK(core::hf::config_mismatches(base, s).empty());
  // transformers 4's files: rope_theta at the top level, no layer_types, sliding_window and
  // max_window_layers present but unread (use_sliding_window is false).
  nlohmann::json v4 = base;
  v4.erase("rope_parameters");
  v4.erase("layer_types");
  v4["rope_theta"] = 1e6;
  v4["rope_scaling"] = nullptr;
  v4["sliding_window"] = 32768;
  v4["max_window_layers"] = 21;
  CHECK(core::hf::config_mismatches(v4, s).empty());

  auto refused = [&](const nlohmann::json& cfg, const std::string& words) {
    const std::vector<std::string> bad = core::hf::config_mismatches(cfg, s);
    REQUIRE(bad.size() == 1);
    CHECK_MESSAGE(bad[0].find(words) != std::string::npos, bad[0]);
  };
  nlohmann::json c = base;
  c["use_sliding_window"] = true;
  refused(c, "use_sliding_window is true in config.json; the engine has no sliding-window attention");
  c = base;
  c["layer_types"] = {"full_attention", "sliding_attention"};
  refused(c, "layer_types is [\"full_attention\",\"sliding_attention\"] in config.json");
  c = v4;
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  refused(c, "rope_scaling is {");
  refused(c, "remove rope_scaling from config.json");
  c = base;
  c["rope_parameters"]["rope_type"] = "yarn";
  refused(c, "rope_parameters.rope_type is \"yarn\" in config.json; the engine computes plain RoPE only");
  c = base;
  c["attention_dropout"] = 0.1;
  refused(c, "attention_dropout is 0.1 in config.json");
  c = base;
  c["hidden_act"] = "gelu";
  refused(c, "hidden_act is \"gelu\"");
  c = base;
  c["num_key_value_heads"] = 4;
  refused(c, "num_key_value_heads is 4 in config.json, the recipe has model.num_kv_heads=2");
  c = base;
  c["tie_word_embeddings"] = true;
  refused(c, "tie_word_embeddings is true in config.json, the recipe has model.tie_embeddings=false");
}

TEST_CASE("qwen2: a plan built in code with biases beyond q/k/v is refused (the table has no rows for them)") {
  plan::Plan p = qwen2_tiny_plan(false);
  p.model.bias = true;
  CHECK_THROWS_WITH_AS(core::model_shape(p), doctest::Contains("model.arch=qwen2 does not compute it"),
                       std::invalid_argument);
}

TEST_CASE("qwen2: LoRA names are HF Qwen2's (q/k/v and gate/up only together), PEFT exports them") {
  const plan::LoraTargets t =
      plan::lora_targets(core::qwen2_family(), {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"});
  CHECK(t.problems.empty());
  CHECK(t.mask == (core::lora_qkv | core::lora_proj | core::lora_mlp_in));
  const plan::LoraTargets q_alone = plan::lora_targets(core::qwen2_family(), {"q_proj"});
  CHECK_FALSE(q_alone.problems.empty());  // one fused linear: k_proj and v_proj must come with it
  CHECK(q_alone.mask == 0);
  plan::Plan p = qwen2_tiny_plan(false);
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 4;
  p.peft.alpha = 8;
  p.peft.target_modules = {"all-linear"};
  test::fill_derived(p);
  CHECK(core::hf::peft_target_modules(core::model_shape(p)) ==
        std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"});
}
