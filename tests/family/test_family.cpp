// The family seam: the registry lists every family model.arch can name, and a family is only a
// descriptor — a toy one defined here (a Llama variant with its own HF architecture, config keys
// and LoRA names) lays out, converts to and from HF and names its LoRA targets with no code
// outside this file.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/model/model_shape.hpp"
#include "core/model/param_layout.hpp"
#include "family/registry.hpp"
#include "hf/hf_convert.hpp"
#include "plan/lora.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("family");

using namespace recipe;
using namespace recipe::core;

namespace {

// Llama's rows under other HF names: "model." → "backbone.", "self_attn" → "attn".
std::vector<TensorDecl> toy_table() {
  std::vector<TensorDecl> rows(llama_family().tensors.begin(), llama_family().tensors.end());
  static std::vector<std::string> names;  // the HF name patterns the rows point into
  names.reserve(rows.size());
  for (TensorDecl& d : rows) {
    if (d.hf.empty()) continue;
    std::string n = d.hf[0].name;
    if (n.rfind("model.", 0) == 0) n = "backbone." + n.substr(6);
    if (const auto at = n.find("self_attn"); at != std::string::npos) n.replace(at, 9, "attn");
    names.push_back(n);
    d.hf = {{names.back().c_str(), false}};
  }
  return rows;
}

const Family& toy_family() {
  static const std::vector<TensorDecl> table = toy_table();
  static const Family f = [] {
    HfArchitecture h{.model_type = "toyllama",
                     .class_name = "ToyLlamaForCausalLM",
                     .base_prefix = "backbone.",
                     .flags = {.layernorm = false, .gelu = false, .learned_positions = false},
                     .fixed = flag_norm | flag_activation | flag_positions,
                     .computes = "rmsnorm, swiglu, rope",
                     .weights_before_biases = true};
    h.config = {
        {.key = "vocab_size", .field = HfField::vocab, .no_default = true},
        {.key = "d_model", .field = HfField::hidden, .fallback = 512},
        {.key = "n_layers", .field = HfField::layers, .fallback = 8},
        {.key = "n_heads", .field = HfField::heads, .fallback = 8},
        {.key = "n_kv_heads", .field = HfField::kv_heads, .fallback = 1, .times = "n_heads"},
        {.key = "head_dim", .field = HfField::head_dim, .fallback = 1, .times = "d_model", .over = "n_heads"},
        {.key = "ffn_dim", .field = HfField::ffn, .fallback = 1024},
        {.key = "eps", .field = HfField::norm_eps, .fallback = 1e-6},
        {.key = "theta", .field = HfField::rope_theta, .fallback = 10000.0},
        {.key = "act", .value = "\"silu\"", .accepted = {"\"silu\""}, .why = "the toy computes silu"},
        {.key = "tie", .field = HfField::tied, .fallback = 0},
    };
    return Family{
        .arch = "toy",
        .summary = "a Llama variant of the tests",
        .defaults = {.layernorm = false, .gelu = false, .learned_positions = false, .bias = false, .tied = false},
        .fixed = flag_norm | flag_activation | flag_positions,
        .tensors = table,
        .hf = {h},
        .lora_names = {{"attn_out", lora_proj}},
        .lora_groups = {{{"wq", "wk", "wv"}, lora_qkv, "qkv"}}};
  }();
  return f;
}

ModelShape toy_shape() {
  ModelShape s = model_shape(test::llama_tiny_plan());
  s.arch.family = &toy_family();
  return s;
}

}  // namespace

TEST_CASE("family: the registry lists gpt, llama, qwen2 and qwen3, one per model.arch value") {
  const auto all = families();
  REQUIRE(all.size() == 4);
  CHECK(std::string(all[0]->arch) == "gpt");
  CHECK(std::string(all[1]->arch) == "llama");
  CHECK(std::string(all[2]->arch) == "qwen2");
  CHECK(std::string(all[3]->arch) == "qwen3");
  CHECK(find_family("llama") == &llama_family());
  CHECK(find_family("qwen3") == &qwen3_family());
  CHECK(find_family("toy") == nullptr);
  for (std::string_view arch : plan::enum_names<plan::Arch>()) CHECK(find_family(arch));
  for (const Family* f : all) {
    CAPTURE(f->arch);
    CHECK_FALSE(f->hf.empty());
    bool word = false;
    for (const TensorDecl& d : f->tensors) {
      CHECK(d.hf.size() <= f->hf.size());  // one HF-name column per HF architecture
      if (d.role == Role::word_embedding) word = d.name == word_embedding_name();
    }
    CHECK(word);
  }
  // The flags a family fixes are what its table has rows for.
  CHECK(llama_family().fixed == (flag_activation | flag_positions | flag_qk_norm));
  CHECK(gpt_family().fixed == flag_qk_norm);
  CHECK(qwen2_family().fixed == (flag_norm | flag_activation | flag_positions | flag_bias | flag_qk_norm));
  CHECK(qwen3_family().fixed == (flag_norm | flag_activation | flag_positions | flag_bias | flag_qk_norm));
  CHECK(qwen3_family().defaults.qk_norm);
  CHECK_FALSE(llama_family().defaults.qk_norm);
  CHECK_FALSE(gpt_family().defaults.qk_norm);
}

TEST_CASE("family: qwen3's table has the q/k norm rows ([head_dim], replicated, no decay, ones) and no biases") {
  plan::Plan p = test::llama_tiny_plan();
  p.model.arch = plan::Arch::qwen3;
  p.model.qk_norm = true;
  p.model.head_dim = 24;
  const ModelShape s = model_shape(p);
  CHECK(s.arch.family == &qwen3_family());
  CHECK(s.arch.qk_norm);
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 2, 1);  // TP2, rank 1
  for (const char* name : {"layers.0.attention.q_norm.weight", "layers.1.attention.k_norm.weight"}) {
    CAPTURE(name);
    const ParamSpec& q = L.get(name);
    CHECK(q.global_shape == std::vector<int64_t>{24});
    CHECK(q.local_shape == std::vector<int64_t>{24});  // every TP rank holds all of it
    CHECK(q.tp_replicated());
    CHECK(q.init == InitKind::ones);
  }
  CHECK(L.get("layers.0.attention.q.weight").global_shape == std::vector<int64_t>{4 * 24, 64});
  CHECK(L.get("layers.0.attention.proj.weight").global_shape == std::vector<int64_t>{64, 4 * 24});
  CHECK(L.find("layers.0.attention.q.bias") == nullptr);
  const std::vector<hf::TensorSpec> specs = hf::tensor_specs(s);
  CHECK(std::any_of(specs.begin(), specs.end(), [](const hf::TensorSpec& t) {
    return t.hf_name == "model.layers.1.self_attn.k_norm.weight" && t.hf_shape == std::vector<int64_t>{24};
  }));
  // The same shape under llama (which has no such rows) is refused, and so is qwen3 without qk-norm.
  plan::Plan llama = p;
  llama.model.arch = plan::Arch::llama;
  CHECK_THROWS_WITH_AS(model_shape(llama), doctest::Contains("model.qk_norm"), std::invalid_argument);
  plan::Plan off = p;
  off.model.qk_norm = false;
  CHECK_THROWS_WITH_AS(model_shape(off), doctest::Contains("model.qk_norm"), std::invalid_argument);
}

TEST_CASE("family: model_shape reads model.arch's family and refuses a flag it does not compute") {
  CHECK(model_shape(test::gpt_tiny_plan()).arch.family == &gpt_family());
  CHECK(model_shape(test::llama_tiny_plan()).arch.family == &llama_family());
  plan::Plan gelu = test::llama_tiny_plan();
  gelu.model.activation = plan::Activation::gelu;
  CHECK_THROWS_WITH_AS(model_shape(gelu), doctest::Contains("model.activation"), std::invalid_argument);
}

TEST_CASE("family: a toy family is only a descriptor — layout, HF both ways, LoRA names") {
  const ModelShape s = toy_shape();
  CHECK(tensor_table(s).data() == toy_family().tensors.data());

  // Its layout: Llama's rows, so Llama's layout.
  const ParamLayout toy = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  const ParamLayout llama = build_param_layout(model_shape(test::llama_tiny_plan()), plan::OptimizerConfig{}, 1, 0);
  REQUIRE(toy.params.size() == llama.params.size());
  for (size_t i = 0; i < toy.params.size(); ++i) CHECK(toy.params[i].name == llama.params[i].name);

  // HF: its own names, config keys and model_type, and the config round trips.
  const std::vector<hf::TensorSpec> specs = hf::tensor_specs(s);
  REQUIRE_FALSE(specs.empty());
  for (const hf::TensorSpec& t : specs) CHECK((t.hf_name.rfind("backbone.", 0) == 0 || t.hf_name == "lm_head.weight"));
  CHECK(specs[1].hf_name == "backbone.layers.0.input_layernorm.weight");
  const nlohmann::ordered_json config = hf::make_config(s, ckpt::DType::f32);
  CHECK(config["model_type"] == "toyllama");
  CHECK(config["architectures"][0] == "ToyLlamaForCausalLM");
  CHECK(config["d_model"] == s.arch.hidden);
  CHECK(config["act"] == "silu");
  CHECK(hf::config_mismatches(nlohmann::json::parse(config.dump()), s).empty());
  nlohmann::json wider = nlohmann::json::parse(config.dump());
  wider["d_model"] = 128;
  wider.erase("n_kv_heads");  // absent: n_heads (4), the recipe has 2
  const std::vector<std::string> bad = hf::config_mismatches(wider, s);
  REQUIRE(bad.size() == 2);
  CHECK(bad[0] == "d_model is 128 in config.json, the recipe has model.hidden_size=64");
  CHECK(bad[1] == "n_kv_heads is 4 in config.json, the recipe has model.num_kv_heads=2");
  nlohmann::json llama_config = nlohmann::json::parse(config.dump());
  llama_config["model_type"] = "llama";
  CHECK(hf::config_mismatches(llama_config, s).at(0).find("use a recipe of the same architecture (model.arch=llama)") !=
        std::string::npos);

  // LoRA: the engine's names and the toy's (listed first), then the registered families' spellings,
  // which every model accepts as before (plan/lora.cpp); a name of no family is refused.
  CHECK(plan::lora_targets(toy_family(), {"wq", "wk", "wv", "attn_out"}).mask == (lora_qkv | lora_proj));
  CHECK(plan::lora_targets(toy_family(), {"fc1"}).mask == lora_mlp_in);
  CHECK(plan::lora_targets(toy_family(), {"o_proj"}).mask == lora_proj);
  CHECK(plan::lora_targets(toy_family(), {"wo_proj"}).problems.size() == 1);
  const std::vector<std::string> names = plan::lora_target_names(toy_family());
  REQUIRE(names.size() > 6);
  CHECK(names[5] == "attn_out");  // after qkv, proj, fc1, fc2, all-linear: the model's own family

  // Its flags: what it fixes, a shape contradicts.
  ArchShape gelu = s.arch;
  gelu.gelu = true;
  CHECK(contradicted_flags(toy_family(), gelu) == flag_activation);
  CHECK(contradicted_flags(toy_family(), s.arch) == 0);
}

TEST_SUITE_END();
