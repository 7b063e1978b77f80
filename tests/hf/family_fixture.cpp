// check_family_fixture (family_fixture.hpp). The recipe of a fixture is read off its config.json
// through its family's HF key table (family/family.hpp HfConfigKey: the keys export writes and
// import checks, with transformers' defaults), so the import that follows checks config.json
// against a recipe built independently of it only in the flags the family fixes. The model then
// runs twice: the training forward (Model::forward, every position's loss against the next input
// id, compared with the cross-entropy of transformers' logits) and the decode path
// (IncrementalDecoder one token at a time, whose logits are compared one by one).
#include "tests/hf/family_fixture.hpp"

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
#include "family/registry.hpp"
#include "hf/hf_convert.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

namespace recipe::testing {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), p.string());
  return json::parse(in);
}

// config.json's value of `key` (in rope_parameters where the key lives there and the file has it),
// or null.
json config_value(const json& c, const core::HfConfigKey& k) {
  std::string name = k.key;
  const json* obj = &c;
  if (k.in_rope_parameters && c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    obj = &c["rope_parameters"];
    if (const auto dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
  }
  return obj->contains(name) ? (*obj)[name] : json();
}

// The plan of the model a fixture's config.json describes: its family (by model_type), the fields
// of the family's HF keys, the family's flags, a CPU f32 run of one row of the fixture's length.
plan::Plan plan_of(const json& config, int seq) {
  const std::string model_type = config.at("model_type").get<std::string>();
  const core::Family* family = nullptr;
  const core::HfArchitecture* arch = nullptr;
  for (const core::Family* f : core::families())
    for (const core::HfArchitecture& h : f->hf)
      if (model_type == h.model_type) family = f, arch = &h;
  REQUIRE_MESSAGE(family, "no family reads model_type " << model_type);
  plan::Plan p = test::llama_tiny_plan();
  auto& m = p.model;
  m.arch = *plan::from_string<plan::Arch>(family->arch);
  m.norm = family->defaults.layernorm ? plan::Norm::layernorm : plan::Norm::rmsnorm;
  m.activation = family->defaults.gelu ? plan::Activation::gelu : plan::Activation::swiglu;
  m.position_embedding =
      family->defaults.learned_positions ? plan::PositionEmbedding::learned : plan::PositionEmbedding::rope;
  m.bias = family->defaults.bias;
  m.tie_embeddings = family->defaults.tied;
  m.qk_norm = family->defaults.qk_norm;
  m.head_dim = 0;
  m.make_vocab_size_divisible_by = 1;
  for (const core::HfConfigKey& k : arch->config) {
    const json v = config_value(config, k);
    if (v.is_null() || !v.is_primitive()) continue;
    using F = core::HfField;
    switch (k.field) {
      case F::vocab:
        m.vocab_size = v.get<int>();
        break;
      case F::hidden:
        m.hidden_size = v.get<int>();
        break;
      case F::layers:
        m.num_layers = v.get<int>();
        break;
      case F::heads:
        m.num_attention_heads = v.get<int>();
        break;
      case F::kv_heads:
        m.num_kv_heads = v.get<int>();
        break;
      case F::head_dim:
        m.head_dim = v.get<int>();
        break;
      case F::ffn:
        m.ffn_hidden_size = v.get<int>();
        break;
      case F::max_positions:
        m.max_position_embeddings = v.get<int>();
        break;
      case F::norm_eps:
        m.norm_eps = v.get<double>();
        break;
      case F::rope_theta:
        m.rope_theta = v.get<double>();
        break;
      case F::init_std:
        m.init_std = v.get<double>();
        break;
      case F::bias:
        m.bias = m.bias || v.get<bool>();
        break;
      case F::tied:
        m.tie_embeddings = v.get<bool>();
        break;
      case F::none:
        break;
    }
  }
  m.seq_length = seq;
  p.trainer.micro_batch_size = 1;
  p.trainer.global_batch_size = 1;
  p.trainer.precision = plan::Precision::fp32;
  test::fill_derived(p);
  return p;
}

}  // namespace

void check_family_fixture(const std::string& name) {
  INFO("fixture " << name);
  const fs::path dir = fs::path(RECIPE_SOURCE_DIR) / "tests/data/hf_families" / name;
  const json config = read_json(dir / "config.json");
  const json expected = read_json(dir / "expected.json");
  const auto rows = expected.at("input_ids").get<std::vector<std::vector<int32_t>>>();
  const auto logits = expected.at("logits").get<std::vector<std::vector<std::vector<float>>>>();
  REQUIRE(!rows.empty());
  const int T = int(rows[0].size());
  const plan::Plan p = plan_of(config, T);
  const int V = p.model.vocab_size;

  data::testing::TempDir tmp;
  core::hf::ImportOptions io;
  io.checkpoints_dir = tmp / "imported";
  const core::hf::ImportResult ir = core::hf::import_checkpoint(dir.string(), p, io);
  CHECK(ir.model_type == config["model_type"].get<std::string>());
  auto be = test::cpu_backend();
  core::Trainer trainer(p, *be, nullptr, test::random_tokens(p), nullptr);
  core::load_checkpoint(trainer, ir.checkpoint_dir, core::LoadMode::weights_only);
  const core::ModelShape s = core::model_shape(p);
  core::Model model(s, 1, core::Recompute::none, *be, trainer.params());

  // The bound: transformers and the engine compute the same f32 function in another order (GEMM
  // blocking, attention's softmax, the norms' f32-vs-double statistics). Measured on qwen3_tiny
  // (|logit| ≤ 4.9, the dev machine's OpenBLAS): largest logit difference 5.0e-6, loss 2.7e-6, i.e.
  // 1e-6 of the logit scale; 1e-4 of it leaves two orders of magnitude for other BLAS kernels,
  // while a dropped feature (qk-norm off, tests/hf/test_family_qwen3.cpp: 1.9) lands far outside.
  double scale = 0;
  for (const auto& row : logits)
    for (const auto& pos : row)
      for (float x : pos) scale = std::max(scale, double(std::fabs(x)));
  const double bound = 1e-4 * scale;

  std::vector<float> losses(static_cast<size_t>(T));
  void* loss_buf = be->alloc(losses.size() * sizeof(float));
  const kernels::Tensor loss_t(loss_buf, kernels::DType::f32, kernels::Device::cpu, {T});
  double worst_logit = 0, worst_loss = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    REQUIRE(int(rows[r].size()) == T);
    // Decode path: the raw logits at every position.
    core::IncrementalDecoder dec(model);
    for (int t = 0; t < T; ++t) {
      const std::vector<float>& got = dec.forward(std::span<const int32_t>(rows[r].data() + t, 1));
      REQUIRE(int(got.size()) == V);
      for (int y = 0; y < V; ++y)
        worst_logit = std::max(worst_logit, std::fabs(double(got[size_t(y)]) - logits[r][size_t(t)][size_t(y)]));
    }
    // Training forward: the loss of each next id, against transformers' log-softmax.
    std::vector<int32_t> targets(size_t(T), -1);
    for (int t = 0; t + 1 < T; ++t) targets[size_t(t)] = rows[r][size_t(t) + 1];
    model.load_split_tokens(0, rows[r].data(), targets.data());
    model.forward(0, false, loss_t, kernels::Tensor());
    be->to_host(losses.data(), loss_t);
    for (int t = 0; t + 1 < T; ++t) {
      const std::vector<float>& l = logits[r][size_t(t)];
      const double mx = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (float x : l) sum += std::exp(double(x) - mx);
      const double want = mx + std::log(sum) - l[size_t(targets[size_t(t)])];
      worst_loss = std::max(worst_loss, std::fabs(double(losses[size_t(t)]) - want));
    }
  }
  be->free(loss_buf);
  MESSAGE(name << ": largest |logit| " << scale << ", largest logit difference " << worst_logit
               << ", largest loss difference " << worst_loss << ", bound " << bound);
  CHECK(scale > 1.0);  // logits that say something
  CHECK(worst_logit <= bound);
  CHECK(worst_loss <= bound);
}

}  // namespace recipe::testing
