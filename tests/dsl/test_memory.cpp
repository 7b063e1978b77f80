// Per-rank memory estimate, device memory lookup and the fits-the-device check.
#include "plan/gpu_catalog.hpp"
#include "plan/memory_estimate.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
using recipe::plan::find_gpu;
using recipe::plan::parse_memory_gib;

TEST_CASE("dsl_resolve: 70B on one 80GB GPU at tp1 pp1 does not fit, with remedies") {
  auto t = llama3(80, 8192, 64, 8, 28672);
  t["executor"] = json::parse(R"({"nodes": 1, "gpus_per_node": 1})");
  const auto r = resolve_json(t, gpu_facts(1, 1, true, 79.6, "NVIDIA H100 80GB HBM3"));
  const Violation* v = find_violation(r, "memory");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("exceeds") != std::string::npos);
  CHECK(v->message.find("weights") != std::string::npos);
  CHECK(v->message.find("optimizer") != std::string::npos);
  CHECK(v->message.find("NVIDIA H100 80GB HBM3") != std::string::npos);
  CHECK(v->fix.find("trainer.recompute=\"full\"") != std::string::npos);
  CHECK(v->fix.find("GPUs") != std::string::npos);
  // 70.55B params × (6 + 4 + 8) bytes of model state alone.
  CHECK(r.plan.memory.weights == 70553706496LL * 6);
  CHECK(r.plan.memory.optimizer == 70553706496LL * 8);
  CHECK(r.plan.memory.total > r.plan.memory.weights + r.plan.memory.gradients + r.plan.memory.optimizer);
}

TEST_CASE("dsl_resolve: the 70B preset layout fits an H100 per rank") {
  const auto r = resolve_json(llama3_70b(), gpu_facts(4, 8, false, 0, ""));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.memory.total > 0);
  CHECK(r.plan.memory.total < static_cast<int64_t>(79.6 * 1024 * 1024 * 1024));
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(79.6));
}

TEST_CASE("dsl_resolve: sequence parallelism shrinks the activation estimate and is offered as a remedy") {
  const auto tp = resolve_json(llama3_70b(), gpu_facts(4, 8, false, 0, ""));
  REQUIRE_MESSAGE(tp.ok(), report(tp));
  REQUIRE(tp.plan.parallelism.tp > 1);
  const auto sp = resolve_json(with(llama3_70b(), json::parse(R"({"parallelism": {"sequence_parallel": true}})")),
                               gpu_facts(4, 8, false, 0, ""));
  REQUIRE_MESSAGE(sp.ok(), report(sp));
  CHECK(sp.plan.memory.activations < tp.plan.memory.activations);
  CHECK(sp.plan.memory.weights == tp.plan.memory.weights);  // no parameter moves
  // A device too small for it: the fixes include sequence parallelism, with its estimate.
  const auto small = resolve_json(with(llama3_70b(), json::parse(R"({"executor": {"device_memory": "30GiB"}})")),
                                  gpu_facts(4, 8, false, 0, ""));
  const Violation* v = find_violation(small, "memory");
  REQUIRE_MESSAGE(v, report(small));
  CHECK_MESSAGE(v->fix.find("parallelism.sequence_parallel=true: ") != std::string::npos, v->fix);
}

TEST_CASE("dsl_resolve: llama3_70b_lora fits one node of 8 H100s; the frozen base is 1/8 of 70B in bf16") {
  ConfigTree tree = load_recipe("llama3_70b_lora");
  tree.root["checkpoint"]["allow_random_init"] = true;  // the estimate, not the base, is the subject
  ExecutorFacts facts = gpu_facts(1, 8, false, 0, "");
  facts.planning = true;  // recipe validate --nodes 1 --gpus-per-node 8 on a machine without GPUs
  const auto r = resolve(tree, facts);
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.parallelism.tp == 8);
  CHECK(r.plan.parallelism.pp == 1);
  CHECK(r.plan.parallelism.world_size == 8);
  const recipe::plan::MemoryEstimate& e = r.plan.memory;
  // The bf16 base split 8 ways (70.55B × 2 B / 8 = 17.6 GB) plus the adapters' f32 master and
  // bf16 copy; gradients and Adam state are the adapters' alone (a few hundred MB at rank 16).
  CHECK(e.weights > 17'000'000'000LL);
  CHECK(e.weights < 18'500'000'000LL);
  CHECK(e.gradients < 300'000'000LL);
  CHECK(e.optimizer == 2 * e.gradients);
  CHECK(e.total < static_cast<int64_t>(79.6 * 1024 * 1024 * 1024));
  // Adapter dropout adds one shared [seq, hidden] bf16 scratch for the dropped input.
  ConfigTree dropped = tree;
  dropped.root["peft"]["dropout"] = 0.05;
  const auto d = resolve(dropped, facts);
  REQUIRE_MESSAGE(d.ok(), report(d));
  CHECK(d.plan.memory.activations - e.activations == int64_t(8192) * 8192 * 2);
}

TEST_CASE("dsl_resolve: device memory from the recipe, the GPU model or the detected GPU") {
  auto t = with(gpt3_345m(), json::parse(R"({"executor": {"gpus_per_node": 1}})"));
  auto r = resolve_json(with(t, json::parse(R"({"executor": {"device_memory": "24GiB"}})")), gpu_facts(1, 1, true));
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(24.0));
  r = resolve_json(with(t, json::parse(R"({"executor": {"gpu_model": "A100-40GB"}})")), gpu_facts(1, 1, true));
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(40.0));
  r = resolve_json(with(t, json::parse(R"({"executor": {"gpu_model": "H300"}})")), gpu_facts(1, 1, true));
  REQUIRE(find_violation(r, "executor.gpu_model"));
  CHECK(find_violation(r, "executor.gpu_model")->message.find("did you mean") != std::string::npos);
  r = resolve_json(t, gpu_facts(1, 1, true, 0, "NVIDIA L40S"));
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(45.0));

  // A tiny device makes even the 345M model fail, and the message shows the breakdown.
  r = resolve_json(with(t, json::parse(R"({"executor": {"device_memory": "2GiB"}})")), gpu_facts(1, 1, true));
  REQUIRE(find_violation(r, "memory"));
  CHECK(find_violation(r, "memory")->message.find("2.0 GiB") != std::string::npos);
}

TEST_CASE("dsl_resolve: the estimate responds to zero1, recompute, micro batch and tp") {
  auto base = with(llama3_8b(), json::parse(R"({"trainer": {"global_batch_size": 64},
      "executor": {"gpus_per_node": 8}})"));
  auto total = [&](const char* patch) {
    const auto r = resolve_json(with(base, json::parse(patch)), gpu_facts(1, 8));
    return r.plan.memory;
  };
  const recipe::plan::MemoryEstimate plain = total("{}");
  const recipe::plan::MemoryEstimate zero1 = total(R"({"parallelism": {"zero1": true}})");
  const recipe::plan::MemoryEstimate recompute = total(R"({"trainer": {"recompute": "full"}})");
  const recipe::plan::MemoryEstimate tp2 = total(R"({"parallelism": {"tp": 2}})");
  const recipe::plan::MemoryEstimate micro2 = total(R"({"trainer": {"micro_batch_size": 2}})");
  CHECK(zero1.optimizer * 8 == doctest::Approx(plain.optimizer).epsilon(0.001));
  CHECK(recompute.activations < plain.activations / 4);
  CHECK(tp2.weights < plain.weights * 0.6);
  CHECK(micro2.activations == doctest::Approx(2.0 * plain.activations).epsilon(0.001));
  CHECK(plain.total == plain.weights + plain.gradients + plain.optimizer + plain.activations + plain.workspace);
}

TEST_CASE("dsl_resolve: CPU runs are not memory checked") {
  auto r = resolve_json(with(llama3(80, 8192, 64, 8, 28672), json::parse(R"({"trainer": {"device": "cpu"}})")));
  CHECK_FALSE(find_violation(r, "memory"));
  CHECK(r.plan.memory.total > 0);
}

TEST_CASE("dsl_resolve: GPU catalog and memory sizes") {
  CHECK(find_gpu("NVIDIA H100 80GB HBM3")->name == "H100-80GB");
  CHECK(find_gpu("h100")->name == "H100-80GB");
  CHECK(find_gpu("NVIDIA H200")->name == "H200");
  CHECK(find_gpu("NVIDIA GH200 480GB")->name == "GH200");
  CHECK(find_gpu("NVIDIA A100-SXM4-80GB")->name == "A100-80GB");
  CHECK(find_gpu("NVIDIA A100-SXM4-40GB")->name == "A100-40GB");
  CHECK(find_gpu("NVIDIA L40S")->name == "L40S");
  CHECK(find_gpu("NVIDIA L4")->name == "L4");
  CHECK(find_gpu("NVIDIA A10G")->name == "A10G");
  CHECK(find_gpu("H100 NVL")->name == "H100-NVL");
  CHECK_FALSE(find_gpu("Quadro K600").has_value());
  CHECK_FALSE(find_gpu("").has_value());
  CHECK(*parse_memory_gib("80GiB") == doctest::Approx(80));
  CHECK(*parse_memory_gib("80 GiB") == doctest::Approx(80));
  CHECK(*parse_memory_gib("81920MiB") == doctest::Approx(80));
  CHECK(*parse_memory_gib("80GB") == doctest::Approx(74.506).epsilon(0.001));
  CHECK(*parse_memory_gib("1.5T") == doctest::Approx(1536));
  CHECK_FALSE(parse_memory_gib("lots").has_value());
  CHECK_FALSE(parse_memory_gib("-4GiB").has_value());
  CHECK_FALSE(parse_memory_gib("80 parsecs").has_value());
}

TEST_CASE("dsl_resolve: CUDA workspace and classifier chunks follow the micro-batch") {
  auto t = with(gpt3_345m(), json::parse(R"({"executor": {"gpus_per_node": 1}})"));
  auto plan_at = [&](int mb) {
    const std::string patch = R"({"trainer": {"micro_batch_size": )" + std::to_string(mb) +
                              R"(, "global_batch_size": )" + std::to_string(mb) + "}}";
    const auto r = resolve_json(with(t, json::parse(patch)), gpu_facts(1, 1, true));
    REQUIRE_MESSAGE(r.ok(), report(r));
    return r.plan;
  };
  constexpr int64_t MiB = int64_t(1024) * 1024;
  // Room for f32 q/k/v gradient accumulators of one micro-batch (N × 3072 × 4 B) + 16 MiB, ≥ 64 MiB.
  CHECK(cuda_workspace_bytes(plan_at(4)) == 64 * MiB);
  CHECK(cuda_workspace_bytes(plan_at(8)) == 112 * MiB);
  CHECK(cuda_workspace_bytes(plan_at(16)) == 208 * MiB);
  // The workspace is part of the estimate (+ 32 MiB of cuBLASLt workspace + the per-token losses).
  CHECK(estimate_memory(plan_at(8)).workspace == 112 * MiB + 32 * MiB + int64_t(8) * 1024 * 4);

  // Classifier chunks: as few as fit max(room, 256 MiB) of bf16 logits, equal sizes.
  const int64_t Vp = 50304;
  CHECK(recipe::plan::classifier_chunk_rows(4096, Vp, 2, 64 * MiB) == 2048);      // 2 chunks, not 7 of 64 MiB
  CHECK(recipe::plan::classifier_chunk_rows(8192, Vp, 2, 128 * MiB) == 2048);     // 4 chunks
  CHECK(recipe::plan::classifier_chunk_rows(16384, Vp, 2, 256 * MiB) == 2341);    // 7 chunks (the last 2338 rows)
  CHECK(recipe::plan::classifier_chunk_rows(16384, Vp, 2, 1024 * MiB) == 8192);   // 1571 MiB of logits: 2 halves
  CHECK(recipe::plan::classifier_chunk_rows(16384, Vp, 2, 2048 * MiB) == 16384);  // one chunk when it fits
  CHECK(recipe::plan::classifier_chunk_rows(100, 64, 4, 0) == 100);
  CHECK(recipe::plan::classifier_chunk_rows(5, int64_t(1) << 40, 4, 0) == 1);  // a row larger than the budget
}

TEST_SUITE_END();
