// Value bounds the resolver enforces (issue 18 C): LoRA rank against the adapted linears, a data
// split that leaves training nothing, negative gradient buckets, GPU models matched by whole words.
#include "helpers.hpp"

#include "plan/gpu_catalog.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
using recipe::plan::find_gpu;
using recipe::plan::gpu_catalog;

TEST_CASE("value bounds: peft.rank may not exceed min(in, out) of a linear it adapts") {
  // tiny_gpt: hidden 64, ffn derived 256.
  auto lora = [](int rank, const char* targets) {
    return with(tiny_gpt(), json::parse(std::string(R"({"mode": "finetune", "peft": {"kind": "lora", "rank": )") +
                                        std::to_string(rank) + R"(, "target_modules": )" + targets + "}}"));
  };
  auto r = resolve_json(lora(65, R"(["qkv"])"));
  const Violation* v = find_violation(r, "peft.rank");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("peft.rank=65") != std::string::npos);
  CHECK(v->message.find("model.hidden_size=64") != std::string::npos);
  CHECK(v->fix.find("peft.rank ≤ 64") != std::string::npos);
  CHECK(find_violation(resolve_json(lora(64, R"(["qkv"])")), "peft.rank") == nullptr);
  CHECK(find_violation(resolve_json(lora(65, R"(["fc2"])")), "peft.rank") != nullptr);

  // An MLP narrower than the hidden size bounds the MLP linears by ffn_hidden_size.
  auto narrow = with(lora(40, R"(["fc1"])"), json::parse(R"({"model": {"ffn_hidden_size": 32}})"));
  v = find_violation(resolve_json(narrow), "peft.rank");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("= 32 (MLP linears)") != std::string::npos);
  CHECK(find_violation(resolve_json(with(lora(40, R"(["qkv"])"), json::parse(R"({"model": {"ffn_hidden_size": 32}})"))),
                       "peft.rank") == nullptr);
}

TEST_CASE("value bounds: a data split that gives training nothing is rejected before the run") {
  auto indexed = [](const char* split) {
    return with(tiny_gpt(), json::parse(std::string(R"({"data": {"kind": "indexed", "path": "/data/x", "split": ")") +
                                        split + "\"}}"));
  };
  auto r = resolve_json(indexed("0,0,100"));
  const Violation* v = find_violation(r, "data.split");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("gives the train split no documents") != std::string::npos);
  CHECK(find_violation(resolve_json(indexed("98,2,0")), "data.split") == nullptr);
  // Mock data has no split.
  CHECK(find_violation(resolve_json(with(tiny_gpt(), json::parse(R"({"data": {"split": "0,0,100"}})"))),
                       "data.split") == nullptr);
}

TEST_CASE("value bounds: a negative gradient bucket is rejected") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"grad_bucket_mb": -1}})")));
  CHECK(find_violation(r, "parallelism.grad_bucket_mb") != nullptr);
}

TEST_CASE("value bounds: GPU models match whole words, not substrings") {
  CHECK_FALSE(find_gpu("H1000-900GB").has_value());
  CHECK_FALSE(find_gpu("XH100").has_value());
  CHECK_FALSE(find_gpu("A1000").has_value());
  CHECK(find_gpu("H100-80GB")->name == "H100-80GB");
  CHECK(find_gpu("H100-PCIe")->name == "H100-PCIe");
  CHECK(find_gpu("NVIDIA H100 PCIe")->name == "H100-PCIe");
  CHECK(find_gpu("NVIDIA H20")->name == "H20");
  CHECK(find_gpu("NVIDIA L40")->name == "L40");
  CHECK(find_gpu("NVIDIA A10")->name == "A10");
  CHECK(find_gpu("Tesla V100-SXM2-32GB")->name == "V100-32GB");
  CHECK(find_gpu("Tesla V100-SXM2-16GB")->name == "V100-16GB");
  CHECK(find_gpu("NVIDIA RTX 6000 Ada Generation")->name == "RTX-6000-Ada");
  CHECK(find_gpu("RTX-6000-Ada")->name == "RTX-6000-Ada");
  CHECK(find_gpu("NVIDIA RTX A6000")->name == "RTX-A6000");
  CHECK(find_gpu("NVIDIA GeForce RTX 4090")->name == "RTX-4090");
  for (const auto& spec : gpu_catalog()) {
    CAPTURE(spec.name);
    CHECK(find_gpu(spec.name)->name == spec.name);  // every canonical name finds itself
  }
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cuda"},
      "executor": {"gpus_per_node": 1, "gpu_model": "H1000-900GB"}})")),
                        [] {
                          ExecutorFacts f;
                          f.planning = true;
                          return f;
                        }());
  CHECK(find_violation(r, "executor.gpu_model") != nullptr);
}

TEST_SUITE_END();
