// Reading the tree: types, unknown keys with suggestions, derived keys, enum choices, blends.
#include <set>
#include "dsl/plan_fields.hpp"
#include "helpers.hpp"
#include "scratch_files.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

TEST_CASE("dsl_resolve: a small valid tree resolves with no violations") {
  const auto r = resolve_json(tiny_gpt());
  CHECK_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.num_layers == 4);
  CHECK(r.plan.trainer.device == recipe::plan::Device::cpu);
  CHECK(r.plan.experiment.name == "test_recipe");
}

TEST_CASE("dsl_resolve: wrong types are violations naming path and value") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"max_steps": "ten"}})")));
  const Violation* v = find_violation(r, "trainer.max_steps");
  REQUIRE(v);
  CHECK(v->message == "trainer.max_steps must be an integer, got \"ten\"");

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"bias": "yes", "norm_eps": "small"},
                                                     "trainer": {"micro_batch_size": 2.5}})")));
  REQUIRE(find_violation(r, "model.bias"));
  CHECK(find_violation(r, "model.bias")->message.find("boolean") != std::string::npos);
  REQUIRE(find_violation(r, "model.norm_eps"));
  REQUIRE(find_violation(r, "trainer.micro_batch_size"));
  CHECK(find_violation(r, "trainer.micro_batch_size")->message.find("2.5") != std::string::npos);

  // An integral float (Lua's 1e3) is a fine integer; an integer is a fine float.
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"max_steps": 1e3}, "optimizer": {"lr": 1}})")));
  CHECK_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.trainer.max_steps == 1000);
  CHECK(r.plan.optimizer.lr == 1.0);

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": 3})")));
  REQUIRE(find_violation(r, "model"));
}

TEST_CASE("dsl_resolve: unknown keys get did-you-mean suggestions") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"num_layer": 4}})")));
  const Violation* v = find_violation(r, "model.num_layer");
  REQUIRE(v);
  CHECK(v->message == "unknown key model.num_layer; did you mean model.num_layers?");

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"tp": 2}})")));
  REQUIRE(find_violation(r, "trainer.tp"));
  CHECK(find_violation(r, "trainer.tp")->message.find("parallelism.tp") != std::string::npos);

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"optimzer": {"lr": 0.1}})")));
  REQUIRE(find_violation(r, "optimzer"));
  CHECK(find_violation(r, "optimzer")->message.find("did you mean optimizer?") != std::string::npos);

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"zzzz_qqq": 1}})")));
  REQUIRE(find_violation(r, "model.zzzz_qqq"));
  CHECK(find_violation(r, "model.zzzz_qqq")->message == "unknown key model.zzzz_qqq");
}

TEST_CASE("dsl_resolve: NeMo and Hugging Face names of our settings are answered with our keys") {
  // Spelling distance never finds these (tensor_model_parallel_size is 24 edits from tp).
  const std::pair<const char*, const char*> cases[] = {
      {R"({"parallelism": {"tensor_model_parallel_size": 2}})", "parallelism.tp"},
      {R"({"parallelism": {"tensor_parallel_degree": 2}})", "parallelism.tp"},
      {R"({"optimizer": {"learning_rate": 0.001}})", "optimizer.lr"},
      {R"({"trainer": {"num_train_epochs": 3}})", "trainer.max_steps"},
      {R"({"trainer": {"per_device_train_batch_size": 4}})", "trainer.micro_batch_size"},
      {R"({"peft": {"lora_alpha": 32}})", "peft.alpha"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.first);
    const auto r = resolve_json(with(tiny_gpt(), json::parse(c.first)));
    REQUIRE(r.violations.size() == 1);
    const Violation& v = r.violations[0];
    CHECK(v.message.find(std::string("; did you mean ") + c.second + "?") != std::string::npos);
    CHECK(v.fix == std::string("rename it to ") + c.second);
  }
  // At the top level too (an override `learning_rate=1e-3`).
  const auto top = resolve_json(with(tiny_gpt(), json::parse(R"({"learning_rate": 0.001})")));
  REQUIRE(find_violation(top, "learning_rate"));
  CHECK(find_violation(top, "learning_rate")->message.find("did you mean optimizer.lr?") != std::string::npos);
}

TEST_CASE("dsl_resolve: setting a derived value is a violation that says how it is computed") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"padded_vocab_size": 512},
                                                         "trainer": {"num_micro_batches": 2}})")));
  REQUIRE(find_violation(r, "model.padded_vocab_size"));
  CHECK(find_violation(r, "model.padded_vocab_size")->message.find("derived") != std::string::npos);
  CHECK(find_violation(r, "model.padded_vocab_size")->message.find("make_vocab_size_divisible_by") !=
        std::string::npos);
  REQUIRE(find_violation(r, "trainer.num_micro_batches"));
  CHECK(find_violation(r, "trainer.num_micro_batches")->message.find("micro_batch_size") != std::string::npos);
}

TEST_CASE("dsl_resolve: enum-like strings are checked with suggestions") {
  struct Case {
    const char* patch;
    const char* path;
    const char* suggestion;
  };
  const Case cases[] = {
      {R"({"model": {"norm": "rmsnrom"}})", "model.norm", "rmsnorm"},
      {R"({"model": {"arch": "lama"}})", "model.arch", "llama"},
      {R"({"model": {"activation": "swigl"}})", "model.activation", "swiglu"},
      {R"({"model": {"position_embedding": "rop"}})", "model.position_embedding", "rope"},
      {R"({"schedule": {"decay_style": "cosin"}})", "schedule.decay_style", "cosine"},
      {R"({"trainer": {"device": "cdua"}})", "trainer.device", "cuda"},
      {R"({"trainer": {"precision": "bf61"}})", "trainer.precision", "bf16"},
      {R"({"trainer": {"recompute": "ful"}})", "trainer.recompute", "full"},
      {R"({"data": {"kind": "indexd"}})", "data.kind", "indexed"},
      {R"({"data": {"tokenizer": "sentencepeice"}})", "data.tokenizer", "sentencepiece"},
      {R"({"peft": {"kind": "lroa"}})", "peft.kind", "lora"},
      {R"({"executor": {"kind": "slrum"}})", "executor.kind", "slurm"},
      {R"({"mode": "pretrian"})", "mode", "pretrain"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    const auto r = resolve_json(with(tiny_gpt(), json::parse(c.patch)));
    const Violation* v = find_violation(r, c.path);
    REQUIRE(v);
    CHECK(v->message.find(std::string("did you mean ") + c.suggestion) != std::string::npos);
  }
}

TEST_CASE("dsl_resolve: data.blend pairs and normalizes; data.path is a blend of one") {
  const ScratchFiles files;  // data/wiki and data/code exist; the plan's prefixes come back absolute
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed",
                                                         "blend": [3, "data/wiki", 1, "data/code"]}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  REQUIRE(r.plan.data.blend.size() == 2);
  CHECK(r.plan.data.blend[0].first == doctest::Approx(0.75));
  CHECK(r.plan.data.blend[0].second == files.abs("data/wiki"));
  CHECK(r.plan.data.blend[1].first == doctest::Approx(0.25));

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed", "path": "data/wiki"}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  REQUIRE(r.plan.data.blend.size() == 1);
  CHECK(r.plan.data.blend[0] == std::pair<double, std::string>(1.0, files.abs("data/wiki")));

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed", "blend": [0.5, "a", 0.5]}})")));
  REQUIRE(find_violation(r, "data.blend"));
  CHECK(find_violation(r, "data.blend")->message.find("odd") != std::string::npos);
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed", "blend": ["a", 0.5]}})")));
  REQUIRE(find_violation(r, "data.blend"));
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed", "blend": [-1, "a", 2, "b"]}})")));
  REQUIRE(find_violation(r, "data.blend"));
  CHECK(find_violation(r, "data.blend")->message.find("-1") != std::string::npos);
  r = resolve_json(
      with(tiny_gpt(), json::parse(R"({"data": {"kind": "indexed", "path": "x", "blend": [1, "a", 1, "b"]}})")));
  REQUIRE(find_violation(r, "data.path"));
}

TEST_CASE("dsl_resolve: origins of violations come from the tree") {
  ConfigTree t = tree_of(with(tiny_gpt(), json::parse(R"({"parallelism": {"tp": 3}, "executor": {"cpu_ranks": 3}})")));
  t.origins["parallelism.tp"] = Origin{"exp/wiki.lua", 12};
  const auto r = resolve(t, {});
  const Violation* v = find_violation(r, "parallelism.tp");
  REQUIRE(v);
  CHECK(v->origin.file == "exp/wiki.lua");
  CHECK(v->origin.line == 12);
  const std::string text = format_violations(r.violations);
  CHECK(text.find("parallelism.tp") != std::string::npos);
  CHECK(text.find("fix: ") != std::string::npos);
}

TEST_CASE("dsl_resolve: the field table covers every recipe key once") {
  const auto& fields = plan_fields();
  std::set<std::string> paths;
  for (const auto& f : fields) {
    CHECK_MESSAGE(paths.insert(f.path()).second, f.path());
    CHECK_MESSAGE(!f.doc.empty(), f.path());
  }
  CHECK(find_field("parallelism.layers_per_stage") != nullptr);
  CHECK(find_field("model.padded_vocab_size") == nullptr);  // derived
  CHECK(find_field("model.head_dim") != nullptr);           // a key since Qwen3 (0 = derived)
  CHECK(find_field("mode") != nullptr);
  // Each default round-trips through get/set.
  recipe::plan::Plan p;
  for (const auto& f : fields) CHECK_FALSE(f.set(p, f.get(recipe::plan::Plan{})).has_value());
}

TEST_SUITE_END();
