// The GPU catalog's desk and laptop GPUs, and unified memory (GB10, the DGX Spark): its memory check
// uses what the process can have (the host's MemAvailable on the device itself, else a documented
// share of the total), and gpt3_345m's estimate at the seed's 8 bf16 points is the engine's own.
#include "plan/gpu_catalog.hpp"
#include "plan/memory_estimate.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
using recipe::plan::find_gpu;
using recipe::plan::gpu_catalog;
using recipe::plan::kUnifiedMemoryUsableFraction;
using recipe::plan::usable_memory_gib;

TEST_CASE("gpu catalog: GB10 is unified; laptop parts are told from their desktop namesakes") {
  const auto gb10 = find_gpu("NVIDIA GB10");
  REQUIRE(gb10);
  CHECK(gb10->name == "GB10");
  CHECK(gb10->unified_memory);
  CHECK(gb10->memory_gib == doctest::Approx(119.2));
  CHECK(find_gpu("GB10")->name == "GB10");
  CHECK(find_gpu("NVIDIA B200")->name == "B200");
  CHECK(find_gpu("NVIDIA GeForce RTX 4090")->name == "RTX-4090");
  CHECK(find_gpu("NVIDIA GeForce RTX 4090 Laptop GPU")->name == "RTX-4090-Laptop");
  CHECK(find_gpu("NVIDIA GeForce RTX 5090")->name == "RTX-5090");
  CHECK(find_gpu("NVIDIA GeForce RTX 5090 Laptop GPU")->name == "RTX-5090-Laptop");
  CHECK(find_gpu("NVIDIA GeForce RTX 5080")->name == "RTX-5080");
  CHECK(find_gpu("NVIDIA GeForce RTX 4080 Laptop GPU")->name == "RTX-4080-Laptop");
  CHECK(find_gpu("NVIDIA GeForce RTX 4070")->name == "RTX-4070");
  CHECK(find_gpu("NVIDIA GeForce RTX 4070 Laptop GPU")->name == "RTX-4070-Laptop");
  CHECK(find_gpu("NVIDIA GeForce RTX 3080")->name == "RTX-3080");
  CHECK(find_gpu("RTX-3090")->name == "RTX-3090");
  for (const auto& g : gpu_catalog()) {
    CAPTURE(g.name);
    CHECK(find_gpu(g.name)->name == g.name);  // every entry is found by its own name
    CHECK(g.unified_memory == (g.name == "GB10"));
    CHECK(usable_memory_gib(g, 1.0) == doctest::Approx(g.unified_memory ? 1.0 : g.memory_gib));
  }
  CHECK(usable_memory_gib(*gb10, 0) == doctest::Approx(119.2 * kUnifiedMemoryUsableFraction));
}

namespace {

// gpt3_345m as the seed ran it: one GB10, bf16, global batch = micro batch.
ResolveResult gb10_point(int micro_batch, int seq, const ExecutorFacts& facts) {
  ConfigTree tree = load_recipe("gpt3_345m");
  apply_overrides(
      tree, {"trainer.device=cuda", "executor.gpus_per_node=1", "executor.gpu_model=GB10",
             "trainer.micro_batch_size=" + std::to_string(micro_batch), "model.seq_length=" + std::to_string(seq)});
  return resolve(tree, facts);
}

}  // namespace

TEST_CASE("unified memory: planning for a GB10 elsewhere checks 85% of its 119.2 GiB; on the device, MemAvailable") {
  ExecutorFacts elsewhere = gpu_facts(1, 1);
  elsewhere.planning = true;
  elsewhere.host_memory_gib = 500;  // this host's memory says nothing of the Spark's
  const auto r = gb10_point(4, 1024, elsewhere);
  REQUIRE_MESSAGE(r.ok(), report(r));
  CHECK(r.plan.executor.device_memory_gib == doctest::Approx(119.2 * 0.85));

  // On the Spark itself: the driver reports the whole system memory as the GPU's, and the check
  // takes what the kernel says is available instead.
  ExecutorFacts spark = gpu_facts(1, 1, true, 119.2, "NVIDIA GB10");
  spark.host_memory_gib = 20;
  const auto here = gb10_point(4, 1024, spark);
  CHECK(here.plan.executor.device_memory_gib == doctest::Approx(20.0));
  const auto big = gb10_point(16, 2048, spark);
  const Violation* v = find_violation(big, "memory");
  REQUIRE_MESSAGE(v, report(big));
  CHECK(v->message.find("unified memory") != std::string::npos);
  CHECK(v->message.find("available on this host") != std::string::npos);
  // Without executor.gpu_model, the detected GB10 is unified too.
  ConfigTree detected = load_recipe("gpt3_345m");
  apply_overrides(detected, {"trainer.device=cuda", "executor.gpus_per_node=1"});
  CHECK(resolve(detected, spark).plan.executor.device_memory_gib == doctest::Approx(20.0));
}

TEST_CASE(
    "unified memory: gpt3_345m at mb {2,4,8,16} x seq {1024,2048} bf16 on GB10 is the engine's estimate, "
    "linear in tokens per step") {
  ExecutorFacts facts = gpu_facts(1, 1);
  facts.planning = true;
  std::vector<std::pair<double, double>> points;  // tokens per step, estimated bytes
  for (int mb : {2, 4, 8, 16})
    for (int seq : {1024, 2048}) {
      const auto r = gb10_point(mb, seq, facts);
      CAPTURE(mb);
      CAPTURE(seq);
      REQUIRE_MESSAGE(r.ok(), report(r));  // every point fits the Spark's 101.3 GiB
      CHECK(r.plan.trainer.precision == recipe::plan::Precision::bf16);
      // What validate reports is the engine's estimate of exactly this plan.
      CHECK(r.plan.memory.total == recipe::plan::estimate_memory(r.plan).total);
      points.emplace_back(double(mb) * seq, double(r.plan.memory.total));
      MESSAGE("GB10 gpt3_345m mb" << mb << " seq" << seq << ": "
                                  << recipe::plan::format_bytes(double(r.plan.memory.total)));
    }
  // The estimate's activations grow with tokens per step: the same tokens (mb4·seq2048 and
  // mb8·seq1024) cost nearly the same, and doubling the tokens adds the same amount each time.
  CHECK(points[3].second == doctest::Approx(points[4].second).epsilon(0.05));
  const double per_token = (points[6].second - points[4].second) / (points[6].first - points[4].first);
  const double fixed = points[4].second - per_token * points[4].first;
  MESSAGE("GB10 gpt3_345m estimate ≈ " << per_token / 1024 << " KiB per token per step + " << fixed / (1 << 30)
                                       << " GiB");
  CHECK(per_token > 0);
  CHECK(fixed > 0);
}

TEST_SUITE_END();
