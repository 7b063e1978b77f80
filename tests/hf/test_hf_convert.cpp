// Checkpoint → Hugging Face directory → checkpoint: names, shapes, dtypes and config.json of the
// export, GPT-2's Conv1D transpose and q|k|v packing, vocabulary trimming, and a round trip that
// gives back the trained weights (bitwise for f32) and the same loss. Refusals: another shape in
// config.json, a missing tensor, an unsupported model_type, a model HF cannot express.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_safetensors.hpp"
#include "core/train/checkpointing.hpp"
#include "hf/hf_convert.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("hf");

using namespace recipe;
using recipe::data::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Per parameter name, its master weights (global = local: one rank).
std::map<std::string, std::vector<float>> masters_by_name(core::Trainer& t) {
  const std::vector<float> all = test::to_host(t.backend(), t.params().master());
  std::map<std::string, std::vector<float>> m;
  for (const core::ParamSpec& p : t.params().layout().params)
    m[p.name].assign(all.begin() + p.offset, all.begin() + p.offset + p.numel);
  return m;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p.string());
  return nlohmann::json::parse(in);
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  std::ofstream out(p);
  out << j.dump(2);
}

// A plan whose vocabulary (250) is padded (to 256), trained 3 steps and saved.
struct Trained {
  plan::Plan plan;
  std::unique_ptr<kernels::Backend> be = test::cpu_backend();
  std::unique_ptr<core::Trainer> trainer;
  std::string checkpoint;

  Trained(plan::Plan p, const TempDir& dir) : plan(std::move(p)) {
    plan.model.vocab_size = 250;
    plan.model.make_vocab_size_divisible_by = 128;
    plan.trainer.max_steps = 10;
    test::fill_derived(plan);
    REQUIRE(plan.model.padded_vocab_size == 256);
    trainer = std::make_unique<core::Trainer>(plan, *be, nullptr, test::random_tokens(plan), nullptr);
    for (int i = 0; i < 3; ++i) REQUIRE(trainer->step().finite);
    core::SaveOptions so;
    so.dir = dir / "checkpoints";
    checkpoint = core::save_checkpoint(*trainer, so);
  }

  core::ModelShape shape() const { return core::model_shape(plan); }
};

// Import `hf` as plan's model, load it weights-only into a fresh trainer and compare with the
// original: weights equal (padded vocab rows zero) and the same loss.
void check_round_trip(Trained& t, const std::string& hf, const TempDir& dir, bool exact) {
  core::hf::ImportOptions io;
  io.checkpoints_dir = dir / "imported";
  const core::hf::ImportResult ir = core::hf::import_checkpoint(hf, t.plan, io);
  CHECK(ir.checkpoint_dir == dir / "imported/step-0");
  CHECK(ckpt::find_checkpoint(dir / "imported") == ir.checkpoint_dir);
  const ckpt::CheckpointReader reader(ir.checkpoint_dir);
  CHECK(reader.common()["step"] == 0);
  CHECK(reader.common()["imported_from"]["format"] == "hf");
  CHECK(reader.common()["imported_from"]["model_type"] == ir.model_type);

  core::Trainer fresh(t.plan, *t.be, nullptr, test::random_tokens(t.plan), nullptr);
  const core::LoadResult lr = core::load_checkpoint(fresh, ir.checkpoint_dir, core::LoadMode::weights_only);
  CHECK(lr.step == 0);
  auto expected = masters_by_name(*t.trainer);
  const auto got = masters_by_name(fresh);
  const int64_t C = t.plan.model.hidden_size, V = t.plan.model.vocab_size;
  for (const char* vocab_tensor : {"embedding.word.weight", "lm_head.weight"}) {
    auto it = expected.find(vocab_tensor);
    if (it == expected.end()) continue;
    // The padded rows are not exported; import leaves them zero.
    for (size_t i = size_t(V * C); i < it->second.size(); ++i) it->second[i] = 0.0f;
  }
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, want] : expected) {
    CAPTURE(name);
    const std::vector<float>& have = got.at(name);
    REQUIRE(have.size() == want.size());
    if (exact) {
      CHECK(have == want);
    } else {
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::fabs(double(have[i]) - want[i]) / std::max(1e-3, std::fabs(double(want[i]))));
      CHECK(worst <= 1.0 / 256);  // bf16 keeps 8 significant bits
    }
  }
  const double want_loss = t.trainer->compute_loss(3), have_loss = fresh.compute_loss(3);
  if (exact)
    CHECK(have_loss == want_loss);
  else
    CHECK(have_loss == doctest::Approx(want_loss).epsilon(1e-2));
}

// With RECIPE_HF_CHECK_DIR set, leaves <dir>/<model_type>/ for tests/reference/hf_check.py: an f32 export
// of the plan's model trained 60 steps on 8 repeated samples (so the loss is far from the ln V of
// an untrained model, and a wrong mapping would show), plus batch.json: the token rows of the
// next step's batch and the engine's mean loss on them.
void dump_for_hf_check(plan::Plan plan, const std::string& model_type) {
  const char* root = std::getenv("RECIPE_HF_CHECK_DIR");
  if (!root || !*root) return;
  const int steps = 60, gb = plan.trainer.global_batch_size;
  plan.trainer.max_steps = steps + 1;
  plan.schedule.decay_steps = steps + 1;
  auto be = test::cpu_backend();
  core::Trainer trainer(plan, *be, nullptr, test::random_tokens(plan, 7, gb), nullptr);
  for (int i = 0; i < steps; ++i) REQUIRE(trainer.step().finite);
  TempDir dir;
  core::SaveOptions so;
  so.dir = dir / "checkpoints";
  const std::string saved = core::save_checkpoint(trainer, so);
  const fs::path out = fs::path(root) / model_type;
  fs::remove_all(out);
  core::hf::ExportOptions eo;
  eo.out_dir = out.string();
  core::hf::export_checkpoint(saved, core::model_shape(plan), eo);
  const auto source = test::random_tokens(plan, 7, gb);  // the trainer's stream: step s = samples s·GB ...
  nlohmann::json rows = nlohmann::json::array();
  std::vector<int32_t> row(size_t(plan.model.seq_length + 1));
  for (int i = 0; i < gb; ++i) {
    source->sample(int64_t(steps) * gb + i, row.data());
    rows.push_back(row);
  }
  write_json(out / "batch.json", {{"tokens", rows}, {"loss", trainer.compute_loss(steps)}});
  MESSAGE("wrote " << out.string() << " for tests/reference/hf_check.py");
}

}  // namespace

TEST_CASE("gpt_tiny exports as GPT-2 (Conv1D transposed, q|k|v in c_attn, vocab trimmed) and imports back bitwise") {
  TempDir dir;
  Trained t(test::gpt_tiny_plan(), dir);
  const fs::path hf = dir / "hf";
  core::hf::ExportOptions eo;
  eo.out_dir = hf.string();
  const core::hf::ExportResult er = core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  CHECK(er.model_type == "gpt2");
  CHECK(er.tensors == 2 + 2 * 12 + 2);
  CHECK(fs::is_regular_file(hf / "model.safetensors"));

  const nlohmann::json cfg = read_json(hf / "config.json");
  CHECK(cfg["architectures"][0] == "GPT2LMHeadModel");
  CHECK(cfg["model_type"] == "gpt2");
  CHECK(cfg["n_embd"] == 64);
  CHECK(cfg["n_layer"] == 2);
  CHECK(cfg["n_head"] == 4);
  CHECK(cfg["n_inner"] == 256);
  CHECK(cfg["n_positions"] == 64);
  CHECK(cfg["vocab_size"] == 250);
  CHECK(cfg["activation_function"] == "gelu_new");
  CHECK(cfg["tie_word_embeddings"] == true);
  CHECK(cfg["layer_norm_epsilon"].get<double>() == doctest::Approx(1e-5));
  CHECK(cfg["torch_dtype"] == "float32");

  const ckpt::hf::HfTensorFiles files(hf.string());
  CHECK(files.names().size() == size_t(er.tensors));
  CHECK(files.find("lm_head.weight") == nullptr);  // tied: HF ties it to wte
  const ckpt::hf::HfTensor* wte = files.find("transformer.wte.weight");
  REQUIRE(wte);
  CHECK(wte->dtype == "F32");
  CHECK(wte->shape == std::vector<int64_t>{250, 64});
  const ckpt::hf::HfTensor* c_attn = files.find("transformer.h.1.attn.c_attn.weight");
  REQUIRE(c_attn);
  CHECK(c_attn->shape == std::vector<int64_t>{64, 192});
  CHECK(files.find("transformer.h.0.mlp.c_fc.weight")->shape == std::vector<int64_t>{64, 256});
  CHECK(files.find("transformer.h.0.mlp.c_proj.weight")->shape == std::vector<int64_t>{256, 64});
  CHECK(files.find("transformer.h.0.attn.c_attn.bias")->shape == std::vector<int64_t>{192});

  const auto m = masters_by_name(*t.trainer);
  // c_attn.weight[i][j] = [q;k;v][j][i]: HF computes x·W, we compute x·Wᵀ.
  const std::vector<float> hf_attn = files.read_f32("transformer.h.1.attn.c_attn.weight");
  const std::vector<float>& q = m.at("layers.1.attention.q.weight");
  const std::vector<float>& k = m.at("layers.1.attention.k.weight");
  const std::vector<float>& v = m.at("layers.1.attention.v.weight");
  bool all_equal = true;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 192; ++j) {
      const std::vector<float>& src = j < 64 ? q : j < 128 ? k : v;
      all_equal = all_equal && hf_attn[size_t(i * 192 + j)] == src[size_t((j % 64) * 64 + i)];
    }
  CHECK(all_equal);
  const std::vector<float> hf_fc = files.read_f32("transformer.h.0.mlp.c_fc.weight");  // [64, 256]
  const std::vector<float>& fc1 = m.at("layers.0.mlp.fc1.weight");                     // [256, 64]
  CHECK(hf_fc[size_t(5 * 256 + 200)] == fc1[size_t(200 * 64 + 5)]);
  const std::vector<float> hf_wte = files.read_f32("transformer.wte.weight");
  const std::vector<float>& word = m.at("embedding.word.weight");
  CHECK(std::vector<float>(word.begin(), word.begin() + 250 * 64) == hf_wte);
  CHECK(files.read_f32("transformer.ln_f.bias") == m.at("final_norm.bias"));

  check_round_trip(t, hf.string(), dir, /*exact=*/true);
  dump_for_hf_check(t.plan, "gpt2");
}

TEST_CASE("llama_tiny exports as LlamaForCausalLM (GQA, untied lm_head) and imports back bitwise") {
  TempDir dir;
  Trained t(test::llama_tiny_plan(), dir);
  const fs::path hf = dir / "hf";
  core::hf::ExportOptions eo;
  eo.out_dir = hf.string();
  const core::hf::ExportResult er = core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  CHECK(er.model_type == "llama");
  CHECK(er.tensors == 1 + 2 * 9 + 1 + 1);

  const nlohmann::json cfg = read_json(hf / "config.json");
  CHECK(cfg["architectures"][0] == "LlamaForCausalLM");
  CHECK(cfg["hidden_size"] == 64);
  CHECK(cfg["intermediate_size"] == 192);
  CHECK(cfg["num_hidden_layers"] == 2);
  CHECK(cfg["num_attention_heads"] == 4);
  CHECK(cfg["num_key_value_heads"] == 2);
  CHECK(cfg["head_dim"] == 16);
  CHECK(cfg["vocab_size"] == 250);
  CHECK(cfg["hidden_act"] == "silu");
  CHECK(cfg["rope_theta"].get<double>() == 10000.0);
  CHECK(cfg["rope_parameters"]["rope_type"] == "default");
  CHECK(cfg.value("rope_scaling", nlohmann::json()).is_null());
  CHECK(cfg["tie_word_embeddings"] == false);
  CHECK(cfg["attention_bias"] == false);

  const ckpt::hf::HfTensorFiles files(hf.string());
  CHECK(files.find("model.layers.1.self_attn.k_proj.weight")->shape == std::vector<int64_t>{32, 64});
  CHECK(files.find("model.layers.0.self_attn.o_proj.weight")->shape == std::vector<int64_t>{64, 64});
  CHECK(files.find("model.layers.0.mlp.down_proj.weight")->shape == std::vector<int64_t>{64, 192});
  CHECK(files.find("lm_head.weight")->shape == std::vector<int64_t>{250, 64});
  const auto m = masters_by_name(*t.trainer);
  // The engine's RoPE pairs i with i + D/2 like HF: q/k are copied without a permutation.
  CHECK(files.read_f32("model.layers.1.self_attn.q_proj.weight") == m.at("layers.1.attention.q.weight"));
  CHECK(files.read_f32("model.layers.0.mlp.gate_proj.weight") == m.at("layers.0.mlp.gate.weight"));

  check_round_trip(t, hf.string(), dir, /*exact=*/true);
  dump_for_hf_check(t.plan, "llama");
}

TEST_CASE("llama_tiny as qwen2 exports as Qwen2ForCausalLM (q/k/v biases, no others) and imports back bitwise") {
  TempDir dir;
  plan::Plan p = test::llama_tiny_plan();
  p.model.arch = plan::Arch::qwen2;
  test::fill_derived(p);
  Trained t(p, dir);
  const fs::path hf = dir / "hf";
  core::hf::ExportOptions eo;
  eo.out_dir = hf.string();
  const core::hf::ExportResult er = core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  CHECK(er.model_type == "qwen2");
  CHECK(er.tensors == 1 + 2 * 12 + 1 + 1);  // per layer: 2 norms, q/k/v weights and biases, o, gate, up, down

  const nlohmann::json cfg = read_json(hf / "config.json");
  CHECK(cfg["architectures"][0] == "Qwen2ForCausalLM");
  CHECK(cfg["use_sliding_window"] == false);
  CHECK_FALSE(cfg.contains("attention_bias"));  // Qwen2Config has none: the biases are the class's
  const ckpt::hf::HfTensorFiles files(hf.string());
  CHECK(files.find("model.layers.1.self_attn.k_proj.bias")->shape == std::vector<int64_t>{32});
  CHECK_FALSE(files.find("model.layers.0.self_attn.o_proj.bias"));
  CHECK_FALSE(files.find("model.layers.0.mlp.down_proj.bias"));
  const auto m = masters_by_name(*t.trainer);
  // Trained: the biases moved off their zero init and are exported as they are.
  const std::vector<float> qb = files.read_f32("model.layers.0.self_attn.q_proj.bias");
  CHECK(qb == m.at("layers.0.attention.q.bias"));
  CHECK(std::any_of(qb.begin(), qb.end(), [](float v) { return v != 0.0f; }));

  check_round_trip(t, hf.string(), dir, /*exact=*/true);
  dump_for_hf_check(t.plan, "qwen2");
}

// The padded vocabulary depends on TP: a checkpoint (or a LoRA checkpoint's base) saved with 256
// rows exports under a plan that pads the same vocabulary to 300 or to 250 rows as it does under
// its own: the first vocab_size rows. Another vocabulary is refused.
TEST_CASE("export takes a checkpoint of another vocabulary padding (another TP size): the first vocab rows") {
  TempDir dir;
  Trained t(test::llama_tiny_plan(), dir);
  core::hf::ExportOptions eo;
  eo.out_dir = dir / "hf";
  core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  const ckpt::hf::HfTensorFiles own(dir / "hf");
  for (const int multiple : {100, 1}) {
    CAPTURE(multiple);
    plan::Plan p = t.plan;
    p.model.make_vocab_size_divisible_by = multiple;
    test::fill_derived(p);
    REQUIRE(p.model.padded_vocab_size != 256);
    core::hf::ExportOptions o;
    o.out_dir = dir / ("hf" + std::to_string(multiple));
    core::hf::export_checkpoint(t.checkpoint, core::model_shape(p), o);
    const ckpt::hf::HfTensorFiles other(o.out_dir);
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
      CHECK(other.find(name)->shape == std::vector<int64_t>{250, 64});
      CHECK(other.read_f32(name) == own.read_f32(name));
    }
  }
  plan::Plan wrong = t.plan;
  wrong.model.vocab_size = 300;
  test::fill_derived(wrong);
  core::hf::ExportOptions o;
  o.out_dir = dir / "hf_wrong";
  CHECK_THROWS_WITH_AS(core::hf::export_checkpoint(t.checkpoint, core::model_shape(wrong), o),
                       doctest::Contains("embedding.word.weight is [256, 64] there, the plan says [384, 64]"),
                       std::runtime_error);
}

TEST_CASE("a bf16 export rounds to bf16 and imports back within bf16 precision") {
  TempDir dir;
  Trained t(test::llama_tiny_plan(), dir);
  core::hf::ExportOptions eo;
  eo.out_dir = (dir / "hf");
  eo.dtype = ckpt::DType::bf16;
  core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  CHECK(read_json(dir / "hf/config.json")["torch_dtype"] == "bfloat16");
  const ckpt::hf::HfTensorFiles files((dir / "hf"));
  CHECK(files.find("model.norm.weight")->dtype == "BF16");
  const std::vector<float> w = masters_by_name(*t.trainer).at("layers.0.mlp.up.weight");
  const std::vector<float> r = files.read_f32("model.layers.0.mlp.up_proj.weight");
  REQUIRE(r.size() == w.size());
  for (size_t i = 0; i < w.size(); ++i) REQUIRE(r[i] == ckpt::hf::bf16_to_f32(ckpt::hf::f32_to_bf16(w[i])));
  check_round_trip(t, (dir / "hf"), dir, /*exact=*/false);
}

TEST_CASE("import reads sharded HF directories (index + files) and names saved without the base prefix") {
  TempDir dir;
  Trained t(test::gpt_tiny_plan(), dir);
  core::hf::ExportOptions eo;
  eo.out_dir = (dir / "single");
  core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  const ckpt::hf::HfTensorFiles single((dir / "single"));

  // Re-save as two files + index, names without "transformer." (GPT2Model.save_pretrained).
  const fs::path sharded = dir / "sharded";
  fs::create_directories(sharded);
  fs::copy_file(dir / "single/config.json", sharded / "config.json");
  const std::vector<std::string> names = single.names();
  nlohmann::json index;
  for (int part = 0; part < 2; ++part) {
    const std::string file = "model-0000" + std::to_string(part + 1) + "-of-00002.safetensors";
    std::vector<ckpt::hf::HfOutTensor> decls;
    std::vector<std::string> mine;
    for (size_t i = size_t(part); i < names.size(); i += 2) {
      std::string n = names[i];
      if (n.rfind("transformer.", 0) == 0) n = n.substr(12);
      decls.push_back({n, single.find(names[i])->shape, ckpt::DType::f32});
      mine.push_back(names[i]);
      index["weight_map"][n] = file;
    }
    ckpt::hf::SafetensorsFileWriter w((sharded / file).string(), decls, {{"format", "pt"}});
    for (size_t i = 0; i < mine.size(); ++i) {
      const std::vector<float> data = single.read_f32(mine[i]);
      w.write(decls[i].name, data.data(), int64_t(data.size()));
    }
    w.finish();
  }
  write_json(sharded / "model.safetensors.index.json", index);
  const ckpt::hf::HfTensorFiles reread(sharded.string());
  CHECK(reread.files().size() == 2);
  CHECK(reread.find("h.0.attn.c_attn.weight") != nullptr);
  check_round_trip(t, sharded.string(), dir, /*exact=*/true);
}

TEST_CASE("f16 and bf16 decode exactly") {
  using ckpt::hf::f16_to_f32;
  CHECK(f16_to_f32(0x3C00) == 1.0f);
  CHECK(f16_to_f32(0xC000) == -2.0f);
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(f16_to_f32(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(std::isinf(f16_to_f32(0x7C00)));
  CHECK(std::isnan(f16_to_f32(0x7E00)));
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(ckpt::hf::bf16_to_f32(0x3F80) == 1.0f);
  CHECK(ckpt::hf::f32_to_bf16(1.00390625f) == 0x3F80);  // halfway: rounds to even
  CHECK(ckpt::hf::f32_to_bf16(1.01171875f) == 0x3F82);
}

TEST_CASE("import refuses another shape, a missing tensor and unsupported model types, naming them") {
  TempDir dir;
  Trained t(test::gpt_tiny_plan(), dir);
  const fs::path hf = dir / "hf";
  core::hf::ExportOptions eo;
  eo.out_dir = hf.string();
  core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
  core::hf::ImportOptions io;
  io.checkpoints_dir = (dir / "imported");
  const nlohmann::json good = read_json(hf / "config.json");

  SUBCASE("a config.json of another shape lists every difference with both values") {
    nlohmann::json c = good;
    c["n_embd"] = 128;
    c["n_layer"] = 3;
    write_json(hf / "config.json", c);
    try {
      core::hf::import_checkpoint(hf.string(), t.plan, io);
      FAIL("imported a model of another shape");
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("config.json does not match the recipe's model (2)") != std::string::npos);
      CHECK(m.find("n_embd is 128 in config.json, the recipe has model.hidden_size=64") != std::string::npos);
      CHECK(m.find("n_layer is 3 in config.json, the recipe has model.num_layers=2") != std::string::npos);
      CHECK(m.find("n_inner is 256 in config.json, the recipe has model.ffn_hidden_size=256") == std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir / "imported/latest"));
  }
  SUBCASE("an exact-GELU config is refused: the engine computes tanh-GELU") {
    nlohmann::json c = good;
    c["activation_function"] = "gelu";
    write_json(hf / "config.json", c);
    CHECK_THROWS_WITH_AS(core::hf::import_checkpoint(hf.string(), t.plan, io),
                         doctest::Contains("activation_function is \"gelu\""), std::invalid_argument);
  }
  SUBCASE("a Llama recipe does not take a gpt2 model") {
    CHECK_THROWS_WITH_AS(core::hf::import_checkpoint(hf.string(), test::llama_tiny_plan(), io),
                         doctest::Contains("model_type is \"gpt2\" in config.json, the recipe describes a llama"),
                         std::invalid_argument);
  }
  SUBCASE("an unsupported model_type") {
    nlohmann::json c = good;
    c["model_type"] = "falcon";
    write_json(hf / "config.json", c);
    CHECK_THROWS_WITH_AS(core::hf::import_checkpoint(hf.string(), t.plan, io),
                         doctest::Contains("model_type \"falcon\""), std::invalid_argument);
  }
  SUBCASE("a missing tensor is named") {
    const ckpt::hf::HfTensorFiles files(hf.string());
    const fs::path broken = dir / "broken";
    fs::create_directories(broken);
    fs::copy_file(hf / "config.json", broken / "config.json");
    std::vector<ckpt::hf::HfOutTensor> decls;
    for (const std::string& n : files.names())
      if (n != "transformer.h.1.mlp.c_fc.bias") decls.push_back({n, files.find(n)->shape, ckpt::DType::f32});
    ckpt::hf::SafetensorsFileWriter w((broken / "model.safetensors").string(), decls, {{"format", "pt"}});
    for (const auto& d : decls) {
      const std::vector<float> data = files.read_f32(d.name);
      w.write(d.name, data.data(), int64_t(data.size()));
    }
    w.finish();
    CHECK_THROWS_WITH_AS(core::hf::import_checkpoint(broken.string(), t.plan, io),
                         doctest::Contains("transformer.h.1.mlp.c_fc.bias is missing"), std::runtime_error);
  }
  SUBCASE("no safetensors at all") {
    fs::remove(hf / "model.safetensors");
    CHECK_THROWS_WITH_AS(core::hf::import_checkpoint(hf.string(), t.plan, io),
                         doctest::Contains("neither model.safetensors nor model.safetensors.index.json"),
                         ckpt::CheckpointError);
  }
}

TEST_CASE("export refuses models with no HF equivalent and checkpoints of another shape") {
  plan::Plan no_bias = test::gpt_tiny_plan();
  no_bias.model.bias = false;
  CHECK_THROWS_WITH_AS(core::hf::hf_architecture(core::model_shape(no_bias)), doctest::Contains("model.bias=false"),
                       std::invalid_argument);
  plan::Plan mixed = test::gpt_tiny_plan();
  mixed.model.norm = plan::Norm::rmsnorm;
  CHECK_THROWS_WITH_AS(core::hf::hf_architecture(core::model_shape(mixed)),
                       doctest::Contains("match no Hugging Face architecture"), std::invalid_argument);

  TempDir dir;
  Trained t(test::gpt_tiny_plan(), dir);
  plan::Plan wider = t.plan;
  wider.model.hidden_size = 128;
  wider.model.ffn_hidden_size = 0;
  wider.model.head_dim = 0;
  test::fill_derived(wider);
  core::hf::ExportOptions eo;
  eo.out_dir = (dir / "hf");
  CHECK_THROWS_WITH_AS(core::hf::export_checkpoint(t.checkpoint, core::model_shape(wider), eo),
                       doctest::Contains("does not match the model of its plan"), std::runtime_error);
  // An output directory holding other files is not overwritten.
  fs::create_directories(dir / "busy");
  std::ofstream(dir / "busy/README.md") << "mine";
  eo.out_dir = (dir / "busy");
  CHECK_THROWS_WITH_AS(core::hf::export_checkpoint(t.checkpoint, t.shape(), eo),
                       doctest::Contains("already holds README.md"), std::runtime_error);
}

TEST_SUITE_END();
