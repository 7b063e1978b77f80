// The resolver on context parallelism: cp > 1 on CPU ranks and on GPUs validates (with seq % (2·cp)
// == 0); what this version cannot run with it (packed SFT samples, LoRA adapter dropout, sequence
// parallelism; on CUDA the own attention kernels and head dims cuDNN does not take) is a violation
// naming the key, the value and the fix; the memory estimate counts seq/cp tokens of activations
// plus the ring's K/V buffers, and on CUDA the workspace the ring's blocks take.
#include "helpers.hpp"
#include "plan/memory_estimate.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

TEST_CASE("parallelism.cp=2 on CPU ranks validates, with the world counting cp") {
  const auto r =
      resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"cp": 2}, "executor": {"cpu_ranks": 4}})")));
  INFO(report(r));
  REQUIRE(r.ok());
  CHECK(r.plan.parallelism.cp == 2);
  CHECK(r.plan.parallelism.dp == 2);
  CHECK(r.plan.parallelism.world_size == 4);
}

// CP on GPUs resolves (its GPU parity test passes on H100s), the world counting cp.
TEST_CASE("parallelism.cp=2 on GPUs resolves; the world counts cp") {
  const auto r =
      resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"cp": 2}, "trainer": {"device": "cuda"}})")),
                   gpu_facts(1, 4, true, 80));
  INFO(report(r));
  REQUIRE(r.ok());
  CHECK(r.plan.parallelism.cp == 2);
  CHECK(r.plan.parallelism.dp == 2);
  CHECK(r.plan.parallelism.world_size == 4);
}

TEST_CASE("what context parallelism does not run with is rejected with key, value and fix") {
  const struct {
    const char* patch;
    const char* path;
    const char* says;
    const char* fix;
  } cases[] = {
      {R"({"parallelism": {"cp": 2}, "trainer": {"device": "cuda"}, "kernels": {"attention": "fallback"}})",
       "kernels.attention", "parallelism.cp=2 with kernels.attention=\"fallback\"", "set kernels.attention=\"cudnn\""},
      {R"({"parallelism": {"cp": 2}, "trainer": {"device": "cuda"},
           "model": {"hidden_size": 60, "num_attention_heads": 4}})",
       "model.head_dim", "model.head_dim=15", "set parallelism.cp=1"},
      {R"({"mode": "finetune", "parallelism": {"cp": 2}, "executor": {"cpu_ranks": 2},
           "peft": {"kind": "lora", "target_modules": ["qkv"], "dropout": 0.1}})",
       "peft.dropout", "peft.dropout=0.1", "set peft.dropout=0"},
      {R"({"parallelism": {"cp": 2, "tp": 2, "sequence_parallel": true}, "executor": {"cpu_ranks": 4}})",
       "parallelism.sequence_parallel", "parallelism.cp=2 with parallelism.sequence_parallel=true", "parallelism.cp=1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.patch);
    const auto r = resolve_json(with(tiny_gpt(), json::parse(c.patch)), gpu_facts(1, 2, true, 80));
    INFO(report(r));
    bool found = false;
    for (const auto& v : r.violations)
      if (v.path == c.path && v.message.find(c.says) != std::string::npos) {
        found = true;
        CHECK(v.fix.find(c.fix) != std::string::npos);
      }
    CHECK(found);
  }
}

TEST_CASE("the memory estimate holds seq/cp tokens of activations plus the ring's buffers") {
  const json base =
      with(tiny_gpt(), json::parse(R"({"model": {"seq_length": 2048, "max_position_embeddings": 2048}})"));
  const auto one = resolve_json(base);
  const auto two = resolve_json(with(base, json::parse(R"({"parallelism": {"cp": 2}, "executor": {"cpu_ranks": 2}})")));
  INFO(report(one) << report(two));
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  const auto e1 = recipe::plan::estimate_memory(one.plan), e2 = recipe::plan::estimate_memory(two.plan);
  CHECK(e2.activations < e1.activations);
  // Half the tokens of every per-layer buffer, plus four [micro·seq/2, qkv] ring blocks.
  const int64_t qkv = int64_t(3) * 64, ring = 4 * int64_t(2) * 1024 * qkv * 4;
  CHECK(e2.activations > e1.activations / 2);
  CHECK(e2.activations >= ring);
  CHECK(e2.weights == e1.weights);
}

TEST_CASE("on CUDA the workspace holds the ring blocks' compact results besides cuDNN's own") {
  // Deterministic attention keeps one dQ partial per key tile, so cuDNN's share (not the own
  // kernels' or the 64 MiB floor) sets the size and the blocks' scratch shows in it.
  const json base = with(tiny_gpt(), json::parse(R"({"model": {"seq_length": 8192, "max_position_embeddings": 8192},
                                                       "trainer": {"device": "cuda", "micro_batch_size": 8,
                                                                   "deterministic": true},
                                                       "parallelism": {"cp": 2}})"));
  const auto r = resolve_json(base, gpu_facts(1, 2, true, 80));
  INFO(report(r));
  REQUIRE(r.ok());
  // The same local shape without context parallelism: 4096 tokens on one rank.
  recipe::plan::Plan local = r.plan;
  local.parallelism.cp = 1;
  local.model.seq_length = 4096;
  // N = 8·4096 local rows, 4 heads of 16 (MHA): lse rows N·4·4 B, dQ and dK|dV N·(4 + 8)·16·2 B.
  const int64_t N = int64_t(8) * 4096, blocks = N * 4 * 4 + N * 12 * 16 * 2, mib = 1 << 20;
  const int64_t with_ring = recipe::plan::cuda_workspace_bytes(r.plan);
  const int64_t without = recipe::plan::cuda_workspace_bytes(local);
  CHECK(without > 64 * mib);  // above the floor, so the difference below is the formula's
  CHECK(with_ring - without >= blocks - mib);
  CHECK(with_ring - without <= blocks + 2 * mib);
  CHECK(r.plan.kernels.workspace_bytes == with_ring);
}
