// parallelism.virtual_pp (interleaved 1F1B): the resolver splits the layers into pp·virtual_pp
// model chunks, derives the pipeline bubble, counts the activation slots of the interleaved order
// in the memory estimate, and rejects what the schedule cannot run (no pipeline, micro-batches not
// in groups of pp, layers that do not split) with the key, the values and a fix.
#include "helpers.hpp"

#include "plan/memory_estimate.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

namespace {

// tiny_gpt (4 layers) on two CPU ranks as two pipeline stages, micro-batch 2, `global` samples.
json two_stages(int vpp, int global) {
  return with(tiny_gpt(), json::parse(R"({"executor": {"cpu_ranks": 2}, "parallelism": {"pp": 2, "virtual_pp": )" +
                                      std::to_string(vpp) + R"(}, "trainer": {"global_batch_size": )" +
                                      std::to_string(global) + "}}"));
}

}  // namespace

TEST_CASE("virtual_pp: the layers split into pp·virtual_pp chunks and the bubble is derived") {
  auto r = resolve_json(two_stages(2, 8));  // 4 micro-batches
  INFO(report(r));
  REQUIRE(r.ok());
  CHECK(r.plan.parallelism.stage_num_layers == std::vector<int>{1, 1, 1, 1});
  CHECK(r.plan.parallelism.pipeline_bubble == doctest::Approx(1.0 / (2 * 4)));
  // Without virtual stages: two chunks, the bubble (pp-1)/m.
  auto plain = resolve_json(two_stages(1, 8));
  REQUIRE(plain.ok());
  CHECK(plain.plan.parallelism.stage_num_layers == std::vector<int>{2, 2});
  CHECK(plain.plan.parallelism.pipeline_bubble == doctest::Approx(1.0 / 4));
  // No pipeline, no bubble.
  auto one = resolve_json(tiny_gpt());
  REQUIRE(one.ok());
  CHECK(one.plan.parallelism.pipeline_bubble == 0.0);
  // An explicit split names every chunk, in model order.
  auto split = resolve_json(with(two_stages(2, 8), json::parse(R"({"model": {"num_layers": 5},
      "parallelism": {"layers_per_stage": [2, 1, 1, 1]}})")));
  INFO(report(split));
  REQUIRE(split.ok());
  CHECK(split.plan.parallelism.stage_num_layers == std::vector<int>{2, 1, 1, 1});
}

TEST_CASE("virtual_pp: the memory estimate counts the interleaved order's activation slots") {
  auto plain = resolve_json(two_stages(1, 8));
  auto vpp = resolve_json(two_stages(2, 8));
  REQUIRE(plain.ok());
  REQUIRE(vpp.ok());
  // Stage 0 keeps 2 micro-batches of 2 layers under 1F1B (4 layer sets), 4 + 2 of one layer under
  // the interleaved order (plan/pipeline_order.hpp): more activations, the same weights.
  const auto a = recipe::plan::estimate_stage_memory(plain.plan, 0),
             b = recipe::plan::estimate_stage_memory(vpp.plan, 0);
  CHECK(b.weights == a.weights);
  CHECK(b.activations > a.activations);
  CHECK(vpp.plan.memory.total >= b.total);
}

TEST_CASE("virtual_pp: what the interleaved schedule cannot run is rejected with the key, values and fix") {
  {  // no pipeline to interleave
    auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"virtual_pp": 2}})")));
    const Violation* v = find_violation(r, "parallelism.virtual_pp");
    REQUIRE(v != nullptr);
    CHECK(v->message.find("parallelism.pp=1") != std::string::npos);
    CHECK(v->fix.find("pp ≥ 2") != std::string::npos);
  }
  {  // 3 micro-batches are not groups of pp = 2
    auto r = resolve_json(two_stages(2, 6));
    const Violation* v = find_violation(r, "parallelism.virtual_pp");
    REQUIRE(v != nullptr);
    CHECK(v->message.find("= 3 divisible by parallelism.pp=2") != std::string::npos);
    CHECK(v->fix.find("trainer.global_batch_size=4 or 8") != std::string::npos);
    CHECK(resolve_json(two_stages(1, 6)).ok());  // plain 1F1B runs any count
  }
  {  // 4 layers do not split into 2·3 chunks
    auto r = resolve_json(two_stages(3, 8));
    const Violation* v = find_violation(r, "parallelism.virtual_pp");
    REQUIRE(v != nullptr);
    CHECK(v->message.find("pp·virtual_pp=2·3=6 does not divide model.num_layers=4") != std::string::npos);
    CHECK(v->fix.find("virtual_pp=2") != std::string::npos);
    // 6 chunks cannot each get one of 4 layers: no balanced or explicit split is offered.
    CHECK(v->fix.find("layers_per_stage") == std::string::npos);
    CHECK(v->fix.find("more model chunks than layers") != std::string::npos);
  }
  {  // an explicit split with one entry per stage, not per chunk
    auto r = resolve_json(with(two_stages(2, 8), json::parse(R"({"parallelism": {"layers_per_stage": [2, 2]}})")));
    const Violation* v = find_violation(r, "parallelism.layers_per_stage");
    REQUIRE(v != nullptr);
    CHECK(v->message.find("pp·virtual_pp=2·2=4") != std::string::npos);
    CHECK(v->fix.find("per virtual pipeline stage") != std::string::npos);
  }
  CHECK(find_violation(resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"virtual_pp": 0}})"))),
                       "parallelism.virtual_pp") != nullptr);
}

TEST_SUITE_END();
