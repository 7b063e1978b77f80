// "Validates ⇒ runs": every enum value and every boolean of the key table, set one at a time on a
// tiny GPT and a tiny Llama (CPU, one rank). Whatever the resolver accepts must also construct a
// core::Trainer without throwing; the values this version cannot execute must be rejected.
#include <doctest/doctest.h>

#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "core/train/trainer.hpp"
#include "dsl/dsl.hpp"
#include "dsl/plan_fields.hpp"
#include "kernels/ops.hpp"
#include "plan/enums.hpp"

TEST_SUITE_BEGIN("core/train");

namespace {

using json = nlohmann::ordered_json;

// mode=finetune walks start from random weights on purpose (checkpoint.allow_random_init).
json tiny_base(bool llama) {
  json t = json::parse(R"({
    "model": {"arch": "gpt", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 256, "make_vocab_size_divisible_by": 1, "seq_length": 16},
    "data": {"kind": "mock"},
    "trainer": {"max_steps": 2, "micro_batch_size": 2, "device": "cpu", "precision": "fp32", "cpu_threads": 1},
    "checkpoint": {"allow_random_init": true}
  })");
  if (llama)
    t.merge_patch(json::parse(R"({"model": {"arch": "llama", "norm": "rmsnorm", "activation": "swiglu",
        "position_embedding": "rope", "num_kv_heads": 2, "ffn_hidden_size": 128, "tie_embeddings": false,
        "bias": false}})"));
  return t;
}

// One override `path = value` on top of `base`.
json with_value(json base, const recipe::dsl::FieldInfo& f, const json& value) {
  if (f.section.empty())
    base[f.key] = value;
  else
    base[f.section][f.key] = value;
  return base;
}

struct Outcome {
  bool validated = false;
  std::string error;  // the violations, or what the Trainer threw
};

Outcome validate_and_construct(const json& root) {
  recipe::dsl::ConfigTree tree;
  tree.root = root;
  tree.source = "test:validates_runs";
  const auto r = recipe::dsl::resolve(tree, recipe::dsl::ExecutorFacts{});
  Outcome out;
  if (!r.ok()) {
    out.error = recipe::dsl::format_violations(r.violations);
    return out;
  }
  out.validated = true;
  recipe::kernels::BackendOptions bo;
  bo.cpu_threads = 1;
  auto backend = recipe::kernels::make_cpu_backend(bo);
  try {
    recipe::core::Trainer trainer(r.plan, *backend);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace

TEST_CASE("every enum value and boolean that validates constructs a Trainer on the CPU") {
  int validated = 0, rejected = 0;
  std::set<std::string> accepted;  // "path=value" that validated on some base
  for (const bool llama : {false, true}) {
    const json base = tiny_base(llama);
    for (const auto& f : recipe::dsl::plan_fields()) {
      std::vector<json> values;
      if (f.type == recipe::dsl::FieldType::Bool) values = {true, false};
      for (const auto& choice : f.allowed) values.push_back(choice);
      for (const auto& value : values) {
        const std::string what = (llama ? "llama: " : "gpt: ") + f.path() + "=" + value.dump();
        CAPTURE(what);
        const Outcome o = validate_and_construct(with_value(base, f, value));
        if (!o.validated) {
          ++rejected;
          continue;
        }
        ++validated;
        accepted.insert(f.path() + "=" + value.dump());
        CHECK_MESSAGE(o.error.empty(), o.error);
      }
    }
  }
  MESSAGE(validated << " settings validated and constructed a Trainer; " << rejected << " were rejected");
  CHECK(validated > 40);
  // Sequence parallelism needs tp > 1, which these one-rank plans do not have (its runs are
  // tests/core/parallel/test_sp_parity.cpp's).
  CHECK(accepted.count("parallelism.sequence_parallel=true") == 0);
  // ... and the ordinary choices do.
  for (const char* ok : {"model.norm=\"rmsnorm\"", "model.activation=\"swiglu\"", "trainer.recompute=\"full\"",
                         "schedule.decay_style=\"linear\"", "trainer.precision=\"bf16\"", "parallelism.zero1=true",
                         "mode=\"finetune\"", "data.kind=\"mock\"", "data.tokenizer=\"byte\"",
                         "optimizer.kind=\"adamw\"", "peft.kind=\"none\"", "executor.kind=\"mpi\""})
    CHECK_MESSAGE(accepted.count(ok) == 1, ok);
}

TEST_CASE("the walk covers every enum key: the field table lists exactly the spellings of plan/enums.hpp") {
  namespace plan = recipe::plan;
  const struct {
    const char* path;
    std::vector<std::string> names;
  } enums[] = {
      {"mode", plan::enum_names<plan::Mode>()},
      {"model.arch", plan::enum_names<plan::Arch>()},
      {"model.norm", plan::enum_names<plan::Norm>()},
      {"model.activation", plan::enum_names<plan::Activation>()},
      {"model.position_embedding", plan::enum_names<plan::PositionEmbedding>()},
      {"model.rope_scaling", plan::enum_names<plan::RopeScaling>()},
      {"data.kind", plan::enum_names<plan::DataKind>()},
      {"data.tokenizer", plan::enum_names<plan::Tokenizer>()},
      {"data.chat_template", plan::enum_names<plan::ChatTemplate>()},
      {"optimizer.kind", plan::enum_names<plan::OptimizerKind>()},
      {"schedule.decay_style", plan::enum_names<plan::DecayStyle>()},
      {"trainer.device", plan::enum_names<plan::Device>()},
      {"trainer.precision", plan::enum_names<plan::Precision>()},
      {"trainer.recompute", plan::enum_names<plan::Recompute>()},
      {"peft.kind", plan::enum_names<plan::PeftKind>()},
      {"executor.kind", plan::enum_names<plan::ExecutorKind>()},
      {"kernels.attention", plan::enum_names<plan::Attention>()},
      {"kernels.bias_grad", plan::enum_names<plan::BiasGrad>()},
      {"fp8.scaling", plan::enum_names<plan::Fp8Scaling>()},
      {"fp8.forward_format", plan::enum_names<plan::Fp8Format>()},
      {"fp8.backward_format", plan::enum_names<plan::Fp8Format>()},
      {"fp8.amax_compute", plan::enum_names<plan::Fp8AmaxCompute>()},
      {"parallelism.pipeline_split", plan::enum_names<plan::PipelineSplit>()},
  };
  int enum_fields = 0;
  for (const auto& f : recipe::dsl::plan_fields()) enum_fields += f.allowed.empty() ? 0 : 1;
  CHECK(enum_fields == static_cast<int>(std::size(enums)));  // no string key with a closed set left
  for (const auto& e : enums) {
    CAPTURE(e.path);
    const auto* f = recipe::dsl::find_field(e.path);
    REQUIRE(f);
    CHECK(f->allowed == e.names);
  }
  // The stringized enumerator lists split into the recipe spellings, in declaration order.
  CHECK(plan::enum_names<plan::Tokenizer>() ==
        std::vector<std::string>{"none", "byte", "gpt2_bpe", "sentencepiece", "hf"});
  CHECK(plan::to_string(plan::ExecutorKind::slurm) == "slurm");
  CHECK(plan::from_string<plan::Mode>("finetune") == plan::Mode::finetune);
  CHECK(plan::from_string<plan::DataKind>("sft") == plan::DataKind::sft);
  CHECK(!plan::from_string<plan::DataKind>("chat").has_value());
}

TEST_CASE("a spelling outside an enum is rejected with the key, the value and the choices") {
  const struct {
    const char* patch;
    const char* path;
    const char* choices;
  } cases[] = {
      {R"({"mode": "distill"})", "mode", "pretrain"},
      {R"({"data": {"kind": "parquet"}})", "data.kind", "indexed"},
      {R"({"data": {"tokenizer": "tiktoken"}})", "data.tokenizer", "sentencepiece"},
      {R"({"optimizer": {"kind": "sgd"}})", "optimizer.kind", "adamw"},
      {R"({"peft": {"kind": "ia3"}})", "peft.kind", "lora"},
      {R"({"executor": {"kind": "k8s"}})", "executor.kind", "slurm"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.patch);
    json root = tiny_base(false);
    root.merge_patch(json::parse(c.patch));
    recipe::dsl::ConfigTree tree;
    tree.root = root;
    const auto r = recipe::dsl::resolve(tree, recipe::dsl::ExecutorFacts{});
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].path == c.path);
    const std::string value = json::parse(c.patch).flatten().front().get<std::string>();
    CHECK_MESSAGE(r.violations[0].message.find("\"" + value + "\" is not one of") != std::string::npos,
                  r.violations[0].message);
    CHECK_MESSAGE(r.violations[0].message.find(c.choices) != std::string::npos, r.violations[0].message);
  }
}

TEST_CASE("LoRA validates and constructs a Trainer: every target spelling, rsLoRA, dropout, every recompute level") {
  const char* patches[] = {
      R"({"peft": {"target_modules": ["qkv"]}})",
      R"({"peft": {"target_modules": ["all-linear"], "use_rslora": true}})",
      R"({"peft": {"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}})",
      R"({"peft": {"target_modules": ["c_attn", "c_proj", "c_fc"]}})",
      R"({"peft": {"target_modules": ["proj", "fc1", "fc2"]}, "trainer": {"recompute": "full"}})",
      R"({"peft": {"target_modules": ["all-linear"]}, "trainer": {"recompute": "none"}})",
      R"({"peft": {"target_modules": ["all-linear"]}, "trainer": {"precision": "bf16"}})",
      R"({"peft": {"target_modules": ["all-linear"], "dropout": 0.05}, "trainer": {"recompute": "full"}})",
  };
  for (const bool llama : {false, true})
    for (const char* patch : patches) {
      CAPTURE(llama);
      CAPTURE(patch);
      json root = tiny_base(llama);
      root.merge_patch(json::parse(R"({"mode": "finetune", "peft": {"kind": "lora", "rank": 8, "alpha": 16}})"));
      root.merge_patch(json::parse(patch));
      const Outcome o = validate_and_construct(root);
      CHECK_MESSAGE(o.validated, o.error);
      CHECK_MESSAGE(o.error.empty(), o.error);
    }
  // q_proj without k_proj and v_proj: one fused linear here, rejected with the reason.
  json root = tiny_base(true);
  root.merge_patch(
      json::parse(R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["q_proj", "v_proj"]}})"));
  recipe::dsl::ConfigTree tree;
  tree.root = root;
  const auto r = recipe::dsl::resolve(tree, recipe::dsl::ExecutorFacts{});
  REQUIRE(r.violations.size() == 1);
  CHECK(r.violations[0].path == "peft.target_modules");
  CHECK(r.violations[0].message.find("missing k_proj") != std::string::npos);
}

TEST_CASE("context parallelism with sequence parallelism is rejected, with the key; either alone validates") {
  for (const char* alone : {R"({"parallelism": {"tp": 2, "sequence_parallel": true}, "executor": {"cpu_ranks": 2}})",
                            R"({"parallelism": {"cp": 2}, "executor": {"cpu_ranks": 2}})"}) {
    CAPTURE(alone);
    json root = tiny_base(false);
    root.merge_patch(json::parse(alone));
    recipe::dsl::ConfigTree tree;
    tree.root = root;
    const auto r = recipe::dsl::resolve(tree, recipe::dsl::ExecutorFacts{});
    CHECK_MESSAGE(r.violations.empty(), recipe::dsl::format_violations(r.violations));
  }
  const struct {
    const char* patch;
    const char* path;
    const char* needle;
  } cases[] = {
      {R"({"parallelism": {"tp": 2, "cp": 2, "sequence_parallel": true}, "executor": {"cpu_ranks": 4}})",
       "parallelism.sequence_parallel", "cp=2"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.patch);
    json root = tiny_base(false);
    root.merge_patch(json::parse(c.patch));
    recipe::dsl::ConfigTree tree;
    tree.root = root;
    const auto r = recipe::dsl::resolve(tree, recipe::dsl::ExecutorFacts{});
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].path == c.path);
    CHECK_MESSAGE(r.violations[0].message.find(c.needle) != std::string::npos, r.violations[0].message);
    CHECK(r.violations[0].message.find("not implemented in this version") != std::string::npos);
  }
}

TEST_SUITE_END();
