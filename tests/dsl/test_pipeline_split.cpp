// parallelism.pipeline_split: an even split, or one balanced by compute with the output head counted
// on the last stage (plan/pipeline_split.hpp). The balancing itself, the head's cost against a
// layer's, what the resolver derives and accepts, and what it rejects with a fix.
#include <algorithm>
#include <numeric>

#include "helpers.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/pipeline_split.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
using recipe::plan::balanced_stage_layers;
using recipe::plan::even_stage_layers;
using recipe::plan::heaviest_stage_load;

namespace {

// tiny_gpt (d 64, seq 32) with `layers` layers and a 4096-token vocabulary (its head costs several
// layers) on `pp` CPU ranks.
json stages(int layers, int pp, const std::string& split, int vpp = 1) {
  return with(tiny_gpt(), json::parse(R"({"model": {"num_layers": )" + std::to_string(layers) +
                                      R"(, "vocab_size": 4096}, "executor": {"cpu_ranks": )" + std::to_string(pp) +
                                      R"(}, "parallelism": {"pp": )" + std::to_string(pp) + R"(, "virtual_pp": )" +
                                      std::to_string(vpp) + R"(, "pipeline_split": ")" + split +
                                      R"("}, "trainer": {"global_batch_size": 8}})"));
}

}  // namespace

TEST_CASE("pipeline_split: balancing moves layers off the stage that holds the head") {
  // The ~1B Llama of issue 20 (16 layers, head 1.28 layers): PP4 5+4+4+3, the heaviest stage at 5
  // layers instead of 5.28; with two virtual stages the first chunk takes the extra layer and the
  // last chunk gives one; with one layer per chunk nothing can move.
  CHECK(balanced_stage_layers(16, 4, 1, 1.28) == std::vector<int>{5, 4, 4, 3});
  CHECK(balanced_stage_layers(16, 4, 2, 1.28) == std::vector<int>{3, 2, 2, 2, 2, 2, 2, 1});
  CHECK(balanced_stage_layers(16, 4, 4, 1.28) == std::vector<int>(16, 1));
  // A head of several layers empties the last stage down to one layer.
  CHECK(balanced_stage_layers(6, 2, 1, 4.5) == std::vector<int>{5, 1});
  // No head cost: the even split (the remainder on the first chunks).
  CHECK(balanced_stage_layers(10, 4, 1, 0.0) == even_stage_layers(10, 4));
  CHECK(even_stage_layers(10, 4) == std::vector<int>{3, 3, 2, 2});
  // Whatever the shape: every chunk keeps a layer, the layers add up, and the heaviest stage is
  // never heavier than the even split's.
  for (int layers : {4, 7, 16, 32, 80})
    for (int pp : {2, 3, 4, 8})
      for (int vpp : {1, 2})
        for (double head : {0.0, 0.4, 1.28, 3.0}) {
          if (pp * vpp > layers) continue;
          const auto counts = balanced_stage_layers(layers, pp, vpp, head);
          INFO(layers << " layers, pp " << pp << ", vpp " << vpp << ", head " << head);
          REQUIRE(static_cast<int>(counts.size()) == pp * vpp);
          CHECK(std::accumulate(counts.begin(), counts.end(), 0) == layers);
          CHECK(*std::min_element(counts.begin(), counts.end()) >= 1);
          CHECK(heaviest_stage_load(counts, pp, head) <=
                heaviest_stage_load(even_stage_layers(layers, pp * vpp), pp, head) + 1e-12);
        }
}

TEST_CASE("pipeline_split: the head's cost is its GEMM's FLOPs against one layer's") {
  auto r = resolve_json(stages(4, 2, "balanced"));
  INFO(report(r));
  REQUIRE(r.ok());
  // A GPT layer of width d holds 12·d² + 13·d parameters (qkv, proj, fc1, fc2 with biases, two
  // LayerNorms); it costs 6 FLOPs per parameter per token plus 12·d·seq for attention. The head is
  // a d × vocab GEMM: 6·d·vocab.
  const double d = 64, seq = 32, vocab = 4096;
  const double layer = 6 * (12 * d * d + 13 * d) + 12 * d * seq, head = 6 * d * vocab;
  CHECK(recipe::plan::head_cost_in_layers(r.plan.model) == doctest::Approx(head / layer));
  // 4.85 layers of head: the last stage keeps one layer.
  CHECK(r.plan.parallelism.stage_num_layers == std::vector<int>{3, 1});
  auto even = resolve_json(stages(4, 2, "even"));
  REQUIRE(even.ok());
  CHECK(even.plan.parallelism.stage_num_layers == std::vector<int>{2, 2});
  // The memory estimate follows the split: stage 0 now holds three layers' weights.
  CHECK(recipe::plan::estimate_stage_memory(r.plan, 0).weights >
        recipe::plan::estimate_stage_memory(even.plan, 0).weights);
}

TEST_CASE("pipeline_split: balanced splits counts that do not divide; explicit layers_per_stage wins") {
  // 5 layers over pp·virtual_pp = 4 chunks: even cannot, balanced can.
  auto even = resolve_json(stages(5, 2, "even", 2));
  REQUIRE_FALSE(even.ok());
  const Violation* v = find_violation(even, "parallelism.virtual_pp");
  REQUIRE(v != nullptr);
  CHECK(v->fix.find("pipeline_split=\"balanced\"") != std::string::npos);
  auto balanced = resolve_json(stages(5, 2, "balanced", 2));
  INFO(report(balanced));
  REQUIRE(balanced.ok());
  const auto& counts = balanced.plan.parallelism.stage_num_layers;
  REQUIRE(counts.size() == 4);
  CHECK(std::accumulate(counts.begin(), counts.end(), 0) == 5);
  // 3 layers over pp 3 would be fine; over pp·virtual_pp = 4 chunks a chunk would be empty.
  auto too_many = resolve_json(stages(3, 2, "balanced", 2));
  REQUIRE_FALSE(too_many.ok());
  v = find_violation(too_many, "parallelism.virtual_pp");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("exceeds model.num_layers=3") != std::string::npos);
  // An explicit split is taken as given.
  auto explicit_split = resolve_json(with(stages(4, 2, "balanced"), json::parse(R"({"parallelism":
      {"layers_per_stage": [2, 2]}})")));
  REQUIRE(explicit_split.ok());
  CHECK(explicit_split.plan.parallelism.stage_num_layers == std::vector<int>{2, 2});
  // An unknown split names the choices.
  auto bad = resolve_json(stages(4, 2, "flops"));
  REQUIRE_FALSE(bad.ok());
  CHECK(find_violation(bad, "parallelism.pipeline_split") != nullptr);
}

TEST_SUITE_END();
