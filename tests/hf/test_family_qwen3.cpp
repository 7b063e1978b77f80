// Qwen3 (model.arch = "qwen3") against transformers: the qwen3_tiny fixture (qk-norm with norm
// weights off 1, head_dim 24 with hidden 64 / 4 heads, GQA 4/2, untied) imported through the HF
// path gives transformers' logits (family_fixture.cpp), and the negative control: the same
// imported weights run without qk-norm give logits far outside that bound, so the check sees the
// feature. config.json values the engine does not compute are refused by key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/incremental_decoder.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "hf/hf_convert.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"
#include "tests/hf/family_fixture.hpp"

TEST_SUITE_BEGIN("hf");

using namespace recipe;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const fs::path kFixture = fs::path(RECIPE_SOURCE_DIR) / "tests/data/hf_families/qwen3_tiny";

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p.string());
  return json::parse(in);
}

// qwen3_tiny's recipe, written out (config.json: vocab 128, hidden 64, 2 layers, 4 heads of 24,
// 2 KV heads, ffn 96, eps 1e-6, θ 10000, untied).
plan::Plan qwen3_tiny_plan(int seq) {
  plan::Plan p = test::llama_tiny_plan();
  auto& m = p.model;
  m.arch = plan::Arch::qwen3;
  m.qk_norm = true;
  m.vocab_size = 128;
  m.make_vocab_size_divisible_by = 1;
  m.hidden_size = 64;
  m.num_layers = 2;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 24;
  m.ffn_hidden_size = 96;
  m.norm_eps = 1e-6;
  m.rope_theta = 10000.0;
  m.max_position_embeddings = 64;
  m.seq_length = seq;
  p.trainer.micro_batch_size = 1;
  p.trainer.global_batch_size = 1;
  p.trainer.precision = plan::Precision::fp32;
  test::fill_derived(p);
  return p;
}

}  // namespace

TEST_CASE("qwen3_tiny (qk-norm, head_dim 24 ≠ 64/4) imported from transformers gives its logits") {
  recipe::test::check_family_fixture("qwen3_tiny");
}

TEST_CASE("qwen3_tiny without qk-norm gives logits outside the fixture's bound (negative control)") {
  const json expected = read_json(kFixture / "expected.json");
  const auto ids = expected.at("input_ids").get<std::vector<std::vector<int32_t>>>();
  const auto logits = expected.at("logits").get<std::vector<std::vector<std::vector<float>>>>();
  const int T = int(ids[0].size());
  const plan::Plan p = qwen3_tiny_plan(T);
  data::testing::TempDir tmp;
  core::hf::ImportOptions io;
  io.checkpoints_dir = tmp / "imported";
  const core::hf::ImportResult ir = core::hf::import_checkpoint(kFixture.string(), p, io);
  auto be = test::cpu_backend();
  core::Trainer trainer(p, *be, nullptr, test::random_tokens(p), nullptr);
  core::load_checkpoint(trainer, ir.checkpoint_dir, core::LoadMode::weights_only);
  double scale = 0;
  for (const auto& pos : logits[0])
    for (float x : pos) scale = std::max(scale, double(std::fabs(x)));
  // The engine's logits of row 0 with qk-norm on (as the fixture test) and with it off: the model
  // binds the same imported weights, it only skips the norm (the q_norm/k_norm rows stay unread).
  auto worst_difference = [&](bool qk_norm) {
    core::ModelShape s = core::model_shape(p);
    s.arch.qk_norm = qk_norm;
    core::Model model(s, 1, core::Recompute::none, *be, trainer.params());
    core::IncrementalDecoder dec(model);
    double worst = 0;
    for (int t = 0; t < T; ++t) {
      const std::vector<float>& got = dec.forward(std::span<const int32_t>(ids[0].data() + t, 1));
      for (size_t y = 0; y < got.size(); ++y)
        worst = std::max(worst, std::fabs(double(got[y]) - logits[0][size_t(t)][y]));
    }
    return worst;
  };
  const double on = worst_difference(true), off = worst_difference(false);
  MESSAGE("largest logit difference with qk-norm " << on << ", without " << off << ", logit scale " << scale);
  CHECK(on <= 1e-4 * scale);  // family_fixture.cpp's bound
  CHECK(off > 1e-2 * scale);  // a hundred times past it
}

TEST_CASE("qwen3 import refuses config.json values the engine does not compute, by key") {
  const json base = read_json(kFixture / "config.json");
  const plan::Plan p = qwen3_tiny_plan(12);
  const core::ModelShape s = core::model_shape(p);
  CHECK(core::hf::config_mismatches(base, s).empty());
  auto refusal = [&](const char* key, const json& value) {
    json c = base;
    c[key] = value;
    const std::vector<std::string> bad = core::hf::config_mismatches(c, s);
    REQUIRE(bad.size() == 1);
    return bad[0];
  };
  CHECK(refusal("use_sliding_window", true).find("use_sliding_window is true") != std::string::npos);
  CHECK(refusal("attention_bias", true).find("attention_bias is true") != std::string::npos);
  CHECK(refusal("rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4.0}}).find("rope_scaling") !=
        std::string::npos);
  CHECK(refusal("head_dim", 16).find("head_dim is 16 in config.json, the recipe has model.head_dim=24") !=
        std::string::npos);
  json accepted = base;
  accepted["use_sliding_window"] = false;
  accepted["rope_scaling"] = nullptr;
  accepted["attention_bias"] = false;
  CHECK(core::hf::config_mismatches(accepted, s).empty());
}

TEST_CASE("qwen3 exports as Qwen3ForCausalLM (q_norm/k_norm, head_dim) and imports back bitwise") {
  plan::Plan p = qwen3_tiny_plan(12);
  p.model.vocab_size = 120;  // padded to 128: export trims, import pads
  p.model.make_vocab_size_divisible_by = 64;
  p.trainer.global_batch_size = 2;
  p.trainer.max_steps = 10;
  test::fill_derived(p);
  auto be = test::cpu_backend();
  core::Trainer trained(p, *be, nullptr, test::random_tokens(p), nullptr);
  for (int i = 0; i < 3; ++i) REQUIRE(trained.step().finite);
  data::testing::TempDir dir;
  core::SaveOptions so;
  so.dir = dir / "checkpoints";
  const std::string saved = core::save_checkpoint(trained, so);
  core::hf::ExportOptions eo;
  eo.out_dir = dir / "hf";
  const core::hf::ExportResult er = core::hf::export_checkpoint(saved, core::model_shape(p), eo);
  CHECK(er.model_type == "qwen3");
  CHECK(er.tensors == 1 + 2 * 11 + 2);  // embed; per layer 2 norms, q, k, v, o, q_norm, k_norm, 3 MLP; norm, head
  const json cfg = read_json(dir / "hf/config.json");
  CHECK(cfg["architectures"][0] == "Qwen3ForCausalLM");
  CHECK(cfg["head_dim"] == 24);
  CHECK(cfg["hidden_size"] == 64);
  CHECK(cfg["attention_bias"] == false);
  CHECK(cfg["use_sliding_window"] == false);
  CHECK(cfg["tie_word_embeddings"] == false);
  CHECK(cfg["rms_norm_eps"].get<double>() == doctest::Approx(1e-6));

  core::hf::ImportOptions io;
  io.checkpoints_dir = dir / "imported";
  const core::hf::ImportResult ir = core::hf::import_checkpoint(dir / "hf", p, io);
  CHECK(ir.tensors == er.tensors);
  core::Trainer fresh(p, *be, nullptr, test::random_tokens(p), nullptr);
  core::load_checkpoint(fresh, ir.checkpoint_dir, core::LoadMode::weights_only);
  for (const char* name : {"layers.0.attention.q_norm.weight", "layers.1.attention.k_norm.weight",
                           "layers.1.attention.k.weight", "final_norm.weight"}) {
    CAPTURE(name);
    const core::ParamSpec& spec = trained.params().layout().get(name);
    const std::vector<float> a = test::to_host(*be, trained.params().master(spec));
    const std::vector<float> b = test::to_host(*be, fresh.params().master(fresh.params().layout().get(name)));
    CHECK(a == b);
  }
  // Trained 3 steps, the norm weights moved off their init of ones.
  const std::vector<float> qn =
      test::to_host(*be, trained.params().master(trained.params().layout().get("layers.0.attention.q_norm.weight")));
  CHECK(std::any_of(qn.begin(), qn.end(), [](float x) { return x != 1.0f; }));
  CHECK(fresh.compute_loss(3) == trained.compute_loss(3));
}

TEST_SUITE_END();
