// model.arch selects a family (family/registry.hpp): the architecture flags a recipe leaves unset
// take the family's defaults, and a flag set to a value the family does not compute is refused
// with its key and a fix.
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
namespace plan = recipe::plan;

TEST_CASE("dsl_family: model.arch derives the flags a recipe leaves unset") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "llama", "num_kv_heads": 2}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.norm == plan::Norm::rmsnorm);
  CHECK(r.plan.model.activation == plan::Activation::swiglu);
  CHECK(r.plan.model.position_embedding == plan::PositionEmbedding::rope);
  CHECK_FALSE(r.plan.model.bias);
  CHECK_FALSE(r.plan.model.tie_embeddings);
  CHECK(r.plan.model.ffn_hidden_size == 256);  // the SwiGLU rule: int(8·64/3) = 170 → 256

  r = resolve_json(tiny_gpt());
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.norm == plan::Norm::layernorm);
  CHECK(r.plan.model.activation == plan::Activation::gelu);
  CHECK(r.plan.model.position_embedding == plan::PositionEmbedding::learned);
  CHECK(r.plan.model.bias);
  CHECK(r.plan.model.tie_embeddings);
}

TEST_CASE("dsl_family: a key the recipe sets wins where the family computes it") {
  // Llama with LayerNorm, biases and a tied head: the engine computes them (HF Llama has no
  // LayerNorm, which export then refuses, naming the flag).
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "llama", "norm": "layernorm",
                                                                    "bias": true, "tie_embeddings": true}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.norm == plan::Norm::layernorm);
  CHECK(r.plan.model.bias);
  CHECK(r.plan.model.tie_embeddings);
  CHECK(r.plan.model.activation == plan::Activation::swiglu);
  // The gpt family (Megatron's GPT) computes every mix.
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"activation": "swiglu", "position_embedding": "rope",
                                                              "norm": "rmsnorm"}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.activation == plan::Activation::swiglu);
  CHECK(r.plan.model.bias);  // gpt's default
}

TEST_CASE("dsl_family: a flag the family does not compute is refused with key, values and fix") {
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "llama", "activation": "gelu",
                                                                          "position_embedding": "learned"}})")));
  CHECK_FALSE(r.ok());
  const Violation* v = find_violation(r, "model.activation");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("model.activation=\"gelu\": model.arch=\"llama\" computes model.activation=\"swiglu\" "
                        "only") != std::string::npos);
  CHECK(v->fix.find("drop model.activation") != std::string::npos);
  CHECK(v->fix.find("model.arch=\"gpt\"") != std::string::npos);
  const Violation* p = find_violation(r, "model.position_embedding");
  REQUIRE_MESSAGE(p, report(r));
  CHECK(p->message.find("model.position_embedding=\"learned\"") != std::string::npos);
}

TEST_CASE("dsl_family: qwen2 has its q/k/v biases only: model.bias=true and LayerNorm are refused") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen2", "num_kv_heads": 2}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.norm == plan::Norm::rmsnorm);
  CHECK(r.plan.model.activation == plan::Activation::swiglu);
  CHECK_FALSE(r.plan.model.bias);  // the linears beyond q/k/v; the q/k/v biases are the family's own
  CHECK_FALSE(r.plan.model.tie_embeddings);
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen2", "tie_embeddings": true}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.tie_embeddings);  // Qwen2.5 0.5B and 1.5B tie

  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen2", "bias": true, "norm": "layernorm"}})")));
  CHECK_FALSE(r.ok());
  const Violation* v = find_violation(r, "model.bias");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("model.bias=true: model.arch=\"qwen2\" computes model.bias=false only") != std::string::npos);
  CHECK(v->message.find("biases on q/k/v only") != std::string::npos);
  CHECK(v->fix.find("model.arch=\"gpt\" or \"llama\"") != std::string::npos);
  CHECK(find_violation(r, "model.norm"));
}

TEST_SUITE_END();

TEST_CASE("dsl_family: qwen3 derives qk-norm and Llama's block; head_dim is its own key") {
  // 4 heads of 24 on a width of 60: hidden need not divide by the heads once head_dim is set.
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3", "hidden_size": 60,
                                                                    "num_kv_heads": 2, "head_dim": 24}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.qk_norm);
  CHECK(r.plan.model.norm == plan::Norm::rmsnorm);
  CHECK(r.plan.model.activation == plan::Activation::swiglu);
  CHECK(r.plan.model.position_embedding == plan::PositionEmbedding::rope);
  CHECK_FALSE(r.plan.model.bias);
  CHECK_FALSE(r.plan.model.tie_embeddings);
  CHECK(r.plan.model.head_dim == 24);
  // Unset, head_dim is hidden / heads as before, and then hidden must divide.
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3"}})")));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.model.head_dim == 16);
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3", "hidden_size": 66}})")));
  REQUIRE_MESSAGE(find_violation(r, "model.hidden_size"), report(r));
  CHECK(find_violation(r, "model.hidden_size")->fix.find("or set model.head_dim") != std::string::npos);
  // An odd head_dim of its own cannot take RoPE.
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3", "head_dim": 25}})")));
  REQUIRE_MESSAGE(find_violation(r, "model.position_embedding"), report(r));
}

TEST_CASE("dsl_family: qk-norm is refused where the family does not compute it, and off where it must be on") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3", "qk_norm": false}})")));
  const Violation* v = find_violation(r, "model.qk_norm");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("model.qk_norm=false: model.arch=\"qwen3\" computes model.qk_norm=true only") !=
        std::string::npos);
  for (const char* arch : {"llama", "gpt"}) {
    CAPTURE(arch);
    r = resolve_json(with(tiny_gpt(), json{{"model", {{"arch", arch}, {"qk_norm", true}}}}));
    v = find_violation(r, "model.qk_norm");
    REQUIRE_MESSAGE(v, report(r));
    CHECK(v->fix.find("model.arch=\"qwen3\"") != std::string::npos);
  }
  // qwen3 has no biases at all (HF Qwen3's MLP has none; attention_bias would need them alone).
  r = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"arch": "qwen3", "bias": true}})")));
  REQUIRE_MESSAGE(find_violation(r, "model.bias"), report(r));
}

TEST_CASE("dsl_family: qk-norm on CUDA takes head_dim up to 256, by key") {
  ExecutorFacts gpu;
  gpu.planning = true;
  gpu.has_gpu = true;
  gpu.gpus_per_node = gpu.visible_gpus = 1;
  gpu.gpu_name = "NVIDIA H100 80GB HBM3";
  gpu.gpu_memory_gib = 79.1;
  const json base = json::parse(R"({"model": {"arch": "qwen3", "num_attention_heads": 2, "num_kv_heads": 1},
                                    "trainer": {"device": "cuda", "precision": "bf16"}})");
  auto r = resolve_json(with(with(tiny_gpt(), base), json::parse(R"({"model": {"head_dim": 264}})")), gpu);
  const Violation* v = find_violation(r, "model.head_dim");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("model.qk_norm=true on CUDA with model.head_dim=264") != std::string::npos);
  r = resolve_json(with(with(tiny_gpt(), base), json::parse(R"({"model": {"head_dim": 256}})")), gpu);
  CHECK_MESSAGE(find_violation(r, "model.head_dim") == nullptr, report(r));
}
