// Derived values and the published parameter counts.
#include "plan/model_size.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

TEST_CASE("dsl_resolve: derived model and batch values") {
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({
      "trainer": {"micro_batch_size": 2, "global_batch_size": 16},
      "executor": {"cpu_ranks": 4}, "parallelism": {"tp": 2}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  const recipe::plan::Plan& p = r.plan;
  CHECK(p.model.head_dim == 16);
  CHECK(p.model.num_kv_heads == 4);
  CHECK(p.model.ffn_hidden_size == 256);
  CHECK(p.model.max_position_embeddings == 32);
  CHECK(p.model.padded_vocab_size == 256);  // multiple of 128·2
  CHECK(p.parallelism.world_size == 4);
  CHECK(p.parallelism.dp == 2);
  CHECK(p.trainer.num_micro_batches == 4);
  CHECK(p.trainer.tokens_per_step == 16 * 32);
  CHECK(p.schedule.decay_steps == 10);
  CHECK(p.trainer.device == recipe::plan::Device::cpu);
}

TEST_CASE("dsl_resolve: defaults that derive: global batch, Llama FFN, vocab padding with tp") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"executor": {"cpu_ranks": 2}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.trainer.global_batch_size == 4);  // micro 2 × dp 2
  CHECK(r.plan.trainer.num_micro_batches == 1);

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"hidden_size": 4096, "num_attention_heads": 32,
                                                              "activation": "swiglu", "vocab_size": 50257},
                                                    "parallelism": {"tp": 8}, "executor": {"cpu_ranks": 8}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.ffn_hidden_size == 11008);    // int(8·4096/3) = 10922 → 11008
  CHECK(r.plan.model.padded_vocab_size == 51200);  // multiple of 128·8 = 1024
}

TEST_CASE("dsl_resolve: parameter counts match the published figures") {
  SUBCASE("GPT 345M: 354.9M with the tied embedding padded to 50304") {
    const auto r = resolve_json(gpt3_345m());
    REQUIRE_MESSAGE(r.ok(), report(r));
    CHECK(r.plan.model.padded_vocab_size == 50304);
    CHECK(r.plan.model.num_params == 354871296);
    CHECK(static_cast<double>(r.plan.model.num_params) == doctest::Approx(354.9e6).epsilon(0.001));
    CHECK(count_params(r.plan.model, 50257) == 354823168);
    // Tied: the embedding counts once, as the head; the learned positions (1024·1024) are a lookup.
    CHECK(r.plan.model.flops_per_token == doctest::Approx(6.0 * (354871296 - 1024 * 1024) + 12.0 * 24 * 1024 * 1024));
  }
  SUBCASE("Llama-3-8B layer slice: the untied input embedding is a lookup, not a matmul") {
    // issue 16: 8 layers at seq 8192 count 16.8 GFLOP/token (PaLM/Megatron), not 20.0 with the
    // input embedding's 525M parameters counted as a matmul.
    auto j = llama3_8b();
    j["model"]["num_layers"] = 8;
    const auto r = resolve_json(j);
    REQUIRE_MESSAGE(r.ok(), report(r));
    const double layer = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;
    const double head = 128256.0 * 4096, final_norm = 4096;
    CHECK(r.plan.model.flops_per_token ==
          doctest::Approx(6.0 * (8 * layer + head + final_norm) + 12.0 * 8 * 4096 * 8192).epsilon(1e-9));
    CHECK(r.plan.model.flops_per_token == doctest::Approx(16.8e9).epsilon(0.01));
  }
  SUBCASE("Llama-3-8B: 8.03B") {
    const auto r = resolve_json(llama3_8b());
    REQUIRE_MESSAGE(r.ok(), report(r));
    CHECK(r.plan.model.head_dim == 128);
    CHECK(r.plan.model.num_params == 8030261248);
    CHECK(static_cast<double>(r.plan.model.num_params) == doctest::Approx(8.03e9).epsilon(0.001));
  }
  SUBCASE("Llama-3-70B: 70.55B") {
    const auto r = resolve_json(llama3(80, 8192, 64, 8, 28672));
    REQUIRE_MESSAGE(r.ok(), report(r));
    CHECK(r.plan.model.num_params == 70553706496);
    CHECK(static_cast<double>(r.plan.model.num_params) == doctest::Approx(70.55e9).epsilon(0.001));
    CHECK(r.plan.model.num_non_embedding_params == 70553706496 - 2LL * 128256 * 8192);
  }
}

TEST_CASE("dsl_resolve: LoRA trainable parameters") {
  auto t = with(llama3_8b(), json::parse(R"({"mode": "finetune", "checkpoint": {"allow_random_init": true},
      "peft": {"kind": "lora", "rank": 16, "alpha": 32.0, "target_modules": ["qkv", "proj"]}})"));
  const auto r = resolve_json(t);
  REQUIRE_MESSAGE(r.ok(), report(r));
  // qkv: 4096 → 4096 + 2·1024; proj: 4096 → 4096; 32 layers.
  const int64_t expected = 32LL * 16 * ((4096 + 6144) + (4096 + 4096));
  CHECK(lora_trainable_params(r.plan) == expected);
  CHECK(r.plan.model.num_params == 8030261248);  // the base model
  // MFU counts what runs: the frozen base forward and input-gradient only (4 per parameter), the
  // adapters with weight gradients (6), attention as in pretraining.
  CHECK(r.plan.model.flops_per_token ==
        doctest::Approx(4.0 * double(matmul_params(r.plan.model)) + 6.0 * double(expected) + 12.0 * 32 * 4096 * 8192));
  // Against pretraining's count: 2 fewer per base parameter, 6 more per adapter parameter.
  CHECK(training_flops_per_token(r.plan.model) - r.plan.model.flops_per_token ==
        doctest::Approx(2.0 * double(matmul_params(r.plan.model)) - 6.0 * double(expected)));
  CHECK(to_toml(r.plan).find("trainable_params = " + std::to_string(expected)) != std::string::npos);
}

TEST_CASE("dsl_resolve: executor facts override the recipe and pick the device") {
  // Facts win over the recipe's executor keys.
  auto r = resolve_json(llama3_70b(), gpu_facts(8, 8));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.executor.nodes == 8);
  CHECK(r.plan.parallelism.world_size == 64);
  CHECK(r.plan.parallelism.dp == 2);
  CHECK(r.plan.trainer.device == recipe::plan::Device::cuda);
  CHECK(r.plan.trainer.num_micro_batches == 256);

  // A local GPU box with gpus_per_node 0 = all visible GPUs.
  ExecutorFacts local;
  local.has_gpu = true;
  local.visible_gpus = 4;
  local.gpu_name = "NVIDIA H100 80GB HBM3";
  local.gpu_memory_gib = 79.6;
  r = resolve_json(tiny_gpt(), local);
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.trainer.device == recipe::plan::Device::cuda);
  CHECK(r.plan.executor.gpus_per_node == 4);
  CHECK(r.plan.parallelism.world_size == 4);
  CHECK(r.plan.parallelism.dp == 4);
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(79.6));

  // facts.gpus_per_node = 0 means CPU ranks even with a GPU present.
  local.gpus_per_node = 0;
  r = resolve_json(tiny_gpt(), local);
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.trainer.device == recipe::plan::Device::cpu);
  CHECK(r.plan.parallelism.world_size == 1);
  CHECK(has_warning(r, "bf16 on CPU"));
}

TEST_CASE("dsl_resolve: a run shorter than warmup resolves and re-resolves from its own TOML") {
  // gpt_tiny has 10 warmup steps; `--max-steps 5` must still run (Megatron allows it), and the
  // resolved.toml that states decay_steps explicitly must resolve again.
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"schedule": {"warmup_steps": 10},
                                                               "trainer": {"max_steps": 5}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.schedule.decay_steps == 10);
  const auto again = resolve_json(plan_to_tree(r.plan));
  REQUIRE_MESSAGE(again.ok(), report(again));
  CHECK(to_toml(again.plan) == to_toml(r.plan));
}

TEST_SUITE_END();
