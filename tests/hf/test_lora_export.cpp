// A LoRA fine-tune's adapter-only checkpoint, merged and exported: `ckpt merge` gives a full
// checkpoint whose model computes the adapter model's losses; `export --format hf --merge` imports
// back to the same losses; `export --format hf-peft` writes PEFT's key names, shapes and config,
// A/B values equal to the engine's tensors (A copied to each part of a fused linear, B split by the
// part's rows), and PEFT's own formula on them (base + lora_alpha/r · B·A, transposed for Conv1D)
// reproduces the merged export. tests/reference/peft_check.py runs real transformers + peft on the same
// files (RECIPE_PEFT_CHECK_DIR, below).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_convert.hpp"
#include "hf/hf_peft.hpp"
#include "hf/hf_safetensors.hpp"
#include "hf/lora_merge.hpp"
#include "core/model/rng.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "dsl/dsl.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("hf");

using namespace recipe;
using recipe::data::testing::TempDir;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p.string());
  return nlohmann::json::parse(in);
}

std::map<std::string, std::vector<float>> masters_by_name(core::Trainer& t) {
  const std::vector<float> all = test::to_host(t.backend(), t.params().master());
  std::map<std::string, std::vector<float>> m;
  for (const core::ParamSpec& p : t.params().layout().params)
    if (p.trainable) m[p.name].assign(all.begin() + p.offset, all.begin() + p.offset + p.numel);
  return m;
}

plan::Plan lora_plan(plan::Plan p, bool rslora = false) {
  p.mode = plan::Mode::finetune;
  p.peft.kind = plan::PeftKind::lora;
  p.peft.rank = 8;
  p.peft.alpha = 16;
  p.peft.use_rslora = rslora;
  p.peft.target_modules = {"all-linear"};
  p.model.vocab_size = 250;  // padded to 256: the exports trim it
  p.model.make_vocab_size_divisible_by = 128;
  p.trainer.max_steps = 10;
  test::fill_derived(p);
  return p;
}

plan::Plan without_lora(plan::Plan p) {
  p.peft = plan::PeftConfig{};
  p.mode = plan::Mode::pretrain;
  return p;
}

// A LoRA fine-tune from random weights whose adapters are far from their init (B = 0 would make
// every check trivial), saved adapter-only against the base it wrote.
struct TunedLora {
  plan::Plan plan;
  std::unique_ptr<kernels::Backend> be = test::cpu_backend();
  std::unique_ptr<core::Trainer> trainer;
  std::string base, checkpoint;

  TunedLora(plan::Plan p, const std::string& dir) : plan(std::move(p)) {
    const int gb = plan.trainer.global_batch_size;
    trainer = std::make_unique<core::Trainer>(plan, *be, nullptr, test::random_tokens(plan, 7, gb), nullptr);
    const std::string plan_toml = dsl::to_toml(plan);
    const ckpt::BaseRef ref = core::save_base_checkpoint(*trainer, dir + "/checkpoints", plan_toml);
    base = ref.path;
    core::ParamStore& store = trainer->params();
    for (const core::ParamSpec& sp : store.layout().params) {
      if (!sp.trainable) continue;
      std::vector<float> v = test::to_host(*be, store.master(sp));
      const uint64_t key = core::rng::stream_key(77, sp.name);
      for (size_t i = 0; i < v.size(); ++i) v[i] += float(0.1 * core::rng::normal(key, i));
      be->from_host(store.master(sp), v.data());
    }
    store.sync_compute();
    core::SaveOptions so;
    so.dir = dir + "/checkpoints";
    so.plan_toml = plan_toml;
    so.base = ref;
    checkpoint = core::save_checkpoint(*trainer, so);
  }
  core::ModelShape shape() const { return core::model_shape(plan); }
};

// A fresh model without adapters, loaded weights-only from `checkpoint_dir`.
std::unique_ptr<core::Trainer> plain_model(TunedLora& t, const std::string& checkpoint_dir) {
  const plan::Plan plain = without_lora(t.plan);
  auto m = std::make_unique<core::Trainer>(plain, *t.be, nullptr,
                                           test::random_tokens(plain, 7, plain.trainer.global_batch_size), nullptr);
  core::load_checkpoint(*m, checkpoint_dir, core::LoadMode::weights_only);
  return m;
}

void check_same_losses(core::Trainer& lora, core::Trainer& merged) {
  for (int step = 0; step < 3; ++step) {
    const double la = lora.compute_loss(step), lb = merged.compute_loss(step);
    CAPTURE(step);
    CHECK(std::fabs(la - lb) <= 1e-5 * std::fabs(la));
  }
}

// The tensors of a PEFT directory (HfTensorFiles reads model.safetensors: give it a copy by that name).
std::unique_ptr<ckpt::hf::HfTensorFiles> peft_tensors(const fs::path& peft_dir, const fs::path& scratch) {
  fs::create_directories(scratch);
  fs::copy_file(peft_dir / core::hf::kPeftWeightsFile, scratch / ckpt::hf::kSingleFile,
                fs::copy_options::overwrite_existing);
  return std::make_unique<ckpt::hf::HfTensorFiles>(scratch.string());
}

std::vector<float> concat(const std::vector<const std::vector<float>*>& parts) {
  std::vector<float> v;
  for (const auto* p : parts) v.insert(v.end(), p->begin(), p->end());
  return v;
}

}  // namespace

TEST_CASE("ckpt merge: the merged full checkpoint computes the adapter model's losses") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    TempDir dir;
    TunedLora t(lora_plan(llama ? test::llama_tiny_plan() : test::gpt_tiny_plan()), dir.path.string());
    core::lora::MergeOptions mo;
    mo.checkpoints_dir = dir / "merged";
    mo.plan_toml = dsl::to_toml(without_lora(t.plan));
    const core::lora::MergeResult r = core::lora::merge_checkpoint(t.checkpoint, t.shape(), mo);
    CHECK(r.checkpoint_dir == dir / "merged/step-0");
    CHECK(r.merged == 2 * (llama ? 3 + 1 + 2 + 1 : 3 + 1 + 1 + 1));  // q,k,v, proj, gate,up | fc1, down | fc2
    {
      const ckpt::CheckpointReader merged(r.checkpoint_dir);
      CHECK(merged.base_ref() == nullptr);
      for (const ckpt::TensorInfo& ti : merged.tensors()) {
        CAPTURE(ti.name);
        CHECK(ti.name.find("lora") == std::string::npos);
        CHECK(ti.name.rfind("optimizer.", 0) != 0);
      }
      CHECK(int(merged.tensors().size()) == r.tensors);
      CHECK(merged.common()["merged_from"]["path"] == t.checkpoint);
      CHECK(merged.common()["merged_from"]["base"] == t.base);
    }
    auto plain = plain_model(t, r.checkpoint_dir);
    check_same_losses(*t.trainer, *plain);

    // The merge math in one place: W + s·B·A, element for element.
    const auto m = masters_by_name(*t.trainer);
    const ckpt::CheckpointReader src(t.checkpoint);
    const std::string w = "layers.1.attention.k.weight";
    std::vector<float> expected(size_t(src.find(w)->global_shape[0] * src.find(w)->global_shape[1]));
    src.read(w, ckpt::Box{{0, 0}, src.find(w)->global_shape}, ckpt::DType::f32, expected.data());
    const std::vector<float>& a = m.at("layers.1.attention.qkv.lora_a.weight");
    const std::vector<float>& b = m.at("layers.1.attention.k.lora_b.weight");
    const int64_t in = t.plan.model.hidden_size, out = int64_t(expected.size()) / in, rank = 8;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < rank; ++k) acc += double(b[size_t(o * rank + k)]) * a[size_t(k * in + i)];
        expected[size_t(o * in + i)] += float(2.0 * acc);  // s = 16 / 8
      }
    CHECK(core::lora::read_merged(src, t.shape(), w) == expected);
  }
}

TEST_CASE("ckpt merge refuses a model without adapters and a non-empty output") {
  TempDir dir;
  TunedLora t(lora_plan(test::gpt_tiny_plan()), dir.path.string());
  core::lora::MergeOptions mo;
  mo.checkpoints_dir = dir / "checkpoints";  // holds the fine-tune's checkpoints
  CHECK_THROWS_WITH_AS(core::lora::merge_checkpoint(t.checkpoint, t.shape(), mo), doctest::Contains("is not empty"),
                       std::runtime_error);
  mo.checkpoints_dir = dir / "merged";
  CHECK_THROWS_WITH_AS(core::lora::merge_checkpoint(t.base, core::lora::without_adapters(t.shape()), mo),
                       doctest::Contains("nothing to merge"), std::invalid_argument);
}

TEST_CASE("export --format hf: --merge gives the fine-tuned model (import computes its losses), plain the base") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    TempDir dir;
    TunedLora t(lora_plan(llama ? test::llama_tiny_plan() : test::gpt_tiny_plan()), dir.path.string());
    core::hf::ExportOptions eo;
    eo.out_dir = dir / "merged_hf";
    eo.merge_lora = true;
    const core::hf::ExportResult er = core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
    CHECK_FALSE(er.adapters_left_out);
    core::hf::ImportOptions io;
    io.checkpoints_dir = dir / "imported";
    const plan::Plan plain = without_lora(t.plan);
    const core::hf::ImportResult ir = core::hf::import_checkpoint(eo.out_dir, plain, io);
    auto merged = plain_model(t, ir.checkpoint_dir);
    check_same_losses(*t.trainer, *merged);

    // Without --merge: the base model, exactly the base checkpoint's weights.
    eo.out_dir = dir / "base_hf";
    eo.merge_lora = false;
    CHECK(core::hf::export_checkpoint(t.checkpoint, t.shape(), eo).adapters_left_out);
    const ckpt::hf::HfTensorFiles files(eo.out_dir);
    const ckpt::CheckpointReader base(t.base);
    const std::string ours = "layers.0.attention.proj.weight";
    std::vector<float> w(size_t(base.find(ours)->global_shape[0] * base.find(ours)->global_shape[1]));
    base.read(ours, ckpt::Box{{0, 0}, base.find(ours)->global_shape}, ckpt::DType::f32, w.data());
    const std::vector<float> hf =
        files.read_f32(llama ? "model.layers.0.self_attn.o_proj.weight" : "transformer.h.0.attn.c_proj.weight");
    if (llama) {
      CHECK(hf == w);
    } else {  // Conv1D: transposed
      const int64_t C = t.plan.model.hidden_size;
      bool same = true;
      for (int64_t o = 0; o < C; ++o)
        for (int64_t i = 0; i < C; ++i) same = same && hf[size_t(i * C + o)] == w[size_t(o * C + i)];
      CHECK(same);
    }
    eo.merge_lora = true;
    CHECK_THROWS_WITH_AS(core::hf::export_checkpoint(t.base, core::lora::without_adapters(t.shape()), eo),
                         doctest::Contains("without LoRA adapters"), std::invalid_argument);
  }
}

TEST_CASE("export --format hf-peft: PEFT keys, shapes and config; A shared, B split by rows; PEFT's math") {
  for (bool llama : {false, true}) {
    for (bool rslora : {false, true}) {
      CAPTURE(llama);
      CAPTURE(rslora);
      TempDir dir;
      TunedLora t(lora_plan(llama ? test::llama_tiny_plan() : test::gpt_tiny_plan(), rslora), dir.path.string());
      const int64_t C = t.plan.model.hidden_size, F = t.plan.model.ffn_hidden_size, r = 8;
      const int64_t KV = int64_t(t.plan.model.num_kv_heads) * t.plan.model.head_dim;
      core::hf::PeftExportOptions po;
      po.out_dir = dir / "peft";
      const core::hf::PeftExportResult pr = core::hf::export_peft(t.checkpoint, t.shape(), t.plan.peft, po);

      const nlohmann::json cfg = read_json(dir / "peft/adapter_config.json");
      CHECK(cfg["peft_type"] == "LORA");
      CHECK(cfg["task_type"] == "CAUSAL_LM");
      CHECK(cfg["r"] == 8);
      CHECK(cfg["lora_alpha"] == 16.0);
      CHECK(cfg["use_rslora"] == rslora);
      CHECK(cfg["bias"] == "none");
      CHECK(cfg["use_dora"] == false);
      CHECK(cfg["fan_in_fan_out"] == !llama);
      const std::vector<std::string> targets =
          llama ? std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}
                : std::vector<std::string>{"attn.c_proj", "c_attn", "c_fc", "mlp.c_proj"};
      CHECK(cfg["target_modules"].get<std::vector<std::string>>() == targets);
      CHECK(pr.target_modules == targets);

      // Key names and shapes.
      const std::map<std::string, std::vector<int64_t>> layer0 =
          llama
              ? std::map<std::string, std::vector<int64_t>>{{"model.layers.0.self_attn.q_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.self_attn.q_proj.lora_B.weight", {C, r}},
                                                            {"model.layers.0.self_attn.k_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.self_attn.k_proj.lora_B.weight", {KV, r}},
                                                            {"model.layers.0.self_attn.v_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.self_attn.v_proj.lora_B.weight", {KV, r}},
                                                            {"model.layers.0.self_attn.o_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.self_attn.o_proj.lora_B.weight", {C, r}},
                                                            {"model.layers.0.mlp.gate_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.mlp.gate_proj.lora_B.weight", {F, r}},
                                                            {"model.layers.0.mlp.up_proj.lora_A.weight", {r, C}},
                                                            {"model.layers.0.mlp.up_proj.lora_B.weight", {F, r}},
                                                            {"model.layers.0.mlp.down_proj.lora_A.weight", {r, F}},
                                                            {"model.layers.0.mlp.down_proj.lora_B.weight", {C, r}}}
              : std::map<std::string, std::vector<int64_t>>{{"transformer.h.0.attn.c_attn.lora_A.weight", {r, C}},
                                                            {"transformer.h.0.attn.c_attn.lora_B.weight", {3 * C, r}},
                                                            {"transformer.h.0.attn.c_proj.lora_A.weight", {r, C}},
                                                            {"transformer.h.0.attn.c_proj.lora_B.weight", {C, r}},
                                                            {"transformer.h.0.mlp.c_fc.lora_A.weight", {r, C}},
                                                            {"transformer.h.0.mlp.c_fc.lora_B.weight", {F, r}},
                                                            {"transformer.h.0.mlp.c_proj.lora_A.weight", {r, F}},
                                                            {"transformer.h.0.mlp.c_proj.lora_B.weight", {C, r}}};
      auto files = peft_tensors(dir / "peft", dir / "peft_read");
      CHECK(files->names().size() == 2 * layer0.size());  // two layers
      CHECK(pr.tensors == int(2 * layer0.size()));
      for (const auto& entry : layer0) {
        const std::string& key = entry.first;
        const std::vector<int64_t>& shape = entry.second;
        CAPTURE(key);
        for (int l = 0; l < 2; ++l) {
          std::string k = "base_model.model." + key;
          const size_t at = k.find(".0.");
          k.replace(at, 3, "." + std::to_string(l) + ".");
          const ckpt::hf::HfTensor* h = files->find(k);
          REQUIRE_MESSAGE(h, k);
          CHECK(h->shape == shape);
          CHECK(h->dtype == "F32");
        }
      }

      // Values: A is the fused linear's one A; B the part's rows of the fused B.
      const auto m = masters_by_name(*t.trainer);
      const std::string pre = "base_model.model.";
      if (llama) {
        for (const char* part : {"q", "k", "v"}) {
          const std::string mod = pre + "model.layers.1.self_attn." + part + "_proj.";
          CHECK(files->read_f32(mod + "lora_A.weight") == m.at("layers.1.attention.qkv.lora_a.weight"));
          CHECK(files->read_f32(mod + "lora_B.weight") ==
                m.at("layers.1.attention." + std::string(part) + ".lora_b.weight"));
        }
        for (const char* part : {"gate", "up"}) {
          const std::string mod = pre + "model.layers.1.mlp." + part + "_proj.";
          CHECK(files->read_f32(mod + "lora_A.weight") == m.at("layers.1.mlp.gate_up.lora_a.weight"));
          CHECK(files->read_f32(mod + "lora_B.weight") == m.at("layers.1.mlp." + std::string(part) + ".lora_b.weight"));
        }
        CHECK(files->read_f32(pre + "model.layers.1.mlp.down_proj.lora_B.weight") ==
              m.at("layers.1.mlp.down.lora_b.weight"));
      } else {
        const std::string mod = pre + "transformer.h.1.attn.c_attn.";
        CHECK(files->read_f32(mod + "lora_A.weight") == m.at("layers.1.attention.qkv.lora_a.weight"));
        CHECK(files->read_f32(mod + "lora_B.weight") ==
              concat({&m.at("layers.1.attention.q.lora_b.weight"), &m.at("layers.1.attention.k.lora_b.weight"),
                      &m.at("layers.1.attention.v.lora_b.weight")}));
        CHECK(files->read_f32(pre + "transformer.h.1.mlp.c_proj.lora_A.weight") ==
              m.at("layers.1.mlp.fc2.lora_a.weight"));
      }

      // PEFT's formula on the exported files: W_hf + scaling·(B·A) (transposed when fan_in_fan_out)
      // is the merged export's weight, for every adapted module.
      core::hf::ExportOptions eo;
      eo.out_dir = dir / "base_hf";
      core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
      eo.out_dir = dir / "merged_hf";
      eo.merge_lora = true;
      core::hf::export_checkpoint(t.checkpoint, t.shape(), eo);
      const ckpt::hf::HfTensorFiles base_hf(dir / "base_hf"), merged_hf(dir / "merged_hf");
      const double scaling = rslora ? 16.0 / std::sqrt(8.0) : 16.0 / 8.0;
      const bool fan_in_fan_out = cfg["fan_in_fan_out"].get<bool>();
      int modules = 0;
      for (const std::string& key : files->names()) {
        const std::string tail = ".lora_A.weight";
        if (key.size() < tail.size() || key.compare(key.size() - tail.size(), tail.size(), tail) != 0) continue;
        const std::string module = key.substr(pre.size(), key.size() - pre.size() - tail.size());
        CAPTURE(module);
        const std::vector<float> A = files->read_f32(key);
        const std::vector<float> B = files->read_f32(pre + module + ".lora_B.weight");
        const std::vector<float> W = base_hf.read_f32(module + ".weight"), M = merged_hf.read_f32(module + ".weight");
        const int64_t out = int64_t(B.size()) / r, in = int64_t(A.size()) / r;
        REQUIRE(int64_t(W.size()) == out * in);
        double worst = 0;
        for (int64_t o = 0; o < out; ++o)
          for (int64_t i = 0; i < in; ++i) {
            double acc = 0;
            for (int64_t k = 0; k < r; ++k) acc += double(B[size_t(o * r + k)]) * A[size_t(k * in + i)];
            const size_t at = fan_in_fan_out ? size_t(i * out + o) : size_t(o * in + i);
            worst = std::max(worst, std::fabs(W[at] + scaling * acc - M[at]));
          }
        CHECK(worst <= 1e-6);
        ++modules;
      }
      CHECK(modules == 2 * (llama ? 7 : 4));
    }
  }
}

TEST_CASE("export --format hf-peft refuses a model without adapters") {
  TempDir dir;
  TunedLora t(lora_plan(test::gpt_tiny_plan()), dir.path.string());
  core::hf::PeftExportOptions po;
  po.out_dir = dir / "peft";
  CHECK_THROWS_WITH_AS(core::hf::export_peft(t.base, core::lora::without_adapters(t.shape()), t.plan.peft, po),
                       doctest::Contains("no LoRA adapters"), std::invalid_argument);
}

// With RECIPE_PEFT_CHECK_DIR set, leaves <dir>/<model_type>/ for tests/reference/peft_check.py: an
// adapter-only LoRA checkpoint (checkpoints/step-0 and its base checkpoints/base/step-0, with a
// plan.toml the CLI reads) and batch.json: token rows and the engine's mean loss on them.
TEST_CASE("LoRA checkpoints for tests/reference/peft_check.py (RECIPE_PEFT_CHECK_DIR)") {
  const char* root = std::getenv("RECIPE_PEFT_CHECK_DIR");
  if (!root || !*root) return;
  for (bool llama : {false, true}) {
    const fs::path out = fs::path(root) / (llama ? "llama" : "gpt2");
    fs::remove_all(out);
    fs::create_directories(out);
    TunedLora t(lora_plan(llama ? test::llama_tiny_plan() : test::gpt_tiny_plan()), out.string());
    const int gb = t.plan.trainer.global_batch_size;
    const auto source = test::random_tokens(t.plan, 7, gb);  // the trainer's stream
    nlohmann::json rows = nlohmann::json::array();
    std::vector<int32_t> row(size_t(t.plan.model.seq_length + 1));
    for (int i = 0; i < gb; ++i) {
      source->sample(i, row.data());
      rows.push_back(row);
    }
    std::ofstream(out / "batch.json") << nlohmann::json{{"tokens", rows}, {"loss", t.trainer->compute_loss(0)}}.dump();
    MESSAGE("wrote " << out.string() << " for tests/reference/peft_check.py");
  }
}

TEST_SUITE_END();
